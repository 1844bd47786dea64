// `corral sim --oracle-starts FILE` (sim_oracle.hpp).
#include "tools/corral/sim_oracle.hpp"

#include <algorithm>
#include <charconv>
#include <fstream>
#include <stdexcept>
#include <utility>

namespace corral::cli {

namespace {

template <class T>
bool whole(std::string_view s, T& out) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && p == s.data() + s.size();
}

}  // namespace

std::unordered_map<JobId, Time> read_oracle_starts(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("--oracle-starts: cannot read '" + path + "'");
  std::unordered_map<JobId, Time> starts;
  std::string line;
  for (std::size_t n = 1; std::getline(in, line); ++n) {
    if (line.empty()) continue;
    const std::size_t comma = line.find(',');
    JobId id = 0;
    Time start = 0;
    const std::string where = "--oracle-starts: " + path + ":" + std::to_string(n);
    if (comma == std::string::npos || !whole(std::string_view(line).substr(0, comma), id) ||
        !whole(std::string_view(line).substr(comma + 1), start) || start < -1)
      throw std::runtime_error(where + ": expected 'id,start' (as --starts writes), got '" + line + "'");
    if (start >= 0 && !starts.emplace(id, start).second)
      throw std::runtime_error(where + ": job " + std::to_string(id) + " given twice");
  }
  return starts;
}

void use_oracle(sim::SimOptions& opt, const SimOracle& oracle, std::unordered_map<JobId, Time> starts) {
  opt.on_arrival = [before = std::move(opt.on_arrival), o = oracle, starts = std::move(starts)](
                       Job& j, const sim::SwfJob& s) {
    if (before) before(j, s);
    const auto it = starts.find(s.id);
    if (it == starts.end()) return;
    const Time wait = std::max<Time>(0, it->second - s.submit);
    if (wait < o.min_wait) return;
    // Job::age_at 0 means none: a job submitted at 0 ages at 1 s at the earliest.
    const Time at = std::max<Time>(1, s.submit + static_cast<Time>(o.fraction * static_cast<double>(wait)));
    j.age_at = j.age_at > 0 ? std::min(j.age_at, at) : at;
  };
}

}  // namespace corral::cli
