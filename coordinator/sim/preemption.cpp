// Applying the planner's preemptions: checkpoint, requeue, suspension and
// resumption, and whom each was made for.
#include "coordinator/sim/simulator.hpp"

namespace corral::sim::detail {

void Simulator::count_preemption(std::size_t idx, const std::string& reason) {
  ProjAcc* a = acc(idx);
  if (!a) return;
  ++a->suffered;
  for (std::size_t p = reason.find("job "); p != std::string::npos; p = reason.find("job ", p + 1)) {
    std::size_t q = p + 4;
    if (q >= reason.size() || reason[q] < '0' || reason[q] > '9') continue;
    unsigned long long id = std::strtoull(reason.c_str() + q, nullptr, 10);
    if (id >= 1 && id <= n_) ++pacc_[static_cast<std::size_t>(proj_[id - 1])].caused;
    break;
  }
}

bool Simulator::do_checkpoint(std::size_t idx) {
  Rec& r = recs_[idx];
  Hot& h = hot_[idx];
  if (h.st != St::Running || r.checkpoints >= 1000) return false;  // bound pathological loops
  const SwfJob& s = tr_.jobs[idx];
  Time work = std::max<Time>(0, now_ - r.seg_start - r.seg_overhead);
  r.work_done = std::min(s.run - 1, r.work_done + work);  // a checkpoint never completes the job
  if (r.checkpoints == 0) ++jobs_checkpointed_;
  ++r.checkpoints;
  ++res_.checkpoints;
  RunningJob& rj = snap_.running[static_cast<std::size_t>(run_pos_[idx])];
  touch_running(run_pos_[idx]);
  pba::on_requeue(rj.job);  // requeues + 1, cycles_pending = 0
  ++r.requeues;
  res_.checkpoint_cost_total += opt_.checkpoint_cost * rj.slots;
  res_.checkpoint_seconds += opt_.checkpoint_cost;
  ++h.gen;
  if (opt_.checkpoint_cost > 0) {
    // It holds its resources while the checkpoint is written.
    h.st = St::Checkpointing;
    rj.stopping = true;  // PBA must not pick it as a victim: it is leaving already
    rj.expected_end = now_ + opt_.checkpoint_cost;
    rj.backfilled = false;  // its cores come back when the checkpoint is written
    heap_.push({rj.expected_end, static_cast<std::uint32_t>(idx), h.gen});
  } else {
    end_checkpoint(idx);
  }
  return true;
}

bool Simulator::do_requeue(std::size_t idx, bool by_pba) {
  Rec& r = recs_[idx];
  Hot& h = hot_[idx];
  if (h.st != St::Running && h.st != St::Suspended) return false;
  if (h.st == St::Suspended) --suspended_;
  RunningJob rj = take_running(idx);
  if (h.st == St::Running) segment(idx, rj, now_, SegEnd::Requeue);
  ++r.requeues;
  pba::on_requeue(rj.job);  // requeues + 1, cycles_pending = 0
  if (by_pba) pba::on_pba_preemption(rj.job);  // the count PBA's requeue bound reads
  ++res_.preemptions;
  requeue(idx, std::move(rj.job));  // work since the last checkpoint is lost
  return true;
}

bool Simulator::do_suspend(std::size_t idx, bool by_pba) {
  Rec& r = recs_[idx];
  Hot& h = hot_[idx];
  if (h.st != St::Running) return false;
  RunningJob& rj = snap_.running[static_cast<std::size_t>(run_pos_[idx])];
  touch_running(run_pos_[idx]);
  (void)by_pba;  // PBA's suspensions do not count toward its requeue bound (pba.hpp)
  segment(idx, rj, now_, SegEnd::Suspend);
  charge(idx, rj);  // suspended time is not charged
  r.remaining = r.actual_end - now_;
  r.suspended_at = now_;
  h.st = St::Suspended;
  ++h.gen;
  rj.suspended = true;
  rj.suspended_since = now_;
  ++suspended_;
  release(rj.slots, rj.placement);
  ++res_.preemptions;
  return true;
}

void Simulator::do_resume(std::size_t idx) {
  Rec& r = recs_[idx];
  Hot& h = hot_[idx];
  if (h.st != St::Suspended) return;
  RunningJob& rj = snap_.running[static_cast<std::size_t>(run_pos_[idx])];
  touch_running(run_pos_[idx]);
  if (!can_take(rj.slots, rj.placement)) {
    ++res_.deferred_starts;
    return;
  }
  take(rj.slots, rj.placement);
  if (ProjAcc* a = acc(idx)) a->used += rj.slots;
  --suspended_;
  rj.suspended = false;
  rj.suspended_for += now_ - r.suspended_at;
  res_.max_suspension = std::max(res_.max_suspension, now_ - r.suspended_at);
  rj.expected_end += now_ - r.suspended_at;
  r.seg_start = now_;
  r.seg_overhead = 0;
  r.actual_end = now_ + r.remaining;
  h.st = St::Running;
  ++h.gen;
  heap_.push({r.actual_end, static_cast<std::uint32_t>(idx), h.gen});
}

}  // namespace corral::sim::detail
