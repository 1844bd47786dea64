// The pass pipeline of schedule.hpp: order -> pba -> nci -> planner.
#include "coordinator/schedule.hpp"

namespace corral {

void apply_policy(Policy p, SchedConfig& cfg) {
  const PolicyPreset s = policy_preset(p);
  cfg.planner.backfill = s.backfill;
  cfg.planner.checkpoint_split = s.split_factor;
  cfg.planner.reserve_depth = s.reserve_depth;
  cfg.planner.reserve_wait = s.reserve_wait;
  cfg.order.policy = s.order;
  cfg.order.aging = s.aging;
  cfg.order.aging_wide = s.aging_wide;
  cfg.order.aged_ahead = s.aged_ahead;
  cfg.order.aging_factor = s.aging_factor;
  cfg.planner.reserve_factor = s.reserve_factor;
  cfg.order.wide_fraction = s.wide_fraction;
  cfg.preempt.enabled = s.preempt;
}

Plan schedule(const Snapshot& snap, const SchedConfig& cfg, std::uint64_t seed, Planner& planner) {
  Plan plan;
  schedule(snap, cfg, seed, planner, plan);
  return plan;
}

void schedule(const Snapshot& snap, const SchedConfig& cfg, std::uint64_t seed, Planner& planner, Plan& plan) {
  schedule(snap, kNoHints, cfg, seed, planner, plan);
}

void schedule(const Snapshot& snap, const PassHints& hints, const SchedConfig& cfg, std::uint64_t seed,
              Planner& planner, Plan& plan) {
  {
    // Back to defaults, the buffers kept. Member by member: `plan = Plan{}`
    // would zero-fill a whole temporary every pass. The size check fails
    // when Plan changes, so a new member is reset here too.
    static_assert(sizeof(Plan) == sizeof(Time) + 6 * sizeof(std::vector<int>),
                  "corral::Plan changed: reset the new member here");
    plan.now = 0;
    plan.decisions.clear();
    plan.updates.clear();
    plan.monitor.clear();
    plan.starts.clear();
    plan.start_placements.clear();
    plan.reserves.clear();
  }
  plan.now = snap.now;
  // The planner's scratch PassState, reset to defaults (so a field added to
  // PassState starts fresh every pass); only order's buffer is kept, with
  // its length (order_pending resizes it and writes every entry: a cleared
  // buffer would be zero-filled first).
  PassState& st = planner.pass_state();
  {
    std::vector<std::uint32_t> buf = std::move(st.order);
    st = PassState{};
    st.order = std::move(buf);
  }
  order_pending(snap, cfg.order, st, hints);
  // The stages below may reorder (PassState::order_is_pending_order).
  if (cfg.pba.enabled || cfg.nci.enabled || runs_selective_preemption(cfg)) st.order_is_pending_order = false;
  if (cfg.pba.enabled) pba_stage(snap, cfg.pba, st, plan);
  if (cfg.nci.enabled) nci_stage(snap, cfg.nci, seed, st, plan);
  // The planner starts what the stages ordered. With NCI, suspended jobs'
  // free cores stay theirs until they resume (nci_claims), and jobs left
  // pending age (nci_settle). The hints about `running` hold only for the
  // caller's snapshot, not for a stage's modified copy.
  auto finish = [&](const Snapshot& s) {
    if (!cfg.nci.enabled) {
      planner.plan(s, cfg.planner, st, plan, hints, &s == &snap);
      return;
    }
    Snapshot view;
    const bool claimed = nci_claims(s, cfg.nci, st, plan, view);
    planner.plan(claimed ? view : s, cfg.planner, st, plan, hints, !claimed && &s == &snap);
    nci_settle(snap, cfg.nci, st, plan);
  };
  // Selective preemption (planner/preempt.hpp); not with NCI, whose
  // suspensions (priority-run, parallel-run, start window) are the preemption
  // policy: a second one would checkpoint the jobs NCI just started or
  // resumed, and PBA's allocated jobs.
  if (runs_selective_preemption(cfg)) {
    Snapshot after;
    if (preempt_stage(snap, cfg.preempt, cfg.order, cfg.planner, st, plan, after)) {
      finish(after);
      return;
    }
  }
  finish(snap);
}

Plan schedule(const Snapshot& snap, const SchedConfig& cfg, std::uint64_t seed) {
  Planner planner;
  return schedule(snap, cfg, seed, planner);
}

}  // namespace corral
