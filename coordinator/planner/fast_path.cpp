// The fast path's pass: whether it applies, the free-core state brought up
// to date, and its starts and reservations. See fast_path.hpp.
#include "coordinator/planner/fast_path.hpp"

#include <algorithm>

#include "coordinator/planner/general_pass.hpp"

namespace corral::planning {

bool FastPath::plan(const Snapshot& s, const PlannerConfig& c, const PassState& st, Plan& plan) {
  const Backfill pol = c.backfill;
  if (!enabled || c.monitor || !st.freed.empty() || !s.queues.empty() || !s.global.empty() ||
      (pol != Backfill::Fcfs && pol != Backfill::Easy && pol != Backfill::Conservative)) {
    memo_.valid = false;
    return false;
  }
  for (const Decision& d : plan.decisions)
    if (d.action == Action::Suspend || d.action == Action::Resume) {
      memo_.valid = false;
      return false;
    }
  if (layout_.stale(s)) {
    layout_.build(s);
    cores_.reset();  // the update below adds every running job
    memo_.valid = false;
  }
  if (!layout_.plain || !cores_.update(s, pol == Backfill::Conservative)) {
    memo_.valid = false;
    return false;
  }
  cfg = &c;
  now = s.now;
  if (pol == Backfill::Conservative) {
    conservative(s, c, st, plan);
  } else {
    memo_.valid = false;
    easy(s, c, st, plan);
  }
  keep_starts();
  return true;
}

// Starts j now on sl slots for duration d: node state, provisional record, decision.
void FastPath::start(Plan& plan, const Snapshot& s, const Job& j, int sl, Time d) {
  const bool pick = cfg->pick_cores;
  const bool ranges = cfg->node_ranges && !pick;
  // PlannerConfig::compact_starts: the placement goes to the pass's one
  // buffer, the start to Plan::starts (no Decision, no heap block).
  if (cfg->compact_starts) {
    const std::size_t first = plan.start_placements.size();
    cores_.take(plan.start_placements, s, j.id, sl, pick, ranges, true);
    pass_ends_.emplace_back(sat_add(s.now, d), sl);
    plan.starts.push_back({j.id, sl, static_cast<std::uint32_t>(first),
                           static_cast<std::uint32_t>(plan.start_placements.size() - first)});
    return;
  }
  std::vector<Placement> own;
  cores_.take(own, s, j.id, sl, pick, ranges, false);
  pass_ends_.emplace_back(sat_add(s.now, d), sl);
  Decision dec;  // not emplace_back() (see reserve())
  dec.action = Action::Start;
  dec.job = j.id;
  dec.at = s.now;
  dec.slots = sl;
  dec.placement = std::move(own);
  plan.decisions.push_back(std::move(dec));
}

void FastPath::reject(Plan& plan, const Job& j, std::string why) const { add_reject(plan, j.id, now, std::move(why)); }

// The general path's resolve() for a cores-only layout: "" if the job is
// valid (it then needs cores only), else the same error text.
std::string FastPath::check(const Job& j) {
  if (j.slots_min < 1 || j.slots_max < j.slots_min)
    return "invalid slot range " + std::to_string(j.slots_min) + ".." + std::to_string(j.slots_max);
  if (j.mem_mb < 0 || j.jobfs_mb < 0 || j.walltime < 0 || j.estimate < 0) return "negative resource request";
  if (!j.queue.empty()) return "unknown queue '" + j.queue + "'";
  for (const auto& [name, amt] : j.consumables) {
    if (amt < 0) return "negative request for consumable '" + name + "'";
    if (amt == 0) continue;
    return "requests consumable '" + name + "' that is defined nowhere";
  }
  return {};
}

// A reservation of the cores-only path (no placement: nodes are chosen at start).
void FastPath::reserve(Plan& plan, const Job& j, Time at, int slots) const {
  if (cfg->compact_reserves) {  // PlannerConfig::compact_reserves
    plan.reserves.push_back({j.id, at, slots});
    return;
  }
  // Not emplace_back(), with or without arguments: value-initialization
  // (and parenthesized aggregate initialization too, GCC 12) zero-fills
  // the whole Decision first with `rep stos`, few instructions but slow.
  Decision dec;
  dec.action = Action::Reserve;
  dec.job = j.id;
  dec.at = at;
  dec.slots = slots;
  plan.decisions.push_back(std::move(dec));
}

// Builds the cores profile (running jobs + this pass's starts), as ensure_prof0.
void FastPath::build_prof(Time t) {
  events_.clear();
  std::int64_t used = cores_.used_now();
  for (const auto& [e, n] : cores_.ends()) events_.emplace_back(std::max(e, t), n);
  for (const auto& [e, n] : pass_ends_) {
    used += n;
    events_.emplace_back(e, n);
  }
  std::sort(events_.end() - static_cast<std::ptrdiff_t>(pass_ends_.size()), events_.end());
  if (!pass_ends_.empty()) std::inplace_merge(events_.begin(), events_.end() - static_cast<std::ptrdiff_t>(pass_ends_.size()), events_.end());
  prof_.build(t, layout_.total, layout_.total - used, events_);
}

}  // namespace corral::planning
