// Reservation planning and backfilling.
//
// Implements sge6-reservation-backfill.txt (resource utilization diagrams per
// resource instance, reservations, max_reservation, default_duration,
// DURATION_OFFSET, slot ranges, MONITOR) plus the textbook FCFS / EASY /
// conservative policies and checkpoint-based aggressive backfilling
// (checkpoint-backfill-patent.zh.txt, see seeds/README.md).
//
// Resource model (documented choices):
//  * A job's slots may be spread over several nodes (Grid Engine $fill_up);
//    cores are therefore planned with ONE cluster-wide diagram, which is exact
//    for jobs that need only cores. Jobs that also need memory, jobfs, host
//    consumables, or run in a queue restricted to some hosts are "node-bound":
//    they are additionally checked host by host (slower path).
//    Node-bound reservations are pinned to hosts; a cores-only job starting
//    now only takes cores that stay free on their host for its whole run.
//    Cores-only reservations stay unpinned (exact: whoever starts first takes
//    free cores), except under conservative when the pass has a node-bound
//    job: then every reservation is pinned, so pins are made around real
//    hosts (an unpinned reservation ahead could need the very cores a later
//    pin takes). This costs a host search per reservation, so it is bounded
//    per pass (general_pass.hpp kPinWork, 20M node/allocation visits): past
//    it, cores-only reservations stay unpinned.
//  * Conservative keeps its promises: a kept Planner remembers the
//    pins of its last general-path pass. The next pass loads those of
//    still-pending jobs as "ghosts" in the host plan; a job ahead of a pinned
//    job avoids the ghost when that changes neither its start nor its slots
//    (a later job's pin never delays an earlier job), a job drops its own
//    ghost when its turn comes and keeps its old hosts when its start and
//    slots are unchanged. Tested: with every job ending on time, no job
//    (memory, host consumables, host-restricted queue, global licences, slot
//    ranges, cores-only) starts later than any pass promised
//    (test_properties.cpp). Remaining cases: (1) by
//    design, a job ahead that can start earlier than its own promise (or
//    with more slots) only on a later job's pinned hosts takes them, and
//    that later job may slip; (2) past the
//    kPinWork budget, a cores-only reservation ahead is unpinned and may take
//    a later pin's cores when it starts; (3) plan_pass() (no kept Planner) has
//    no memory of pins, so a node-bound reservation can slip.
//  * Job::consumables are per slot. A name found in Snapshot::global is debited
//    there (level G), in the job's Queue::consumables (level Q, one cluster-wide
//    pool per queue) and on every host that defines it (level H). A name
//    defined nowhere is rejected.
//  * Memory/jobfs are per job; on a multi-node placement each node carries its
//    share (rounded up) of the slots it hosts.
//  * Planned duration = base + duration_offset, base = Job::estimate if > 0,
//    else walltime if > 0, else default_duration. A restarted job
//    (work_done > 0) only has max(1, base - work_done) + restart_cost left.
//  * A running job releases its resources at max(expected_end, now + 1): one
//    that overran its estimate is busy now but assumed to end at the next
//    second. (EASY's shadow time follows the textbook instead: an expected end
//    in the past counts as "now"; the simulator keeps expected_end >= now.)
//  * Suspended jobs (RunningJob::suspended, or freed this pass by a Suspend
//    decision) hold memory, jobfs and consumables but no cores; other freed
//    jobs hold nothing.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>  // PlannerConfig::may_place (pba hook)
#include <memory>

#include "coordinator/model.hpp"
#include "coordinator/names.hpp"  // Backfill
#include "coordinator/planner/pass_hints.hpp"
#include "coordinator/planner/profile.hpp"  // sat_add

namespace corral {

struct PlannerConfig {
  Backfill backfill = Backfill::Easy;
  // `reserve` policy: reservations per pass for Job::reserve jobs (SGE
  // max_reservation; 0 = none). Other policies: easy reserves for the first
  // blocked job only, conservative for every job, checkpoint for the head.
  int max_reservation = 1;
  Time default_duration = kForever;   // SGE default "INFINITY"
  // SGE DURATION_OFFSET (default 60 s, as the specification): added to every
  // pending job's planned duration; callers add it to a running job's
  // RunningJob::expected_end too (model.hpp). `corral sim` sets its
  // --duration-offset (default 0: SWF run times are exact).
  Time duration_offset = 60;
  bool monitor = false;               // fill Plan::monitor (SGE MONITOR)
  // checkpoint policy: estimates above the threshold are multiplied by the
  // split factor p for the backfill test of non-head jobs.
  double checkpoint_split = 0.5;
  Time checkpoint_threshold = 3600;
  // checkpoint policy: reservations per pass, the head's and the next
  // blocked jobs' in the order (conservative backfilling's guarantee for the
  // first few); 1: the head only.
  int reserve_depth = 1;
  // checkpoint policy: beyond the head's, reservations go only to jobs that
  // have waited at least this long (0: to any blocked job, up to
  // reserve_depth). Reservations bound the waits of the old jobs; for a
  // young job they only keep cores idle ahead of it.
  Time reserve_wait = 0;
  // ... or once their wait reaches (reserve_factor - 1) x their requested
  // time (order.hpp factor_wait; 0: off): a short blocked job then keeps its
  // place instead of drifting behind newer jobs of higher factor.
  double reserve_factor = 0;
  // false: the caller's checkpoint budget is spent; only jobs checkpointed
  // before (Job::requeues > 0) may be backfilled at their split estimate or
  // chosen as preemption victims, so no further job is ever checkpointed.
  bool checkpoint_fresh = true;
  Time restart_cost = 0;              // seconds added to a restarted job
  // Seconds a checkpointed job keeps its resources while the checkpoint is
  // written. 0: its cores are free at once and the head starts in the same
  // pass; > 0: the head is reserved for now + checkpoint_cost.
  Time checkpoint_cost = 0;
  // false: Placement::cores stay empty (model.hpp allows it when the caller
  // does not bind cores, e.g. the simulator); nodes and slots are the same.
  bool pick_cores = true;
  // With pick_cores false: a start's consecutive nodes with the same slots
  // may come as one Placement with count > 1 (model.hpp), one entry per
  // range instead of per node (the simulator). The caller must read `count`. The
  // planner reads it in running entries whatever this says.
  bool node_ranges = false;
  // true: the cores-only fast path gives its starts as Plan::starts and
  // Plan::start_placements (model.hpp) instead of Start decisions; the
  // caller must read them (the simulator). The general path is unchanged.
  bool compact_starts = false;
  // true: the fast path's Reserve decisions come as Plan::reserves instead
  // (the simulator, which does not read them; conservative makes one for
  // every waiting job every pass).
  bool compact_reserves = false;
  // --- PBA placeholder slots ---
  // Optional: when set, a node-bound job may take `slots` cores on node
  // `node` only if this returns true; `plan` holds this pass's decisions so
  // far. pba sets it to pba::may_place_now (coordinator/pba/pba.hpp).
  std::function<bool(const Snapshot& snap, const PassState& st, const Plan& plan, const Job& job,
                     std::uint32_t node, int slots)> may_place;
};

// A valid job that needs cores only: slot range 1 <= min <= max, no negative
// request, the default queue, no consumables, not -now y (the planner's fast
// path plans it from the free cores alone; PendingHints::cores_only promises
// it).
inline bool cores_only_job(const Job& j) {
  // Sign tests or'ed together: one branch for the four non-negative fields.
  return j.slots_min >= 1 && j.slots_max >= j.slots_min && (j.mem_mb | j.jobfs_mb | j.walltime | j.estimate) >= 0 &&
         j.queue.empty() && j.consumables.empty() && !j.immediate;
}

// A lower bound of planned_duration(job, cfg) whatever cfg says (offsets,
// the default duration and restart costs left out): PendingHints::min_duration.
inline Time duration_floor(const Job& j) {
  if (j.work_done > 0) return 1;
  return j.estimate > 0 ? j.estimate : j.walltime > 0 ? j.walltime : 1;
}

// The duration the planner assumes for `job` (see the header comment).
// Inline: the fast easy scan calls it for most jobs that fit now.
inline Time planned_duration(const Job& job, const PlannerConfig& cfg) {
  Time base = job.estimate > 0 ? job.estimate : job.walltime > 0 ? job.walltime : cfg.default_duration;
  if (base <= 0) base = 1;
  if (base >= kForever) return kForever;
  if (job.work_done > 0) base = std::max<Time>(1, base - job.work_done) + cfg.restart_cost;
  return sat_add(base, std::max<Time>(0, cfg.duration_offset));
}
// The checkpoint policy's shortened duration for a non-head job.
Time backfill_duration(const Job& job, const PlannerConfig& cfg);
// When a backfilled running job's window ends: its start plus the split
// estimate it was started with (RunningJob::backfill_estimate), else
// backfill_duration() of its job.
inline Time backfill_window_end(const RunningJob& rj, const PlannerConfig& cfg) {
  return sat_add(rj.start, rj.backfill_estimate > 0 ? rj.backfill_estimate : backfill_duration(rj.job, cfg));
}

// Plans one pass over st.order: appends Start / Reserve / Checkpoint / Reject
// decisions (and MONITOR lines when enabled) to `plan`. Pure except for one
// thing: under conservative, the host pins of the last general-path pass
// steer the choice of hosts (see above; cores-only passes pin nothing, so
// their results never depend on earlier calls). Otherwise a kept Planner is a
// cache: besides its scratch
// buffers it keeps, for cores-only passes under fcfs/easy/conservative, the
// node state of the last snapshot's running jobs (updated by their difference
// each pass) and the last conservative plan (reused when only arrivals and
// on-time ends happened since); the Snapshot stays the truth.
class Planner {
 public:
  Planner();
  ~Planner();
  Planner(Planner&&) noexcept;
  Planner& operator=(Planner&&) noexcept;
  void plan(const Snapshot& snap, const PlannerConfig& cfg, const PassState& st, Plan& plan) {
    this->plan(snap, cfg, st, plan, kNoHints, false);
  }
  // The same with the caller's promises about `snap` (pass_hints.hpp): the
  // same Plan, sooner. `running_hinted` false: snap.running is not the one
  // hints.running describes (a stage's modified copy); the rest still holds.
  void plan(const Snapshot& snap, const PlannerConfig& cfg, const PassState& st, Plan& plan, const PassHints& hints,
            bool running_hinted = true);
  // On by default: cores-only passes under fcfs, easy and conservative take
  // the incremental path (same decisions). Off: every pass is planned from
  // scratch by the general path (tests and benchmarks compare the two).
  void set_incremental(bool on);
  // Scratch PassState for schedule() to fill each pass (its vectors keep
  // their capacity); plan() never reads it unless it is the one passed in.
  PassState& pass_state();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// One-shot convenience wrapper around Planner::plan.
void plan_pass(const Snapshot& snap, const PlannerConfig& cfg, const PassState& st, Plan& plan);

}  // namespace corral
