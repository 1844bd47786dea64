// What a job record holds and has used: its slots and its suspended time.
#pragma once

#include <algorithm>
#include <utility>

#include "agent/store.hpp"

namespace corral::agent {

// Slots a started job holds: the cores it was granted (a -pe range grants a
// count within it), else its request.
inline int granted(const JobRecord& r) {
  return r.cores.empty() ? r.spec.ncpus : static_cast<int>(r.cores.size());
}
// Seconds suspended in the current run, including an ongoing suspension.
inline double suspended_total(const JobRecord& r, double now) {
  return r.suspended_seconds + (r.suspended_since > 0 ? std::max(0.0, now - r.suspended_since) : 0.0);
}
// Ends an ongoing suspension at `now` (its time is added to suspended_seconds).
inline void close_suspension(JobRecord& r, double now) {
  r.suspended_seconds = suspended_total(r, now);
  r.suspended_since = 0;
}
// The slot range a spec asks for: a -pe range (min-max), else exactly ncpus.
inline std::pair<int, int> slot_range(const proto::JobSpec& s) {
  if (!s.pe.empty() && s.slots_min >= 1 && s.slots_max >= s.slots_min) return {s.slots_min, s.slots_max};
  return {s.ncpus, s.ncpus};
}

}  // namespace corral::agent
