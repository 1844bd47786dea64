// The pass pipeline of schedule.hpp: order -> pba -> nci -> planner.
#include "coordinator/schedule.hpp"

namespace corral {

Plan schedule(const Snapshot& snap, const SchedConfig& cfg, std::uint64_t seed, Planner& planner) {
  Plan plan;
  plan.now = snap.now;
  PassState st;
  order_pending(snap, cfg.order, st);
  if (cfg.pba.enabled) pba_stage(snap, cfg.pba, st, plan);
  if (cfg.nci.enabled) nci_stage(snap, cfg.nci, seed, st, plan);
  if (cfg.preempt.enabled) {  // selective preemption (planner/preempt.hpp)
    Snapshot after;
    if (preempt_stage(snap, cfg.preempt, cfg.order, cfg.planner, st, plan, after)) {
      planner.plan(after, cfg.planner, st, plan);
      if (cfg.nci.enabled) nci_settle(snap, cfg.nci, st, plan);  // bypassed jobs age
      return plan;
    }
  }
  if (cfg.nci.enabled) {
    // Suspended jobs' free cores stay theirs until they resume (nci.hpp).
    Snapshot view;
    const bool claimed = nci_claims(snap, cfg.nci, st, plan, view);
    planner.plan(claimed ? view : snap, cfg.planner, st, plan);
    nci_settle(snap, cfg.nci, st, plan);  // bypassed jobs age
    return plan;
  }
  planner.plan(snap, cfg.planner, st, plan);
  return plan;
}

Plan schedule(const Snapshot& snap, const SchedConfig& cfg, std::uint64_t seed) {
  Planner planner;
  return schedule(snap, cfg, seed, planner);
}

}  // namespace corral
