// The job start window ("Job start time window"): when a job must start,
// when it is overdue, and how long suspended jobs wait to resume.
#include "coordinator/nci/nci.hpp"

namespace corral {

bool window_closed(const Job& job, Time now, const NciConfig& cfg) {
  return (cfg.window_cycles > 0 && job.cycles_pending >= cfg.window_cycles) ||
         (cfg.window_wait > 0 && now - job.submit >= cfg.window_wait);
}

// "Job start time window": the time form's guarantee (NciConfig::window_quantum).
bool window_overdue(const Job& job, Time now, const NciConfig& cfg) {
  return cfg.window_wait > 0 && job.first_start < 0 && now - job.submit >= cfg.window_wait + window_quantum(cfg);
}

Time window_quantum(const NciConfig& cfg) {
  if (cfg.window_wait <= 0) return 0;
  return cfg.window_quantum < 0 ? cfg.window_wait : cfg.window_quantum;
}

Time resume_window(const NciConfig& cfg) {
  if (cfg.window_wait <= 0) return 0;
  return cfg.resume_window < 0 ? 3 * cfg.window_wait : cfg.resume_window;
}

bool window_protected(const RunningJob& rj, Time now, const NciConfig& cfg) {
  return cfg.window_wait > 0 && rj.start - rj.job.submit >= cfg.window_wait &&
         now - rj.start < window_quantum(cfg);
}

Time window_bound(const NciConfig& cfg) {
  return cfg.window_wait > 0 ? cfg.window_wait + window_quantum(cfg) : 0;
}

}  // namespace corral
