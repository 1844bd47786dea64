// The planner's public face: durations, policy names, and Planner, which
// composes the fast path (fast_path.hpp: cores-only passes, state kept
// across passes) and the general path (general_pass.hpp: every other pass).
// See planner.hpp for the resource model.
#include "coordinator/planner/planner.hpp"

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "coordinator/planner/fast_path.hpp"
#include "coordinator/planner/general_pass.hpp"

namespace corral {

Time backfill_duration(const Job& job, const PlannerConfig& cfg) {
  const Time d = planned_duration(job, cfg);
  if (d >= kForever || d <= cfg.checkpoint_threshold) return d;
  const double p = cfg.checkpoint_split > 0 && cfg.checkpoint_split < 1 ? cfg.checkpoint_split : 1.0;
  const Time split = std::max<Time>(1, static_cast<Time>(std::ceil(static_cast<double>(d) * p)));
  // A shorter predicted run (Job::predicted) is the window instead: the job
  // is checkpointed at its end if it outlives it and the head needs it.
  if (job.predicted > 0) return std::min(split, std::max<Time>(1, job.predicted - job.work_done));
  return split;
}

struct Planner::Impl {
  planning::FastPath fast;
  planning::GeneralPass general;
  PassState pass_scratch;  // Planner::pass_state()
};

Planner::Planner() : impl_(std::make_unique<Impl>()) {}
Planner::~Planner() = default;
Planner::Planner(Planner&&) noexcept = default;
Planner& Planner::operator=(Planner&&) noexcept = default;

namespace {
// Whether a running entry's placement has a node range (Placement::count != 1).
bool has_ranges(const Snapshot& s) {
  for (const RunningJob& rj : s.running)
    for (const Placement& p : rj.placement)
      if (p.count != 1) return true;
  return false;
}
// The same running set with one entry per node (the general path reads
// placements node by node).
void expand_ranges(std::vector<RunningJob>& running) {
  for (RunningJob& rj : running) {
    std::vector<Placement> pl;
    for (Placement& p : rj.placement)
      if (p.count == 1) pl.push_back(std::move(p));
      else
        for (std::uint32_t k = 0; k < p.count; ++k) pl.push_back({p.node + k, p.slots, {}});
    rj.placement = std::move(pl);
  }
}
}  // namespace

void Planner::plan(const Snapshot& snap, const PlannerConfig& cfg, const PassState& st, Plan& plan,
                   const PassHints& hints, bool running_hinted) {
  Impl& m = *impl_;
  plan.now = snap.now;
  if (st.order.empty() && !cfg.monitor) return;  // nothing to plan
  if (m.fast.plan(snap, cfg, st, plan, hints, running_hinted ? hints.running : kNoHints.running)) {
    m.general.forget_pins();  // a cores-only pass pins nothing
    return;
  }
  // The general path on a snapshot with node ranges: a copy, node by node
  // (the fast path's ranges meet it only when a pass falls back to it).
  if (has_ranges(snap)) {
    Snapshot expanded = snap;
    expand_ranges(expanded.running);
    m.general.plan(expanded, cfg, st, plan);
    return;
  }
  m.general.plan(snap, cfg, st, plan);
}

PassState& Planner::pass_state() { return impl_->pass_scratch; }

void Planner::set_incremental(bool on) {
  impl_->fast.enabled = on;
  impl_->fast.reset();
}

void plan_pass(const Snapshot& snap, const PlannerConfig& cfg, const PassState& st, Plan& plan) {
  Planner p;
  p.plan(snap, cfg, st, plan);
}

}  // namespace corral
