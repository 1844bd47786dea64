// One scheduling pass: the core's schedule() on the snapshot, its updates
// and decisions applied to the replay.
#include "coordinator/sim/simulator.hpp"

namespace corral::sim::detail {

void Simulator::apply_updates(const std::vector<JobUpdate>& ups) {
  if (upd_of_.size() != n_) upd_of_.assign(n_, UINT32_MAX);
  bool any_pending = false;
  for (std::size_t k = 0; k < ups.size(); ++k) {
    const JobId id = ups[k].job;
    if (id < 1 || id > n_) continue;
    const std::size_t idx = static_cast<std::size_t>(id - 1);
    if (run_pos_[idx] >= 0) {
      pba::apply_update(snap_.running[static_cast<std::size_t>(run_pos_[idx])].job, ups[k]);
      touch_running(run_pos_[idx]);
    } else if (hot_[idx].st == St::Pending) {
      upd_of_[idx] = static_cast<std::uint32_t>(k);
      any_pending = true;
    }
  }
  if (!any_pending) return;
  for (Job& j : snap_.pending) {
    std::uint32_t& k = upd_of_[j.id - 1];
    if (k == UINT32_MAX) continue;
    pba::apply_update(j, ups[k]);
    k = UINT32_MAX;
  }
}

void Simulator::note_reservations() {
  if (resv_at_.empty()) {
    resv_at_.assign(n_, -1);
    resv_made_.assign(n_, -1);
  }
  pass_times_.push_back(now_);
  auto note = [&](JobId id, Time at) {
    if (id < 1 || id > n_) return;
    resv_at_[id - 1] = at;
    resv_made_[id - 1] = now_;
  };
  for (const Decision& d : plan_.decisions)
    if (d.action == Action::Reserve) note(d.job, d.at);
  for (const ReserveRecord& rr : plan_.reserves) note(rr.job, rr.at);
}

void Simulator::report_monitor() {
  monitor_trace_ids(plan_.monitor, tr_);
  opt_.on_monitor(plan_.monitor);
}

void Simulator::pass() {
  extend_predictions();
  snap_.now = now_;
  if (ledger_ && cfg_.nci.enabled) cfg_.nci.grant_left = ledger_->grants_left(now_);
  if (opt_.on_pass) [[unlikely]] opt_.on_pass(snap_, hints_);
  if (opt_.checkpoint_budget > 0)
    cfg_.planner.checkpoint_fresh =
        static_cast<double>(jobs_checkpointed_) < opt_.checkpoint_budget * static_cast<double>(arrived_);
  if (opt_.scheduler) plan_ = opt_.scheduler(snap_, cfg_, opt_.seed + res_.passes);
  else schedule(snap_, hints_, cfg_, opt_.seed + res_.passes, planner_, plan_);  // plan_'s vectors reused
  if (opt_.on_monitor) [[unlikely]] report_monitor();
  if (opt_.record_segments) [[unlikely]] note_reservations();
  // Changes from here on are relative to what this pass saw.
  hints_.running.since = hints_.running.version;
  hints_.running.touched.clear();
  Plan& plan = plan_;
  ++res_.passes;
  bool any_start = false;
  notes_n_ = 0;
  auto index_of = [&](JobId id) -> std::size_t {
    return (id >= 1 && id <= n_) ? static_cast<std::size_t>(id - 1) : n_;
  };
  if (!plan.updates.empty()) apply_updates(plan.updates);
  // An overdue window job left waiting behind one started this pass (it
  // holds its cores this pass: nci.hpp window_quantum) gets the next
  // cycle at once.
  if (cfg_.nci.enabled && cfg_.nci.window_wait > 0) {
    std::vector<JobId> started;
    for (const Decision& d : plan.decisions)
      if (d.action == Action::Start) started.push_back(d.job);
    std::size_t over = 0;
    bool started_over = false;
    for (const Job& j : snap_.pending)
      if (window_overdue(j, now_, cfg_.nci)) {
        ++over;
        started_over |= std::find(started.begin(), started.end(), j.id) != started.end();
      }
    if (started_over && over > 1) wake_.push(now_ + 1);
  }
  // Stops first, so the cores they free are there for this pass's starts.
  for (const Decision& d : plan.decisions) {
    std::size_t idx = index_of(d.job);
    if (idx == n_) continue;
    bool stopped = false;
    switch (d.action) {
      case Action::Checkpoint: stopped = do_checkpoint(idx); break;
      case Action::Requeue: stopped = do_requeue(idx, d.pba_preemption); break;
      case Action::Suspend: stopped = do_suspend(idx, d.pba_preemption); break;
      default: break;
    }
    if (stopped && !pacc_.empty()) count_preemption(idx, d.reason);
  }
  for (Decision& d : plan.decisions) {
    std::size_t idx = index_of(d.job);
    if (idx == n_) continue;
    Hot& h = hot_[idx];
    switch (d.action) {
      case Action::Resume: do_resume(idx); break;
      case Action::Start:
        if (StartNote* sn = accept_start(idx, d.slots, d.placement)) {
          sn->place = std::move(d.placement);  // the plan is ours: no copy
          sn->backfilled = d.backfilled;
          any_start = true;
        }
        break;
      case Action::Reject:
        if (h.st == St::Pending) {
          h.st = St::Rejected;
          any_start = true;  // removed from pending below
          leaving_.push_back(idx);
        }
        break;
      case Action::Demote:
        if (h.st == St::Pending)
          for (Job& j : snap_.pending)
            if (j.id == d.job) {
              j.queue = d.queue;
              set_odd(idx, j);
            }
        break;
      default: break;
    }
  }
  // PlannerConfig::compact_starts: the fast path's starts (the decisions
  // above hold none of them; Resume, Checkpoint, Requeue and Suspend never
  // come with them), in the order made.
  for (const StartRecord& sr : plan.starts) {
    const std::size_t idx = index_of(sr.job);
    if (idx == n_) continue;
    const std::span<const Placement> place(plan.start_placements.data() + sr.first, sr.count);
    StartNote* sn = accept_start(idx, sr.slots, place);
    if (sn == nullptr) continue;
    // A placement buffer of a finished job (no allocation per start).
    if (pool_n_ > 0) sn->place.swap(place_pool_[--pool_n_]);
    copy_place(sn->place, place);
    sn->backfilled = false;
    any_start = true;
  }
  if (!any_start) return;
  {
    const auto by_idx = [](const StartNote& a, const StartNote& b) { return a.idx < b.idx; };
    const auto e = notes_.begin() + static_cast<std::ptrdiff_t>(notes_n_);
    if (!std::is_sorted(notes_.begin(), e, by_idx)) std::sort(notes_.begin(), e, by_idx);  // FIFO starts come sorted
    note_at_ = 0;
  }
  if (swap_pending_) {
    leave_swapped();
    return;
  }
  auto& pend = snap_.pending;
  // Pending stays sorted by internal id (arrivals in trace order, requeues
  // at their submit-order place): the leaving jobs are found by binary
  // search, and only the jobs behind the first of them move.
  leave_pos_.clear();
  for (std::size_t idx : leaving_) {
    const JobId id = jid(idx);
    auto it = std::lower_bound(pend.begin(), pend.end(), id, [](const Job& a, JobId b) { return a.id < b; });
    if (it == pend.end() || it->id != id) {  // not sorted after all: one sweep over every job
      leave_pos_.clear();
      break;
    }
    leave_pos_.push_back(static_cast<std::size_t>(it - pend.begin()));
  }
  const bool by_pos = !leave_pos_.empty();
  leaving_.clear();
  std::sort(leave_pos_.begin(), leave_pos_.end());
  leave_pos_.erase(std::unique(leave_pos_.begin(), leave_pos_.end()), leave_pos_.end());
  // One sweep moves every started job from pending to running.
  std::size_t w = by_pos ? leave_pos_.front() : 0;
  std::size_t next_leave = 0;
  for (std::size_t i = w; i < pend.size(); ++i) {
    if (by_pos && (next_leave == leave_pos_.size() || i != leave_pos_[next_leave])) {
      shift_job(pend[w++], pend[i]);  // w < i here: a job ahead of it left
      continue;
    }
    ++next_leave;
    if (!leave(static_cast<std::size_t>(pend[i].id - 1), pend[i])) {
      if (w != i) shift_job(pend[w], pend[i]);
      ++w;
    }
  }
  pend.resize(w);
  if (pend.empty()) hints_.pending.fifo = true;
}

}  // namespace corral::sim::detail
