// What a job record holds and has used: its slots and its suspended time.
#pragma once

#include <algorithm>
#include <utility>

#include "agent/store.hpp"
#include "coordinator/service/spec_job.hpp"

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
using corral::slot_range;  // coordinator/service/spec_job.hpp

}  // namespace corral::agent
