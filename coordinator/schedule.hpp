// One scheduling pass: Snapshot + configuration + seed in, Plan out.
//
// The pass is a pipeline, each stage pure:
//   1. order   — pending jobs in priority order (FIFO by default; PBA priority
//                arithmetic and NCI equal-access shuffling reorder it);
//   2. policy  — PBA preemption / NCI priority-run and parallel-run may emit
//                Suspend / Requeue / Resume decisions that free resources;
//   3. planner — start what fits, reserve and backfill (fcfs, easy,
//                conservative, reserve, checkpoint), MONITOR lines.
#pragma once

#include <cstdint>
#include <vector>

#include "coordinator/model.hpp"
#include "coordinator/names.hpp"
#include "coordinator/nci/nci.hpp"
#include "coordinator/pba/pba.hpp"
#include "coordinator/planner/order.hpp"
#include "coordinator/planner/planner.hpp"
#include "coordinator/planner/preempt.hpp"

namespace corral {

struct SchedConfig {
  OrderConfig order;  // base queue order (fifo, ...)
  PlannerConfig planner;
  PbaConfig pba;      // pba.enabled = false: no project allocations
  NciConfig nci;      // nci.enabled = false: no NCI shuffling / suspension
  PreemptConfig preempt;  // preempt.enabled = false: no selective preemption (preempt.hpp)
};

// Sets what policy `p` names (names.hpp, policy_preset): the planner policy,
// queue order, aging, split factor and selective preemption. Run-time
// prediction is the caller's (the simulator's SimOptions::predict).
void apply_policy(Policy p, SchedConfig& cfg);

// Whether a pass runs the selective preemption stage: not with NCI, whose
// suspensions (priority-run, parallel-run, start window) are the preemption
// policy. Callers that schedule extra passes for it (the simulator) ask here.
inline bool runs_selective_preemption(const SchedConfig& c) { return c.preempt.enabled && !c.nci.enabled; }

// Runs one pass. Never touches anything outside its arguments.
Plan schedule(const Snapshot& snap, const SchedConfig& cfg, std::uint64_t seed);
// Same, reusing the planner's scratch buffers across passes (for callers that
// run many passes, e.g. the simulator); the result is identical.
Plan schedule(const Snapshot& snap, const SchedConfig& cfg, std::uint64_t seed, Planner& planner);
// Same, into `out` (cleared first; its vectors keep their capacity, so a
// caller running many passes allocates them once).
void schedule(const Snapshot& snap, const SchedConfig& cfg, std::uint64_t seed, Planner& planner, Plan& out);

}  // namespace corral
