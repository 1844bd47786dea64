// The replay's summary figures: waits, slowdowns, utilization, checkpoints.
#include "coordinator/sim/simulator.hpp"

namespace corral::sim::detail {

void Simulator::summarize() {
  SimResult& s = res_;
  s.jobs = n_;
  s.per_job.resize(n_);
  double wsum = 0, bsum = 0, work = 0;
  std::size_t started = 0;
  std::vector<Time> waits;
  waits.reserve(n_);
  Time first_submit = n_ ? tr_.jobs[0].submit : 0, last_end = first_submit;
  for (std::size_t i = 0; i < n_; ++i) {
    const SwfJob& j = tr_.jobs[i];
    const Rec& r = recs_[i];
    const Hot& h = hot_[i];
    JobResult& o = s.per_job[i];
    o = {j.id, j.submit, j.run, j.estimate, j.procs, r.first_start, r.end, r.checkpoints, r.requeues,
         h.st == St::Rejected, ckpt_mark_[i] != 0, j.user};
    s.jobs_checkpointable += ckpt_mark_[i];
    if (r.checkpoints > 0) ++s.jobs_checkpointed;
    if (h.st == St::Pending) ++s.unstarted;
    if (r.first_start >= 0) {
      Time w = r.first_start - j.submit;
      wsum += static_cast<double>(w);
      s.max_wait = std::max(s.max_wait, w);
      waits.push_back(w);
      ++started;
    }
    if (r.end >= 0) {
      ++s.finished;
      double b = std::max(1.0, static_cast<double>(r.end - j.submit) /
                                   static_cast<double>(std::max<Time>(j.run, 10)));
      bsum += b;
      s.max_bsld = std::max(s.max_bsld, b);
      work += static_cast<double>(j.run) * j.procs;
      last_end = std::max(last_end, r.end);
    }
  }
  s.mean_wait = started ? wsum / static_cast<double>(started) : 0;
  if (!waits.empty()) {
    // Nearest rank: the smallest wait at or above 99 % of the started jobs.
    const std::size_t k = (waits.size() * 99 + 99) / 100 - 1;
    std::nth_element(waits.begin(), waits.begin() + static_cast<std::ptrdiff_t>(k), waits.end());
    s.p99_wait = waits[k];
  }
  s.mean_bsld = s.finished ? bsum / static_cast<double>(s.finished) : 0;
  s.makespan = last_end - first_submit;
  s.utilization = s.makespan > 0 ? work / (static_cast<double>(total_) * static_cast<double>(s.makespan)) : 0;
  if (opt_.projects) summarize_projects(first_submit);
}

}  // namespace corral::sim::detail
