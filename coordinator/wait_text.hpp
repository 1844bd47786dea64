// The words of `corral stat` for why a pending job waits, once for a standalone node
// (agent/wait_reasons.cpp) and a mesh's coordinator (coordinator/service/job_waits.cpp).
#pragma once

#include <algorithm>
#include <cstdint>
#include <ctime>
#include <string>

#include "coordinator/model.hpp"

namespace corral::wait_text {

inline std::string clock(Time t) {
  const time_t tt = static_cast<time_t>(t);
  tm lt{};
  localtime_r(&tt, &lt);
  char b[32];
  std::strftime(b, sizeof b, "%H:%M:%S", &lt);
  return b;
}

// "N WHAT (M free)" when `need` is above `free`, else "".
inline std::string short_of(std::int64_t need, std::int64_t free, const std::string& what) {
  if (need <= free) return "";
  return std::to_string(need) + " " + what + " (" + std::to_string(std::max<std::int64_t>(0, free)) + " free)";
}

// The kResources detail from the short_of() parts ("" each when not short); "" when none is.
inline std::string lacks(std::initializer_list<std::string> parts, const std::string& where) {
  std::string out;
  for (const std::string& s : parts)
    if (!s.empty()) out += (out.empty() ? "waits for " : ", ") + s;
  return out.empty() ? out : out + " held by running jobs" + where;
}

inline std::string reserved(JobId other, Time at) {
  return "job " + std::to_string(other) + " is reserved from " + clock(at) + " and starting this job now would delay it";
}

inline std::string allocation(const std::string& project, int slots) {
  return "project " + project + " has " + std::to_string(slots) +
         " slots allocated this week; free slots are kept for projects within their allocation";
}

inline std::string held(const std::string& by, const std::string& hold, JobId job) {
  return "held by " + by + " (" + hold + " hold): it starts only after corral release " + std::to_string(job);
}

inline std::string array_limit(JobId array, std::int64_t max_running) {
  return "job array " + std::to_string(array) + " runs its limit of " + std::to_string(max_running) +
         " tasks at once (%" + std::to_string(max_running) + "): it starts when one of them ends";
}

inline constexpr const char* kPriority = "jobs ahead of it in the queue are placed first (or the next pass has not run yet)";

}  // namespace corral::wait_text
