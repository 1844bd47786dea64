// The checkpoint policy's window end: overdue backfilled jobs are checkpointed
// until the head job fits (checkpoint-backfill-patent.zh.txt).
#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "coordinator/planner/general_pass.hpp"

namespace corral::planning {

bool GeneralPass::checkpoint_for(Plan& plan, const Job& head, const Req& r, Time d) {
  ensure_prof0();
  std::vector<std::size_t> overdue;
  std::int64_t freeable = 0;
  for (std::size_t ri = 0; ri < snap->running.size(); ++ri) {
    const RunningJob& rj = snap->running[ri];
    if (!rj.backfilled || !holds_cores[ri]) continue;
    // Stopped for an earlier job of this pass: its cores are given already.
    if (std::find(checkpointed.begin(), checkpointed.end(), ri) != checkpointed.end()) continue;
    if (sat_add(rj.start, backfill_duration(rj.job, *cfg)) > now) continue;  // window not over
    overdue.push_back(ri);
    freeable += rj.slots;
  }
  if (overdue.empty() || free_now + freeable < head.slots_min) return false;
  std::stable_sort(overdue.begin(), overdue.end(),
                   [&](std::size_t a, std::size_t b) { return snap->running[a].slots > snap->running[b].slots; });
  // Trial: release all, test, restore (a restored job holds its host-level
  // resources until `held`, if given: a checkpoint being written).
  auto release = [&](std::size_t ri, int sign, Time held = 0) {
    const RunningJob& rj = snap->running[ri];
    const Time e = std::max(run_end_of[ri], now + 1);
    Req rr;
    resolve(rj.job, rr);
    // The cores diagram already frees an overdue job at max(end, now);
    // the other diagrams hold it until now + 1 at least.
    for (const Use& u : rr.uses)
      prof[static_cast<std::size_t>(u.prof)].add(now, u.prof == 0 ? run_end_of[ri] : e, sign * u.per_slot * rj.slots);
    for (const Placement& p : rj.placement) {
      if (p.node >= snap->nodes.size() || !snap->nodes[p.node].up) continue;
      set_node_free(p.node, node_free[p.node] + sign * static_cast<int>(p.slots));
      for (int c : p.cores)
        if (c >= 0 && c < snap->nodes[p.node].cores) core_used[core_off[p.node] + static_cast<std::uint32_t>(c)] = sign > 0 ? 0 : 1;
    }
    free_now += sign * rj.slots;
    if (nalloc_built) {
      if (sign < 0) {
        hold_running(ri, held > 0 ? held : e);  // restored as ensure_nalloc() made it
      } else {
        for (const Placement& p : rj.placement) {
          if (p.node >= nalloc.size()) continue;
          auto& v = nalloc[p.node];
          v.erase(std::remove_if(v.begin(), v.end(), [&](const NodeAlloc& a) { return a.job == rj.job.id; }), v.end());
        }
      }
    }
  };
  // A node-bound head is checked host by host: the host plan must hold the
  // overdue jobs before they are released (release() takes them out).
  if (r.node_bound) ensure_nalloc();
  std::size_t used = 0;
  while (used < overdue.size()) {
    release(overdue[used++], +1);
    if (head.slots_min <= free_now && agg_slots(r, now, d, head.slots_min, head.slots_min) > 0) {
      if (!r.node_bound || (ensure_nalloc(), node_scan(head, r, now, d) >= head.slots_min)) break;
    }
  }
  if (!(head.slots_min <= free_now && agg_slots(r, now, d, head.slots_min, head.slots_min) > 0)) {
    for (std::size_t k = 0; k < used; ++k) release(overdue[k], -1);
    return false;
  }
  if (cfg->checkpoint_cost > 0) {
    // The checkpointed jobs keep their resources while the checkpoint is
    // written: the head is reserved for when they come back, not started.
    for (std::size_t k = 0; k < used; ++k) {
      const std::size_t ri = overdue[k];
      const Time until = sat_add(now, cfg->checkpoint_cost);
      release(ri, -1, until);
      Req rr;
      resolve(snap->running[ri].job, rr);
      for (const Use& u : rr.uses)
        prof[static_cast<std::size_t>(u.prof)].add(u.prof == 0 ? now : now + 1, until,
                                                   -u.per_slot * snap->running[ri].slots);
    }
  }
  for (std::size_t k = 0; k < used; ++k) {
    checkpointed.push_back(overdue[k]);
    Decision dec;
    dec.action = Action::Checkpoint;
    dec.job = snap->running[overdue[k]].job.id;
    dec.at = now;
    dec.reason = "checkpoint backfill window ended for job " + std::to_string(head.id);
    plan.decisions.push_back(std::move(dec));
  }
  return cfg->checkpoint_cost > 0 ? false : try_start(plan, head, r, d, head.slots_max, false);
}

}  // namespace corral::planning
