// Jobs entering and leaving the running set: starts, completions,
// checkpoint ends and the recorded segments.
#include "coordinator/sim/simulator.hpp"

namespace corral::sim::detail {

void Simulator::add_running(std::size_t idx, Job& j, int slots, std::vector<Placement>& place, bool backfilled) {
  Rec& r = recs_[idx];
  Hot& h = hot_[idx];
  const SwfJob& s = tr_.jobs[idx];
  if (ProjAcc* a = acc(idx)) {
    if (r.first_start < 0 && within_[idx]) a->pend_within -= j.slots_min;
    a->used += slots;
  }
  if (r.first_start < 0) r.first_start = now_;
  pba::on_start(j, now_);  // last_start_priority, first_start (pba.hpp contract)
  r.seg_start = now_;
  r.seg_overhead = r.work_done > 0 ? opt_.restart_cost : 0;
  res_.restart_cost_total += r.seg_overhead * slots;
  r.actual_end = now_ + r.seg_overhead + (s.run - r.work_done);
  h.st = St::Running;
  ++h.gen;
  heap_.push({r.actual_end, static_cast<std::uint32_t>(idx), h.gen});
  run_pos_[idx] = static_cast<std::int32_t>(snap_.running.size());
  const Time left_est = std::max<Time>(1, r.plan_est - r.work_done);
  const Time expected_end = now_ + r.seg_overhead + left_est + cfg_.planner.duration_offset;
  // Built in place, its job moved member-wise (j is a pending entry the
  // compaction overwrites); every other member as listed or its default.
  // Every member listed: GCC zeroes an aggregate given fewer first.
  static_assert(field_count<RunningJob>() == 11, "corral::RunningJob changed: list every member here");
  static const RunningJob kDefault{};
#if __cpp_aggregate_paren_init >= 201902L
  RunningJob& rj = snap_.running.emplace_back(MovedJob{j}, now_, expected_end, slots, std::move(place),
                                              /*suspended=*/false, backfilled, kDefault.suspended_for,
                                              kDefault.suspended_since, kDefault.stopping,
                                              kDefault.backfill_estimate);
#else  // clang before 16 cannot build an aggregate from parentheses: one move more
  RunningJob& rj = snap_.running.emplace_back(RunningJob{MovedJob{j}, now_, expected_end, slots, std::move(place),
                                                         /*suspended=*/false, backfilled, kDefault.suspended_for,
                                                         kDefault.suspended_since, kDefault.stopping,
                                                         kDefault.backfill_estimate});
#endif
  if (backfilled && cfg_.planner.backfill == Backfill::Checkpoint) {
    Time window_end = now_ + std::max<Time>(1, backfill_duration(rj.job, cfg_.planner));
    if (window_end < r.actual_end) wake_.push(window_end);
  }
  if (expected_end < r.actual_end) extend_.push({expected_end, static_cast<std::uint32_t>(idx), h.gen});
  touch_running(run_pos_[idx]);
}

void Simulator::erase_running(std::size_t idx) {
  const std::int32_t p = run_pos_[idx];
  touch_running(p);  // the last entry moves here
  RunningJob& here = snap_.running[static_cast<std::size_t>(p)];
  // Its placement buffer serves a later compact start (pass()).
  if (cfg_.planner.compact_starts && here.placement.capacity() > 0) {
    if (pool_n_ == place_pool_.size()) place_pool_.emplace_back();
    here.placement.swap(place_pool_[pool_n_++]);  // an empty one in its place
  }
  if (static_cast<std::size_t>(p) + 1 != snap_.running.size()) {
    shift_running(here, snap_.running.back());
    run_pos_[here.job.id - 1] = p;
  }
  snap_.running.pop_back();
  run_pos_[idx] = -1;
}

void Simulator::segment(std::size_t idx, const RunningJob& rj, Time end, SegEnd how) {
  if (!opt_.record_segments) return;
  const Time start = recs_[idx].seg_start;
  // The reservation counts if the pass before the one that started it made it.
  auto prev = std::lower_bound(pass_times_.begin(), pass_times_.end(), start);
  const bool held = prev != pass_times_.begin() && !resv_made_.empty() && resv_made_[idx] == *(prev - 1);
  res_.segments.push_back({tr_.jobs[idx].id, start, end, rj.slots, rj.placement, how == SegEnd::Checkpoint,
                           how == SegEnd::Requeue, how == SegEnd::Suspend, held ? resv_at_[idx] : -1});
}

void Simulator::finish(std::size_t idx) {
  Rec& r = recs_[idx];
  Hot& h = hot_[idx];
  {
    // As take_running(), but read in place: the entry is not moved out.
    const RunningJob& rj = snap_.running[static_cast<std::size_t>(run_pos_[idx])];
    stop_running(idx, rj);
    segment(idx, rj, now_, SegEnd::Done);
    // Throughput SLA progress (pba.hpp contract).
    if (cfg_.pba.enabled && !rj.job.project.empty()) ++cfg_.pba.jobs_done[rj.job.project];
    erase_running(idx);
  }
  r.end = now_;
  h.st = St::Done;
  ++h.gen;
  if (!opt_.predict && !opt_.repredict) return;  // the trace job is not read (a cache miss an end)
  const SwfJob& s = tr_.jobs[idx];
  if (s.user >= 0) {  // run history (read by predict() only)
    if (opt_.predict) predictor_.record(s);
    if (opt_.repredict) repredict(s.user);
  }
}

void Simulator::end_checkpoint(std::size_t idx) {
  RunningJob rj = take_running(idx);
  segment(idx, rj, now_, SegEnd::Checkpoint);
  requeue(idx, std::move(rj.job));
}

}  // namespace corral::sim::detail
