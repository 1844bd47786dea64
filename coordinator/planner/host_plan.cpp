// The general path's host-level plan (node-bound jobs, MONITOR) and conservative's
// host pins: see general_pass.hpp.
#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "coordinator/planner/general_pass.hpp"

namespace corral::planning {

void GeneralPass::prefer_pin(const Job& j, const Req& r, Time t, Time d, int s, std::vector<Placement>& pl) {
  auto it = pin_of.find(j.id);
  if (it == pin_of.end()) return;
  const Pin& p = *it->second;
  if (p.at != t || p.slots != s) return;
  if (!r.node_bound && !nalloc_built) return;
  ensure_nalloc();
  for (const Placement& q : p.pl)
    if (!eligible(r.queue, q.node) || node_slots(q.node, j, r, t, d) < static_cast<int>(q.slots)) return;
  pl = p.pl;
  for (Placement& q : pl) q.cores.clear();
}

bool GeneralPass::eligible(int q, std::uint32_t n) {
  const Node& nd = snap->nodes[n];
  if (!nd.up) return false;
  if (q < 0) return true;
  const Queue& qu = snap->queues[static_cast<std::size_t>(q)];
  if (qu.hosts.empty()) return true;
  auto& mask = queue_hosts[static_cast<std::size_t>(q)];
  if (!queue_hosts_built[static_cast<std::size_t>(q)]) {
    queue_hosts_built[static_cast<std::size_t>(q)] = 1;
    std::unordered_set<std::string> names(qu.hosts.begin(), qu.hosts.end());
    mask.assign(snap->nodes.size(), 0);
    for (std::size_t i = 0; i < snap->nodes.size(); ++i) mask[i] = names.count(snap->nodes[i].name) ? 1 : 0;
  }
  return mask[n] != 0;
}

void GeneralPass::ensure_nalloc() {
  if (nalloc_built) return;
  nalloc_built = true;
  nalloc.resize(snap->nodes.size());
  for (auto& v : nalloc) v.clear();
  for (std::size_t ri = 0; ri < snap->running.size(); ++ri) {
    if (!holds_cores[ri] && !holds_other[ri]) continue;
    hold_running(ri, holds_cores[ri] ? std::max(run_end_of[ri], now + 1) : kForever);
  }
  for (const auto& [di, bk] : pass_allocs) {
    const Decision& d = out->decisions[di];
    if (!d.placement.empty()) add_nalloc(bk.job, bk.start, sat_add(bk.start, bk.dur), bk.slots, d.placement);
  }
}

void GeneralPass::hold_running(std::size_t ri, Time end) {
  const RunningJob& rj = snap->running[ri];
  const int tot = std::max(1, rj.slots);
  for (const Placement& p : rj.placement) {
    if (p.node >= nalloc.size()) continue;
    const int sl = static_cast<int>(p.slots);
    nalloc[p.node].push_back({now, end, rj.job.id, holds_cores[ri] ? sl : 0,
                              holds_other[ri] ? ceil_div(rj.job.mem_mb * sl, tot) : 0,
                              holds_other[ri] ? ceil_div(rj.job.jobfs_mb * sl, tot) : 0,
                              holds_other[ri] ? &rj.job.consumables : nullptr, sl, false});
  }
}

void GeneralPass::add_nalloc(const Job* j, Time t0, Time t1, int slots, const std::vector<Placement>& pl, bool ghost) {
  const int tot = std::max(1, slots);
  for (const Placement& p : pl) {
    const int sl = static_cast<int>(p.slots);
    nalloc[p.node].push_back({t0, t1, j->id, sl, ceil_div(j->mem_mb * sl, tot), ceil_div(j->jobfs_mb * sl, tot),
                              &j->consumables, sl, ghost});
  }
}

int GeneralPass::node_slots(std::uint32_t n, const Job& j, const Req& r, Time t, Time d) {
  const Node& nd = snap->nodes[n];
  scan_work += nalloc[n].size();
  const Time e = sat_add(t, d);
  std::int64_t s = nd.cores - node_peak(n, t, e, [](const NodeAlloc& a) { return std::int64_t{a.cores}; });
  if (t == now) s = std::min<std::int64_t>(s, node_free[n]);
  if (s <= 0) return 0;
  if (r.mem_slot > 0 && nd.mem_mb > 0)
    s = std::min(s, (nd.mem_mb - node_peak(n, t, e, [](const NodeAlloc& a) { return a.mem; })) / r.mem_slot);
  if (r.jobfs_slot > 0 && nd.jobfs_mb > 0)
    s = std::min(s, (nd.jobfs_mb - node_peak(n, t, e, [](const NodeAlloc& a) { return a.jobfs; })) / r.jobfs_slot);
  if (r.host_cons) {
    for (const auto& [name, amt] : j.consumables) {
      auto it = nd.consumables.find(name);
      if (it == nd.consumables.end() || amt <= 0) continue;
      const std::int64_t used = node_peak(n, t, e, [&name](const NodeAlloc& a) -> std::int64_t {
        if (!a.cons) return 0;
        auto f = a.cons->find(name);
        return f == a.cons->end() ? 0 : f->second * a.slots;
      });
      s = std::min(s, (it->second - used) / amt);
    }
  }
  return static_cast<int>(std::max<std::int64_t>(0, s));
}

std::int64_t GeneralPass::node_scan(const Job& j, const Req& r, Time t, Time d) {
  avail.clear();
  scan_work += snap->nodes.size();
  std::int64_t tot = 0;
  for (std::uint32_t n = 0; n < snap->nodes.size(); ++n) {
    if (!eligible(r.queue, n)) continue;
    const int s = node_slots(n, j, r, t, d);
    if (s > 0) {
      avail.emplace_back(n, s);
      tot += s;
    }
  }
  return tot;
}

std::vector<Placement> GeneralPass::pick_from_avail(int s) {
  std::vector<Placement> out;
  int best = -1;
  for (std::size_t i = 0; i < avail.size(); ++i)
    if (avail[i].second >= s && (best < 0 || avail[i].second < avail[static_cast<std::size_t>(best)].second))
      best = static_cast<int>(i);
  if (best >= 0) {
    out.push_back({avail[static_cast<std::size_t>(best)].first, static_cast<std::uint32_t>(s), {}});
    return out;
  }
  std::stable_sort(avail.begin(), avail.end(), [](auto& a, auto& b) { return a.second > b.second; });
  for (const auto& [n, a] : avail) {
    if (s <= 0) break;
    const int take = std::min(a, s);
    out.push_back({n, static_cast<std::uint32_t>(take), {}});
    s -= take;
  }
  return out;
}

Time GeneralPass::next_event(Time t) const {
  Time nx = prof0_ready ? prof[0].next_change(t) : kForever;
  if (nalloc_built)
    for (const auto& v : nalloc)
      for (const NodeAlloc& a : v) {
        if (a.ghost && !use_ghosts) continue;
        if (a.t0 > t) nx = std::min(nx, a.t0);
        if (a.t1 > t) nx = std::min(nx, a.t1);
      }
  return nx;
}

void GeneralPass::load_ghosts(const PassState& st) {
  ghosts_live = 0;
  ghost_jobs.clear();
  pin_of.clear();
  use_ghosts = true;
  if (cfg->backfill != Backfill::Conservative || pins.empty()) return;
  std::unordered_map<JobId, const Pin*> by;
  for (const Pin& p : pins) by.emplace(p.job, &p);
  for (std::uint32_t idx : st.order) {
    if (idx >= snap->pending.size()) continue;
    const Job& j = snap->pending[idx];
    auto it = by.find(j.id);
    if (it == by.end()) continue;
    const Pin& p = *it->second;
    if (p.at < now || p.dur != planned_duration(j, *cfg) || p.slots < j.slots_min || p.slots > j.slots_max) continue;
    bool ok = true;
    for (const Placement& q : p.pl)
      if (q.node >= snap->nodes.size() || !snap->nodes[q.node].up) ok = false;
    if (!ok || !ghost_jobs.insert(j.id).second) continue;
    pin_of.emplace(j.id, &p);
    ensure_nalloc();
    add_nalloc(&j, p.at, sat_add(p.at, p.dur), p.slots, p.pl, true);
    ++ghosts_live;
  }
}

void GeneralPass::drop_ghost(JobId id) {
  if (!ghost_jobs.erase(id)) return;
  for (const Placement& q : pin_of.at(id)->pl) {
    auto& v = nalloc[q.node];
    v.erase(std::remove_if(v.begin(), v.end(), [id](const NodeAlloc& a) { return a.ghost && a.job == id; }), v.end());
  }
  --ghosts_live;
}

}  // namespace corral::planning
