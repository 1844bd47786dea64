// Resuming suspended jobs in the cycle: when their cores are free, and
// forced once they waited the resume window.
#include <algorithm>

#include "coordinator/nci/claim_order.hpp"
#include "coordinator/nci/cycle.hpp"

namespace corral::nci_detail {

bool Cycle::try_resume(std::uint32_t ri) {
  Run& r = runs[ri];
  if (!r.suspended) return false;  // resumed already this pass (force_resume)
  for (const Placement& p : r.placement()) {
    if (p.node >= nodes.size()) return false;
    const NodeState& n = nodes[p.node];
    int mine = 0;
    for (const auto& [hn, hc] : r.held) mine += hn == p.node;
    if (!n.up || n.idle + mine < static_cast<int>(p.slots)) return false;
    if (p.cores.size() == p.slots)
      for (int c : p.cores)
        if (c < 0 || c >= n.cores || (n.owner[c] != kNone && n.owner[c] != ri)) return false;
  }
  for (const auto& [hn, hc] : r.held) free_held(hn, hc);  // its held cores become running ones
  r.held.clear();
  r.suspended = false;
  r.protect = true;
  occupy(ri);
  decide(Action::Resume, r, "resources of its suspender are free again");
  return true;
}

bool Cycle::force_resume(std::uint32_t ri) {
  Run& r = runs[ri];
  std::vector<std::uint32_t> victims;
  std::vector<std::pair<std::uint32_t, int>> held_by_other;
  for (const Placement& p : r.placement()) {
    if (p.node >= nodes.size() || !nodes[p.node].up || p.cores.size() != p.slots) return false;
    const NodeState& n = nodes[p.node];
    for (int c : p.cores) {
      if (c < 0 || c >= n.cores) return false;
      // Freed by PBA for an allocated job this pass: that job's.
      if (p.node < given_.size() && !given_[p.node].empty() && given_[p.node][c]) return false;
      const std::uint32_t o = n.owner[c];
      if (o == kNone || o == ri) continue;
      const Run& v = runs[o];
      if (v.suspended) {
        held_by_other.push_back({p.node, c});
        continue;
      }
      if (v.protect || v.gone || !v.rj || v.rj->stopping) return false;
      if (std::find(victims.begin(), victims.end(), o) == victims.end()) victims.push_back(o);
    }
  }
  for (const auto& [hn, hc] : held_by_other) {
    Run& h = runs[nodes[hn].owner[hc]];
    h.held.erase(std::remove(h.held.begin(), h.held.end(), std::make_pair(hn, hc)), h.held.end());
    free_held(hn, hc);
  }
  for (std::uint32_t vi : victims) {
    Run& v = runs[vi];
    release_cores(vi);
    if (!v.shield) victim_cpus[v.prio] -= v.cpus;
    v.suspended = true;
    decide(Action::Suspend, v,
           "suspended for the resume of job " + std::to_string(r.job->id) + " (suspended " +
               std::to_string(snap.now - r.rj->suspended_since) + " s: its resume window)");
    suspended_ids.push_back(v.job->id);
  }
  const bool ok = try_resume(ri);
  for (std::uint32_t vi : victims) mark_claimed(runs[vi]);
  return ok;
}

}  // namespace corral::nci_detail
