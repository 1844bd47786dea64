// The pass of the general path: see general_pass.hpp.
#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "coordinator/planner/general_pass.hpp"
#include "coordinator/planner/order.hpp"  // factor_wait

namespace corral::planning {

void GeneralPass::plan(const Snapshot& s, const PlannerConfig& c, const PassState& st, Plan& p) {
  const std::size_t first = p.decisions.size();
  st_freed = st.freed;
  st_cur = &st;
  out = &p;
  setup(s, c, p);
  run(st, p);
  if (c.monitor) monitor(p, first);
}

void GeneralPass::setup(const Snapshot& s, const PlannerConfig& c, const Plan& plan) {
  snap = &s;
  cfg = &c;
  now = s.now;
  nprof = 0;
  global_prof.clear();
  queue_index.clear();
  host_cons_names.clear();
  nalloc_built = false;
  freed.clear();
  suspend_freed.clear();
  resumed.clear();

  const std::size_t nn = s.nodes.size();
  mem_tracked = jobfs_tracked = false;
  max_cores = 0;
  std::int64_t total = 0;
  node_free.assign(nn, 0);
  core_off.resize(nn + 1);
  std::uint32_t off = 0;
  for (std::size_t n = 0; n < nn; ++n) {
    const Node& nd = s.nodes[n];
    core_off[n] = off;
    off += static_cast<std::uint32_t>(std::max(0, nd.cores));
    if (!nd.up) continue;
    node_free[n] = std::max(0, nd.cores);
    total += node_free[n];
    max_cores = std::max(max_cores, nd.cores);
    if (nd.mem_mb > 0) mem_tracked = true;
    if (nd.jobfs_mb > 0) jobfs_tracked = true;
    for (const auto& kv : nd.consumables) host_cons_names.insert(kv.first);
  }
  core_off[nn] = off;
  core_used.assign(off, 0);

  for (const Decision& d : plan.decisions)
    if (d.action == Action::Suspend) suspend_freed.insert(d.job);
    else if (d.action == Action::Resume) resumed.insert(d.job);
  for (JobId id : st_freed) freed.insert(id);

  // Aggregate diagrams.
  new_profile(total);  // cores, rebuilt below with the running jobs
  queue_slot_prof.assign(s.queues.size(), -1);
  queue_cons_prof.assign(s.queues.size(), {});
  for (std::size_t q = 0; q < s.queues.size(); ++q) {
    queue_index.emplace(s.queues[q].name, static_cast<int>(q));
    if (s.queues[q].slots > 0) queue_slot_prof[q] = new_profile(s.queues[q].slots);
    for (const auto& [name, cap] : s.queues[q].consumables) queue_cons_prof[q][name] = new_profile(cap);
  }
  for (const auto& [name, cap] : s.global) global_prof[name] = new_profile(cap);
  queue_hosts.assign(s.queues.size(), {});
  queue_hosts_built.assign(s.queues.size(), 0);

  // Running jobs.
  const bool any_freed = !freed.empty();
  const std::size_t nr = s.running.size();
  run_end_of.resize(nr);
  holds_cores.assign(nr, 0);
  holds_other.assign(nr, 0);
  events.clear();
  std::int64_t used_now = 0;
  std::vector<std::size_t> unplaced;
  for (std::size_t ri = 0; ri < nr; ++ri) {
    const RunningJob& rj = s.running[ri];
    const bool fr = any_freed && freed.count(rj.job.id) > 0;
    // A suspended job resumed earlier in this pass (PBA / NCI Resume) takes
    // its cores back: they are not free for this pass's starts.
    const bool res = rj.suspended && !fr && !resumed.empty() && resumed.count(rj.job.id) > 0;
    holds_cores[ri] = (!rj.suspended || res) && !fr;
    holds_other[ri] = !fr || suspend_freed.count(rj.job.id) > 0;
    Time end = rj.expected_end;
    if (cfg->backfill == Backfill::Checkpoint && rj.backfilled)
      end = backfill_window_end(rj, *cfg);
    // Its remaining run is unknown here (expected_end does not yet count the
    // time it was suspended): its whole planned duration is an upper bound.
    if (res) end = std::max(end, sat_add(now, planned_duration(rj.job, *cfg)));
    // Cores: an end in the past counts as "now" (textbook); other resources
    // are held at least until now + 1 (see planner.hpp).
    run_end_of[ri] = (rj.suspended && !res) || (fr && holds_other[ri]) ? kForever : std::max(end, now);
    if (holds_cores[ri]) {
      int on_up = 0;
      if (rj.placement.empty()) {
        unplaced.push_back(ri);
        on_up = rj.slots;
      }
      for (const Placement& p : rj.placement) {
        if (p.node >= nn || !s.nodes[p.node].up) continue;
        const int sl = static_cast<int>(p.slots);
        on_up += sl;
        node_free[p.node] -= sl;
        for (int core : p.cores)
          if (core >= 0 && core < s.nodes[p.node].cores) core_used[core_off[p.node] + static_cast<std::uint32_t>(core)] = 1;
      }
      used_now += on_up;
      events.emplace_back(std::max(end, now), on_up);
      const int q = queue_of(rj.job);
      if (q >= 0 && queue_slot_prof[static_cast<std::size_t>(q)] >= 0)
        prof[static_cast<std::size_t>(queue_slot_prof[static_cast<std::size_t>(q)])].add(
            now, std::max(end, now + 1), -rj.slots);
    }
    if (holds_other[ri] && !rj.job.consumables.empty()) {
      const Time e = rj.suspended || !holds_cores[ri] ? kForever : std::max(end, now + 1);
      const int q = queue_of(rj.job);
      for (const auto& [name, amt] : rj.job.consumables) {
        const std::int64_t a = amt * std::max(1, rj.slots);
        if (auto it = global_prof.find(name); it != global_prof.end())
          prof[static_cast<std::size_t>(it->second)].add(now, e, -a);
        if (q >= 0) {
          auto& qc = queue_cons_prof[static_cast<std::size_t>(q)];
          if (auto it = qc.find(name); it != qc.end()) prof[static_cast<std::size_t>(it->second)].add(now, e, -a);
        }
      }
    }
  }
  // Running jobs without a placement: charge them to the first nodes with room.
  for (std::size_t ri : unplaced) {
    int left = s.running[ri].slots;
    for (std::size_t n = 0; n < nn && left > 0; ++n) {
      const int take = std::min(left, std::max(0, node_free[n]));
      node_free[n] -= take;
      left -= take;
    }
  }
  // The cores diagram is built lazily (ensure_prof0): passes where every
  // job fits now, or nothing is pending, never sort the running jobs.
  prof[0].reset(now, total);
  prof0_ready = false;
  prof0_total = total;
  prof0_used = used_now;
  free_now = 0;
  for (std::size_t n = 0; n < nn; ++n) {
    node_free[n] = std::max(0, node_free[n]);
    free_now += node_free[n];
  }
  free_now = std::min(free_now, total - used_now);

  buckets_ready = false;  // built on the first start (ensure_buckets)
}

std::int64_t GeneralPass::filter_avail(const Job& j) {
  std::int64_t tot = 0;
  std::size_t w = 0;
  for (std::size_t i = 0; i < avail.size(); ++i) {
    int s = avail[i].second;
    while (s > 0 && !cfg->may_place(*snap, *st_cur, *out, j, avail[i].first, s)) --s;
    if (s <= 0) continue;
    avail[w++] = {avail[i].first, s};
    tot += s;
  }
  avail.resize(w);
  return tot;
}

const std::string& GeneralPass::queue_name(const Job& j) const {
  static const std::string kDefault = "all.q";
  const int q = queue_of(j);
  return q >= 0 ? snap->queues[static_cast<std::size_t>(q)].name : j.queue.empty() ? kDefault : j.queue;
}

std::string GeneralPass::resolve(const Job& j, Req& r) {
  r.uses.clear();
  r.host_cons = false;
  if (j.slots_min < 1 || j.slots_max < j.slots_min)
    return "invalid slot range " + std::to_string(j.slots_min) + ".." + std::to_string(j.slots_max);
  if (j.mem_mb < 0 || j.jobfs_mb < 0 || j.walltime < 0 || j.estimate < 0) return "negative resource request";
  r.queue = queue_of(j);
  if (r.queue == -2) return "unknown queue '" + j.queue + "'";
  r.uses.push_back({0, 1});
  if (r.queue >= 0 && queue_slot_prof[static_cast<std::size_t>(r.queue)] >= 0)
    r.uses.push_back({queue_slot_prof[static_cast<std::size_t>(r.queue)], 1});
  for (const auto& [name, amt] : j.consumables) {
    if (amt < 0) return "negative request for consumable '" + name + "'";
    if (amt == 0) continue;
    bool known = false;
    if (auto it = global_prof.find(name); it != global_prof.end()) {
      r.uses.push_back({it->second, amt});
      known = true;
    }
    if (r.queue >= 0) {
      auto& qc = queue_cons_prof[static_cast<std::size_t>(r.queue)];
      if (auto it = qc.find(name); it != qc.end()) {
        r.uses.push_back({it->second, amt});
        known = true;
      }
    }
    if (host_cons_names.count(name)) {
      r.host_cons = true;
      known = true;
    }
    if (!known) return "requests consumable '" + name + "' that is defined nowhere";
  }
  r.mem_slot = mem_tracked && j.mem_mb > 0 ? ceil_div(j.mem_mb, j.slots_min) : 0;
  r.jobfs_slot = jobfs_tracked && j.jobfs_mb > 0 ? ceil_div(j.jobfs_mb, j.slots_min) : 0;
  const bool restricted = r.queue >= 0 && !snap->queues[static_cast<std::size_t>(r.queue)].hosts.empty();
  r.node_bound = r.mem_slot > 0 || r.jobfs_slot > 0 || r.host_cons || restricted;
  return {};
}

int GeneralPass::agg_slots(const Req& r, Time t, Time d, int smin, int smax) {
  const Time e = sat_add(t, d);
  if (t != now) ensure_prof0();
  for (const Use& u : r.uses) {
    if (u.prof == 0 && !prof0_ready) continue;  // caller checked free_now
    Profile& p = prof[static_cast<std::size_t>(u.prof)];
    const Time re = t == now ? p.run_end_now(smin * u.per_slot) : p.run_end(t, smin * u.per_slot);
    if (re < e) return 0;
  }
  if (smax == smin) return smin;
  std::int64_t s = smax;
  for (const Use& u : r.uses)
    if (u.prof != 0 || prof0_ready) s = std::min(s, prof[static_cast<std::size_t>(u.prof)].min_free(t, e) / u.per_slot);
  return static_cast<int>(std::max<std::int64_t>(s, smin));
}

Time GeneralPass::agg_earliest(const Req& r, Time d, int smin, Time t0) {
  ensure_prof0();
  Time t = t0;
  for (int guard = 0; guard < 1000000 && t < kForever; ++guard) {
    bool moved = false;
    for (const Use& u : r.uses) {
      const Time t2 = prof[static_cast<std::size_t>(u.prof)].earliest(smin * u.per_slot, d, t);
      if (t2 > t) {
        t = t2;
        moved = true;
      }
    }
    if (!moved) return t;
  }
  return kForever;
}

void GeneralPass::ensure_prof0() {
  if (prof0_ready) return;
  prof0_ready = true;
  std::int64_t used = prof0_used;
  for (const auto& [di, a] : pass_allocs) {
    used += a.slots;
    events.emplace_back(sat_add(a.start, a.dur), a.slots);
  }
  std::sort(events.begin(), events.end());
  prof[0].build(now, prof0_total, prof0_total - used, events);
}

void GeneralPass::take_now(std::vector<Placement>& pl) {
  for (Placement& p : pl) {
    if (cfg->pick_cores) p.cores = pick_cores(p.node, static_cast<int>(p.slots));
    set_node_free(p.node, node_free[p.node] - static_cast<int>(p.slots));
    free_now -= p.slots;
  }
}

void GeneralPass::commit(Plan& plan, const Job& j, const Req& r, Action act, Time t, Time d, int s, std::vector<Placement> pl, bool backfilled) {
  agg_debit(r, s, t, sat_add(t, d), +1);
  if (act == Action::Start) take_now(pl);
  Decision dec;
  dec.action = act;
  dec.job = j.id;
  dec.at = t;
  dec.slots = s;
  dec.placement = std::move(pl);
  dec.backfilled = backfilled;
  plan.decisions.push_back(std::move(dec));
  const std::size_t di = plan.decisions.size() - 1;
  pass_allocs.push_back({di, {&j, t, d, s}});
  if (nalloc_built && !plan.decisions[di].placement.empty())
    add_nalloc(&j, t, sat_add(t, d), s, plan.decisions[di].placement);
}

bool GeneralPass::probe_start(const Job& j, const Req& r, Time d, int smax, int& s, std::vector<Placement>& pl) {
  const int smin = j.slots_min;
  if (smin > smax || smin > free_now) return false;  // O(1) rejection
  s = agg_slots(r, now, d, smin, std::min(smax, static_cast<int>(std::min<std::int64_t>(free_now, smax))));
  if (s < smin) return false;
  pl.clear();
  if (r.node_bound || nalloc_built) {
    // Node-bound: checked host by host. Cores-only while host-level
    // (pinned) reservations exist: only take cores that stay free on their
    // host for the whole run, so none of them slips.
    ensure_nalloc();
    std::int64_t tot = node_scan(j, r, now, d);
    if (tot >= smin && cfg->may_place) tot = filter_avail(j);
    if (tot < smin) return false;
    s = static_cast<int>(std::min<std::int64_t>(s, tot));
    pl = pick_from_avail(s);
  } else {
    pl = place_cores_now(s);
  }
  return true;
}

bool GeneralPass::try_start(Plan& plan, const Job& j, const Req& r, Time d, int smax, bool backfilled) {
  int s = 0;
  std::vector<Placement> pl;
  if (!probe_start(j, r, d, smax, s, pl)) return false;
  commit(plan, j, r, Action::Start, now, d, s, std::move(pl), backfilled);
  return true;
}

bool GeneralPass::find_reservation(const Job& j, const Req& r, Time d, Time& t, int& s, std::vector<Placement>& pl) {
  const int smin = j.slots_min;
  t = agg_earliest(r, d, smin, now);
  // Conservative with a host-level plan: every reservation is pinned, so
  // the pins of later jobs are made around real hosts (an unpinned
  // cores-only reservation ahead may need the very cores they pin).
  // Bounded per pass (kPinWork): pinning costs a host-level search per
  // reservation, so a large pass stops pinning cores-only jobs (their
  // later node-bound jobs may then slip, as without pins).
  // MONITOR only observes: it never pins (monitor() shows hosts for an
  // unpinned reservation without holding them).
  const bool need_hosts = r.node_bound ||
                          (nalloc_built && cfg->backfill == Backfill::Conservative && scan_work < kPinWork);
  pl.clear();
  s = 0;
  if (need_hosts) {
    ensure_nalloc();
    for (int guard = 0; t < kForever && guard < 100000; ++guard) {
      if (node_scan(j, r, t, d) >= smin) break;
      t = agg_earliest(r, d, smin, next_event(t));
    }
  }
  if (t >= kForever) return false;
  s = agg_slots(r, t, d, smin, j.slots_max);
  if (s < smin) s = smin;
  if (need_hosts) {
    const std::int64_t tot = node_scan(j, r, t, d);
    if (tot < smin) return false;
    s = static_cast<int>(std::min<std::int64_t>(s, tot));
    pl = pick_from_avail(s);
  }
  return true;
}

bool GeneralPass::reserve(Plan& plan, const Job& j, const Req& r, Time d, Time* at) {
  Time t = kForever;
  int s = 0;
  std::vector<Placement> pl;
  // Later jobs' pins only steer the choice of hosts: j's start and slots
  // are found without them; it avoids them only if that keeps both (pins).
  if (!without_ghosts([&] { return find_reservation(j, r, d, t, s, pl); })) return false;
  if (ghosts_live > 0 && !pl.empty() && node_scan(j, r, t, d) >= s) pl = pick_from_avail(s);
  if (!pl.empty()) prefer_pin(j, r, t, d, s, pl);
  if (cfg->backfill == Backfill::Conservative && nalloc_built && !pl.empty())
    next_pins.push_back({j.id, t, d, s, pl});
  commit(plan, j, r, Action::Reserve, t, d, s, std::move(pl), false);
  if (at) *at = t;
  return true;
}

bool GeneralPass::start_pref(Plan& plan, const Job& j, const Req& r, Time d, int smax, bool backfilled) {
  if (ghosts_live == 0 && pin_of.empty()) return try_start(plan, j, r, d, smax, backfilled);
  int s = 0;
  std::vector<Placement> pl;
  if (!without_ghosts([&] { return probe_start(j, r, d, smax, s, pl); })) return false;
  if (ghosts_live > 0 && (r.node_bound || nalloc_built)) {
    std::int64_t tot = node_scan(j, r, now, d);
    if (tot >= s && cfg->may_place) tot = filter_avail(j);
    if (tot >= s) pl = pick_from_avail(s);
  }
  prefer_pin(j, r, now, d, s, pl);
  commit(plan, j, r, Action::Start, now, d, s, std::move(pl), backfilled);
  return true;
}

bool GeneralPass::possible(const Job& j, const Req& r) {
  for (const Use& u : r.uses)
    if (prof[static_cast<std::size_t>(u.prof)].capacity() < j.slots_min * u.per_slot) return false;
  if (!r.node_bound) return true;
  std::int64_t tot = 0;
  for (std::uint32_t n = 0; n < snap->nodes.size() && tot < j.slots_min; ++n) {
    if (!eligible(r.queue, n)) continue;
    const Node& nd = snap->nodes[n];
    std::int64_t s = nd.cores;
    if (r.mem_slot > 0 && nd.mem_mb > 0) s = std::min(s, nd.mem_mb / r.mem_slot);
    if (r.jobfs_slot > 0 && nd.jobfs_mb > 0) s = std::min(s, nd.jobfs_mb / r.jobfs_slot);
    if (r.host_cons)
      for (const auto& [name, amt] : j.consumables) {
        auto it = nd.consumables.find(name);
        if (it != nd.consumables.end() && amt > 0) s = std::min(s, it->second / amt);
      }
    tot += std::max<std::int64_t>(0, s);
  }
  return tot >= j.slots_min;
}

void GeneralPass::reject(Plan& plan, const Job& j, std::string why) { add_reject(plan, j.id, now, std::move(why)); }

void GeneralPass::run(const PassState& st, Plan& plan) {
  pass_allocs.clear();
  checkpointed.clear();
  next_pins.clear();
  scan_work = 0;
  load_ghosts(st);
  if (cfg->backfill == Backfill::Conservative && !nalloc_built)
    for (std::uint32_t idx : st.order) {
      // A node-bound job in the pass: plan every reservation host by host.
      if (idx < snap->pending.size() && resolve(snap->pending[idx], req).empty() && req.node_bound) {
        ensure_nalloc();
        break;
      }
    }
  const Backfill pol = cfg->backfill;
  if (pol == Backfill::Conservative) plan.decisions.reserve(plan.decisions.size() + st.order.size());
  int reservations_left = pol == Backfill::Conservative ? -1
                          : pol == Backfill::Reserve    ? std::max(0, cfg->max_reservation)
                          : pol == Backfill::Fcfs       ? 0
                          : pol == Backfill::Checkpoint ? std::max(1, cfg->reserve_depth)
                                                        : 1;
  bool blocked = false;
  // Checkpoint policy: head job data.
  int head_slots = 0;
  Time shadow = kForever;
  const auto& pend = snap->pending;
  std::size_t k = 0;
  for (; k < st.order.size(); ++k) {
    const std::uint32_t idx = st.order[k];
    if (idx >= pend.size()) continue;
    const Job& j = pend[idx];
    if (std::string err = resolve(j, req); !err.empty()) {
      reject(plan, j, "job " + std::to_string(j.id) + ": " + err);
      continue;
    }
    const Time d = planned_duration(j, *cfg);
    if (ghosts_live > 0) drop_ghost(j.id);
    if (!blocked || pol != Backfill::Checkpoint) {
      if (start_pref(plan, j, req, d, j.slots_max, false)) continue;
    } else {
      // Non-head job under the checkpoint policy: fewer slots than the head;
      // (b) it can run alongside the head's reservation, else (a) its
      // shortened estimate ends within the window (only a job that can be
      // checkpointed: it is stopped at the window's end).
      const int cap = std::min(j.slots_max, head_slots - 1);
      if (cap >= j.slots_min) {
        if (try_start(plan, j, req, d, cap, false)) continue;
        const Time db = backfill_duration(j, *cfg);
        if (j.checkpointable && (cfg->checkpoint_fresh || j.requeues > 0) && sat_add(now, db) <= shadow &&
            try_start(plan, j, req, db, cap, true))
          continue;
      }
    }
    if (!possible(j, req)) {
      reject(plan, j, never_fits_text(j));
      continue;
    }
    if (j.immediate) {  // -now y: no reservation, no checkpoint for it; it does not block
      reject(plan, j, not_now_text(j));
      continue;
    }
    if (pol == Backfill::Fcfs) break;
    if (pol == Backfill::Checkpoint && !blocked && checkpoint_for(plan, j, req, d)) continue;
    // Beyond the head, the checkpoint policy reserves only for old jobs
    // (PlannerConfig::reserve_wait, reserve_factor).
    const bool young = blocked && pol == Backfill::Checkpoint && now - j.submit < cfg->reserve_wait &&
                       now - j.submit < factor_wait(j, cfg->reserve_factor);
    const bool wants = (pol != Backfill::Reserve || j.reserve) && !young;
    if (reservations_left != 0 && wants) {
      Time at = kForever;
      if (reserve(plan, j, req, d, &at)) {
        if (reservations_left > 0) --reservations_left;
        if (!blocked) {
          head_slots = j.slots_min;
          shadow = at;
        }
      }
      // else: no room at any planned time yet (e.g. behind a job of
      // unbounded duration); it is planned again next pass.
    }
    blocked = true;
    if (free_now <= 0 && reservations_left == 0 && pol != Backfill::Checkpoint) break;  // nothing else can start
  }
  // Jobs the pass stopped before: a -now y job among them cannot start at once.
  for (++k; k < st.order.size(); ++k)
    if (st.order[k] < pend.size() && pend[st.order[k]].immediate) reject(plan, pend[st.order[k]], not_now_text(pend[st.order[k]]));
  pin_of.clear();
  pins.swap(next_pins);
  next_pins.clear();
  ghost_jobs.clear();
  ghosts_live = 0;
}

}  // namespace corral::planning
