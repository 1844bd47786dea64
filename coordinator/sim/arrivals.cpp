// Trace jobs arriving in the pending queue, and their run-time predictions
// (users' run history, predict.hpp; EASY++ extensions).
#include "coordinator/sim/simulator.hpp"

namespace corral::sim::detail {

Time Simulator::predict(const SwfJob& s) const {
  if (!opt_.predict) return 0;
  return predictor_.predict(s);  // 0: no history, the requested time is the estimate
}

void Simulator::arrive(std::size_t idx) {
  const SwfJob& s = tr_.jobs[idx];
  Rec& r = recs_[idx];
  Hot& h = hot_[idx];
  // Arrivals come in submit, id order; built in place with its defaults
  // (not value-initialized: that zeroes the whole Job first).
  Job& j = snap_.pending.emplace_back(NewJob{jid(idx)});
  if (names_) {
    if (s.user >= 0) j.user = name_of(user_names_, s.user);
    if (s.group >= 0) j.group = name_of(group_names_, s.group);
  }
  j.submit = s.submit;
  j.walltime = s.estimate;
  const bool scout = opt_.predict && predictor_.arrive(s);
  set_prediction(j, s);
  j.slots_min = j.slots_max = s.procs;
  j.checkpointable = ckpt_mark_[idx] != 0;
  ++arrived_;
  if (opt_.aging_backlog > 0 && is_wide(j, cfg_.order, total_))
    j.age_at = s.submit + static_cast<Time>(opt_.aging_backlog * backlog_seconds(s.submit));
  if (opt_.on_arrival) opt_.on_arrival(j, s);
  // A hook may have changed its submit time.
  if (snap_.pending.size() >= 2 && fifo_less(j, snap_.pending[snap_.pending.size() - 2])) hints_.pending.fifo = false;
  if (opt_.projects) arrive_project(idx, j);
  // Time-based policy thresholds need a pass when they are crossed, even
  // if no job arrives or ends then: PBA's pending threshold ("pending for
  // more than a predetermined period") and NCI's start window.
  if (cfg_.pba.enabled && cfg_.pba.preempt && !j.project.empty() && cfg_.pba.preempt_after > 0)
    wake_.push(s.submit + cfg_.pba.preempt_after + 1);  // "more than": the next second
  if (cfg_.nci.enabled && cfg_.nci.window_wait > 0) {
    wake_.push(s.submit + cfg_.nci.window_wait);
    wake_.push(s.submit + window_bound(cfg_.nci));  // when it becomes overdue
  }
  // An aged job may preempt (planner/preempt.hpp): a pass when it ages.
  if (runs_selective_preemption(cfg_) && cfg_.preempt.aged_preempt)
    if (Time a = aging_of(j, cfg_.order, total_); a > 0) wake_.push(s.submit + a);
  r.plan_est = j.estimate > 0 ? j.estimate : j.walltime;
  h.st = St::Pending;
  slots_add(j.slots_min, +1);
  count_pending(idx, +1);
  set_odd(idx, j);
  if (swap_pending_) fifo_insert(snap_.pending.size() - 1);
  if (scout) repredict(s.user);  // the scout is queued: predicted anew
}

double Simulator::backlog_seconds(Time now) const {
  // Order-only predictions shorten a run; planning ones are the estimate already.
  auto left = [](const Job& j) {
    const Time e = j.estimate > 0 ? j.estimate : j.walltime;
    return j.predicted > 0 ? std::min(e, j.predicted) : e;
  };
  double work = 0;
  for (const RunningJob& rj : snap_.running) {
    if (rj.suspended) continue;
    const Time end = std::min(rj.expected_end, rj.start + left(rj.job));
    work += static_cast<double>(rj.slots) * static_cast<double>(std::max<Time>(0, end - now));
  }
  for (std::size_t k = 0; k + 1 < snap_.pending.size(); ++k)  // the last is the arriving job
    work += static_cast<double>(snap_.pending[k].slots_min) * static_cast<double>(left(snap_.pending[k]));
  return work / static_cast<double>(std::max<std::int64_t>(1, total_));
}

void Simulator::repredict(long user) {
  auto it = pend_of_user_.find(user);
  if (it == pend_of_user_.end() || it->second <= 0) return;
  for (Job& j : snap_.pending) {
    const std::size_t k = static_cast<std::size_t>(j.id - 1);
    if (tr_.jobs[k].user != user) continue;
    set_prediction(j, tr_.jobs[k]);
    recs_[k].plan_est = j.estimate > 0 ? j.estimate : j.walltime;
    set_odd(k, j);
  }
}

void Simulator::extend_predictions() {
  while (!extend_.empty() && extend_.top().t <= now_) {
    Ev e = extend_.top();
    extend_.pop();
    Rec& r = recs_[e.idx];
    Hot& h = hot_[e.idx];
    if (e.gen != h.gen || h.st != St::Running) continue;
    RunningJob& rj = snap_.running[static_cast<std::size_t>(run_pos_[e.idx])];
    touch_running(run_pos_[e.idx]);
    Time req_left = std::max<Time>(1, tr_.jobs[e.idx].estimate - r.work_done);
    rj.expected_end = std::max(rj.expected_end, r.seg_start + r.seg_overhead + req_left + cfg_.planner.duration_offset);
  }
}

}  // namespace corral::sim::detail
