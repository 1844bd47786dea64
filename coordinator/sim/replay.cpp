// The replay: the simulator's setup from the options and its event loop
// (completions, arrivals, then one scheduling pass per event time).
#include <algorithm>
#include <chrono>
#include <stdexcept>

#include "coordinator/sim/simulator.hpp"

namespace corral::sim::detail {

Simulator::Simulator(const SwfTrace& tr, const SimOptions& o) : tr_(tr), opt_(o), cfg_(o.sched) {
  predictor_.set_burst_gap(o.burst_gap);
  predictor_.set_scout_min(o.scout_min);
  n_ = tr.jobs.size();
  if (opt_.max_jobs > 0 && opt_.max_jobs < n_) n_ = opt_.max_jobs;
  int machine = tr.max_procs > 0 ? tr.max_procs : tr.max_nodes;
  int nodes = opt_.nodes > 0 ? opt_.nodes : machine;
  if (nodes <= 0)
    throw std::invalid_argument("the trace has no '; MaxProcs:' or '; MaxNodes:' header: give --nodes N");
  if (opt_.cores <= 0) throw std::invalid_argument("cores per node must be > 0");
  cpn_ = opt_.cores;
  total_ = static_cast<std::int64_t>(nodes) * cpn_;
  if (total_ > (1 << 24)) throw std::invalid_argument("machine too large (more than 16M cores)");
  snap_.nodes.resize(static_cast<std::size_t>(nodes));
  for (int i = 0; i < nodes; ++i) {
    snap_.nodes[static_cast<std::size_t>(i)].name = "n" + std::to_string(i);
    snap_.nodes[static_cast<std::size_t>(i)].cores = cpn_;
  }
  node_used_.assign(static_cast<std::size_t>(nodes), 0);
  busy_.assign((static_cast<std::size_t>(nodes) + 63) / 64, 0);
  bits_ = cpn_ == 1;
  // SGE's duration offset (SimOptions::duration_offset: 0 unless asked, the
  // trace's run times being exact); the planner knows what a restart costs.
  cfg_.planner.duration_offset = std::max<Time>(0, opt_.duration_offset);
  cfg_.planner.restart_cost = opt_.restart_cost;
  cfg_.planner.checkpoint_cost = opt_.checkpoint_cost;
  if (opt_.on_monitor) cfg_.planner.monitor = true;
  if (opt_.on_setup) opt_.on_setup(snap_, cfg_);
  // Pending stays in FIFO order (arrivals in trace order, requeues at
  // their place, starts removed in place): the order stage need not check
  // it (PendingHints::fifo); arrive() keeps the promise true.
  hints_.pending.fifo = std::is_sorted(snap_.pending.begin(), snap_.pending.end(), fifo_less);
  hints_.nodes_version = 1;  // the nodes never change during a replay (a kept Planner reuses them)
  if (cfg_.pba.enabled && !cfg_.planner.may_place &&
      std::any_of(snap_.nodes.begin(), snap_.nodes.end(), [](const Node& nd) { return nd.mem_mb > 0; }))
    cfg_.planner.may_place = pba::may_place_now;  // placeholder slots need node memory
  if (opt_.projects) setup_projects();
  // The replay binds no cores: placements name nodes and slots only (one
  // heap block less per node of every start). NCI reads the cores of its
  // suspended jobs' placements, so with it (or PBA) they are still picked.
  if (!cfg_.nci.enabled && !cfg_.pba.enabled) cfg_.planner.pick_cores = false;
  // Without cores, consecutive nodes of a start come as one range
  // (Placement::count): one entry per range instead of per node. Only
  // where passes take the planner's fast path (fcfs, easy, conservative
  // on plain nodes, nothing freed by a stage): the general path would
  // expand the ranges into a copy of the snapshot every pass.
  const Backfill bf = cfg_.planner.backfill;
  if (!cfg_.nci.enabled && !cfg_.pba.enabled && !cfg_.planner.pick_cores &&
      (bf == Backfill::Fcfs || bf == Backfill::Easy || bf == Backfill::Conservative) &&
      !runs_selective_preemption(cfg_) && !cfg_.planner.monitor && snap_.queues.empty() && snap_.global.empty() &&
      std::all_of(snap_.nodes.begin(), snap_.nodes.end(),
                  [](const Node& nd) { return nd.mem_mb <= 0 && nd.jobfs_mb <= 0 && nd.consumables.empty(); }))
    cfg_.planner.node_ranges = true;
  // There too, starts come as compact records (model.hpp Plan::starts):
  // no Decision and no placement vector per start. Not for a caller's
  // pass function (it may read Start decisions).
  // Reservations too (Plan::reserves): the replay does not read them.
  if (cfg_.planner.node_ranges && !opt_.scheduler) cfg_.planner.compact_starts = cfg_.planner.compact_reserves = true;
  // There every start comes from the planner's fast path, which places it
  // on nodes free in its own occupancy (kept from `running`, the same
  // placements the simulator would count): the simulator keeps the core
  // count only, not a second occupancy per node (one node walk less per
  // start and end). A caller's pass function is checked node by node.
  planner_nodes_ = cfg_.planner.compact_starts && !opt_.scheduler;
  // With no allocation policy and no checkpointing, a pass can only start
  // jobs into free cores: when no pending job fits in them it is a no-op.
  only_starts_ = !cfg_.pba.enabled && !cfg_.nci.enabled && cfg_.planner.backfill != Backfill::Checkpoint &&
                 !runs_selective_preemption(cfg_) &&
                 !cfg_.planner.monitor && !opt_.scheduler;
  slots_n_.assign(static_cast<std::size_t>(total_) + 2, 0);
  slots_nz_.assign((slots_n_.size() + 63) / 64, 0);
  slots_lo_ = slots_n_.size();
  recs_.resize(n_);
  hot_.resize(n_);
  ckpt_mark_ = mark_checkpointable(n_, opt_.checkpointable, opt_.seed);
  run_pos_.assign(n_, -1);
  // Pending kept unordered (a job that leaves is replaced by the last one:
  // one Job moved, not every job behind it), its FIFO order given in
  // PendingHints::order. Not with PBA or NCI (their stages
  // read pending in vector order), nor for a caller's own pass function.
  swap_pending_ = !cfg_.pba.enabled && !cfg_.nci.enabled && !opt_.scheduler && snap_.pending.empty();
  cores_only_ok_ = snap_.pending.empty();
  hints_.pending.cores_only = cores_only_ok_;
  if (swap_pending_) {
    hints_.pending.fifo = false;
    pend_pos_.assign(n_, -1);
    hints_.pending.slots_min.clear();
    hints_.pending.min_duration.clear();
    hints_.pending.order_slots_min.clear();
    hints_.pending.order_min_duration.clear();
  }
  res_.machine_procs = static_cast<int>(total_);
  // User and group names: read by NCI (per-user limits and shares), PBA
  // (project membership, the projects plan) and whatever a caller's hooks
  // or pass function do. The plain planner policies never read them, and
  // without them a queued job's strings are all empty: nothing to copy on
  // each move between pending and running.
  names_ = cfg_.nci.enabled || cfg_.pba.enabled || opt_.projects || opt_.scheduler || opt_.on_arrival || opt_.on_setup;
}

SimResult Simulator::run() {
  auto t0 = std::chrono::steady_clock::now();
  std::size_t next = 0;             // next arrival
  std::size_t tick = std::max<std::size_t>(1, n_ / 100), last_tick = 0;
  for (;;) {
    drop_stale();
    Time t = kForever;
    if (next < n_) t = tr_.jobs[next].submit;
    if (!heap_.empty()) t = std::min(t, heap_.top().t);
    if (!wake_.empty()) t = std::min(t, wake_.top());
    if (t == kForever) break;
    integrate(t);
    report_weeks_until(t);
    // Cores left idle while jobs waited (what packing loses).
    if (!snap_.pending.empty() && t > now_)
      res_.idle_while_waiting += static_cast<double>(total_ - used_) * static_cast<double>(t - now_);
    now_ = t;
    while (!wake_.empty() && wake_.top() <= now_) wake_.pop();
    // 1. completions (and checkpoints that finished)
    while (!heap_.empty() && heap_.top().t == now_) {
      Ev e = heap_.top();
      heap_.pop();
      const Hot& h = hot_[e.idx];
      if (e.gen != h.gen) continue;
      if (h.st == St::Running) finish(e.idx);
      else if (h.st == St::Checkpointing) end_checkpoint(e.idx);
    }
    // 2. arrivals
    while (next < n_ && tr_.jobs[next].submit == now_) arrive(next++);
    // 3. one scheduling pass
    if (!snap_.pending.empty() || suspended_ > 0) {
      if (pass_can_act()) pass();
      else ++res_.skipped_passes;
    }
    if (opt_.progress && next - last_tick >= tick) {
      last_tick = next;
      opt_.progress(static_cast<double>(next) / static_cast<double>(n_));
    }
  }
  if (opt_.progress) opt_.progress(1.0);
  res_.sim_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (opt_.weekly_reports && ledger_) {  // the last (partial) week
    Snapshot s = snap_;
    s.now = now_;
    res_.weekly.push_back(build_report(*ledger_, s, report_week_, allocations_of(report_week_)));
  }
  summarize();
  return std::move(res_);
}

}  // namespace corral::sim::detail

namespace corral::sim {

SimResult simulate(const SwfTrace& trace, const SimOptions& opt) {
  detail::Simulator s(trace, opt);
  return s.run();
}

}  // namespace corral::sim
