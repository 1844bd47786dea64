// The MONITOR schedule-file lines of a general pass (SGE MONITOR, sge6-reservation-backfill.txt).
#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "coordinator/planner/general_pass.hpp"

namespace corral::planning {

std::string GeneralPass::fmt_line(JobId id, const char* state, Time start, Time dur, char level, const std::string& obj, const std::string& res, std::int64_t amount) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%" PRId64 ".000000", amount);
  return std::to_string(id) + ":1:" + state + ":" + std::to_string(start) + ":" + std::to_string(dur) + ":" +
         level + ":" + obj + ":" + res + ":" + buf;
}

void GeneralPass::monitor_job(Plan& plan, const Job& j, const char* state, Time start, Time dur, int slots, const std::vector<Placement>& pl) {
  const int q = queue_of(j);
  const std::string& qn = queue_name(j);
  // Level P: the slots a PE job takes from its parallel environment (section 2d).
  if (!j.pe.empty()) plan.monitor.push_back(fmt_line(j.id, state, start, dur, 'P', j.pe, "slots", slots));
  for (const auto& [name, amt] : j.consumables)
    if (global_prof.count(name)) plan.monitor.push_back(fmt_line(j.id, state, start, dur, 'G', "global", name, amt * slots));
  const int tot = std::max(1, slots);
  for (const Placement& p : pl) {
    if (p.node >= snap->nodes.size()) continue;
    const Node& nd = snap->nodes[p.node];
    const int sl = static_cast<int>(p.slots);
    if (j.mem_mb > 0 && nd.mem_mb > 0)
      plan.monitor.push_back(fmt_line(j.id, state, start, dur, 'H', nd.name, "mem_mb", ceil_div(j.mem_mb * sl, tot)));
    if (j.jobfs_mb > 0 && nd.jobfs_mb > 0)
      plan.monitor.push_back(fmt_line(j.id, state, start, dur, 'H', nd.name, "jobfs_mb", ceil_div(j.jobfs_mb * sl, tot)));
    for (const auto& [name, amt] : j.consumables)
      if (nd.consumables.count(name)) plan.monitor.push_back(fmt_line(j.id, state, start, dur, 'H', nd.name, name, amt * sl));
  }
  if (q >= 0)
    for (const auto& [name, amt] : j.consumables)
      if (queue_cons_prof[static_cast<std::size_t>(q)].count(name))
        plan.monitor.push_back(fmt_line(j.id, state, start, dur, 'Q', qn, name, amt * slots));
  for (const Placement& p : pl)
    if (p.node < snap->nodes.size())
      plan.monitor.push_back(fmt_line(j.id, state, start, dur, 'Q', qn + "@" + snap->nodes[p.node].name, "slots", p.slots));
}

void GeneralPass::monitor(Plan& plan, std::size_t first_decision) {
  plan.monitor.push_back("::::::::");
  for (const RunningJob& rj : snap->running) {
    if (freed.count(rj.job.id) && !suspend_freed.count(rj.job.id)) continue;
    const bool susp = rj.suspended || suspend_freed.count(rj.job.id);
    monitor_job(plan, rj.job, susp ? "SUSPENDED" : "RUNNING", rj.start, std::max<Time>(0, rj.expected_end - rj.start),
                rj.slots, rj.placement);
  }
  std::vector<Placement> shown;
  for (const auto& [di, a] : pass_allocs) {
    if (di < first_decision) continue;
    const Decision& d = plan.decisions[di];
    const bool reserving = d.action != Action::Start;
    if (reserving && d.placement.empty()) {
      // A reservation held on the cluster's cores, not on hosts (easy,
      // reserve: hosts are chosen when it starts). Grid Engine's schedule
      // file names queue instances for every reservation, so the hosts
      // it would get are shown, after every decision of the pass was
      // made: picked among what the earlier lines leave free, and never
      // held against any job.
      shown.clear();
      Req r;
      if (resolve(*a.job, r).empty()) {
        ensure_nalloc();
        if (node_scan(*a.job, r, a.start, a.dur) >= a.slots) {
          shown = pick_from_avail(a.slots);
          add_nalloc(a.job, a.start, sat_add(a.start, a.dur), a.slots, shown);
        }
      }
      monitor_job(plan, *a.job, "RESERVING", a.start, a.dur, a.slots, shown);
      continue;
    }
    monitor_job(plan, *a.job, reserving ? "RESERVING" : "STARTING", a.start, a.dur, a.slots, d.placement);
  }
}

}  // namespace corral::planning
