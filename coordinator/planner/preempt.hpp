// Selective preemption by checkpoint: an
// optional, pure stage between the ordering stages and the planner.
//
// Policy (Kettimuthu, Subramani, Srinivasan, Gopalsamy, Panda, Sadayappan,
// "Selective preemption strategies for parallel job scheduling", 2005; the same
// idea as the expansion-factor suspension score of nci-pbs-policy.txt
// "Scoring factors"): a blocked job whose expansion factor
// (wait + estimate) / estimate exceeds `factor` times a running job's may take
// that job's cores; the running job is checkpointed (its work is kept) and
// requeued. Safeguards, so that a preemption never makes any plan worse:
//  * only the first blocked jobs of the order (the head first) may preempt, at
//    most `max_preemptors` per pass;
//  * a victim must be planned to run at least until the preemptor's planned
//    end (checkpoint cost + its duration): the cores come back no later than
//    they would have, so no reservation computed from planned ends slips;
//  * a job requeued `max_requeues` times is never a victim (no thrashing);
//  * a running job that started as an aged job (waited >= its aging bound,
//    OrderConfig::aging / aging_wide) is never a victim;
//  * an aged blocked job may preempt any other running job, whatever the
//    factors and planned ends: aged jobs then wait only for aged jobs and
//    for jobs that end within their requested time, which is what turns the
//    aging bound into a wait bound (bench/sim/RESULTS.md).
// The victims get Action::Checkpoint decisions; the planner then sees them
// holding their cores until now + checkpoint_cost (the checkpoint is being
// written), so the preemptor, as the head, is reserved for that moment.
#pragma once

#include <cstdint>

#include "coordinator/model.hpp"
#include "coordinator/planner/order.hpp"
#include "coordinator/planner/planner.hpp"

namespace corral {

struct PreemptConfig {
  bool enabled = false;        // off by default (the live coordinator)
  double factor = 2.0;         // suspension factor SF
  int max_preemptors = 4;      // blocked jobs examined per pass (head first)
  Time min_wait = 0;           // a job waits at least this long before preempting
  Time min_left = 600;         // a victim must have at least this much planned run left
  int max_requeues = 2;        // a job already requeued this often is never a victim
  bool aged_preempt = true;    // aged blocked jobs may preempt (the wait bound)
};

// Appends Checkpoint decisions for the chosen victims to `plan`. If any, fills
// `out` with a copy of `snap` in which every victim ends at now +
// pcfg.checkpoint_cost and is no longer marked backfilled (what the planner
// must see), and returns true; else returns false and leaves `out` alone.
// With no checkpoint cost the victims go to st.freed instead (free at once).
// `st.order` is the order the planner will walk (unchanged).
// Aging (which jobs are aged) is OrderConfig's (aging_of).
bool preempt_stage(const Snapshot& snap, const PreemptConfig& cfg, const OrderConfig& ocfg, const PlannerConfig& pcfg,
                   PassState& st, Plan& plan, Snapshot& out);

// Expansion factor of a pending job now: (wait + estimate) / estimate, with
// the estimate of what is left (Job::estimate, else walltime, minus work done).
double expansion_pending(const Job& j, Time now);
// Expansion factor a running job has from its current start:
// (its waits so far + estimate) / estimate.
double expansion_running(const RunningJob& rj);

}  // namespace corral
