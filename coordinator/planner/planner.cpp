// Reservation planning and backfilling. See planner.hpp for the resource model.
//
// One pass: build the aggregate utilization diagrams (cores, queue slots,
// global and queue consumables) from the running jobs, then walk st.order:
// start what fits now without touching any reservation already made, else
// (policy permitting) reserve the earliest start (SGE sections 2a/2b/4).
#include "coordinator/planner/planner.hpp"

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "coordinator/planner/profile.hpp"

namespace corral {

Time planned_duration(const Job& job, const PlannerConfig& cfg) {
  Time base = job.estimate > 0 ? job.estimate : job.walltime > 0 ? job.walltime : cfg.default_duration;
  if (base <= 0) base = 1;
  if (base >= kForever) return kForever;
  if (job.work_done > 0) base = std::max<Time>(1, base - job.work_done) + cfg.restart_cost;
  return sat_add(base, std::max<Time>(0, cfg.duration_offset));
}

Time backfill_duration(const Job& job, const PlannerConfig& cfg) {
  const Time d = planned_duration(job, cfg);
  if (d >= kForever || d <= cfg.checkpoint_threshold) return d;
  const double p = cfg.checkpoint_split > 0 && cfg.checkpoint_split < 1 ? cfg.checkpoint_split : 1.0;
  return std::max<Time>(1, static_cast<Time>(std::ceil(static_cast<double>(d) * p)));
}

bool parse_backfill(const std::string& n, Backfill& out) {
  if (n == "fcfs") out = Backfill::Fcfs;
  else if (n == "easy") out = Backfill::Easy;
  else if (n == "conservative") out = Backfill::Conservative;
  else if (n == "reserve") out = Backfill::Reserve;
  else if (n == "checkpoint") out = Backfill::Checkpoint;
  else return false;
  return true;
}

const char* backfill_name(Backfill b) {
  switch (b) {
    case Backfill::Fcfs: return "fcfs";
    case Backfill::Easy: return "easy";
    case Backfill::Conservative: return "conservative";
    case Backfill::Reserve: return "reserve";
    case Backfill::Checkpoint: return "checkpoint";
  }
  return "?";
}

namespace {

// One use of an aggregate diagram: `per_slot` units of profile `prof` per slot.
struct Use {
  int prof;
  std::int64_t per_slot;
};

// A planned host-level utilization (running job, start or reservation).
struct NodeAlloc {
  Time t0, t1;
  JobId job;
  int cores;
  std::int64_t mem, jobfs;
  const Amounts* cons;   // per-slot consumables of the job (host level), may be null
  int slots;             // slots on this node (for consumables)
};

struct Req {
  int queue = -1;
  bool node_bound = false;
  Time dur = 0;
  std::vector<Use> uses;
  std::int64_t mem_slot = 0, jobfs_slot = 0;   // per-slot share for host checks
  bool host_cons = false;
};

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return b <= 0 ? 0 : (a + b - 1) / b; }

}  // namespace

struct Planner::Impl {
  // ---- per-pass inputs
  const Snapshot* snap = nullptr;
  Plan* out = nullptr;
  const PlannerConfig* cfg = nullptr;
  Time now = 0;

  // ---- aggregate diagrams: 0 = cores; then queue slots, global, queue consumables
  std::vector<Profile> prof;
  std::size_t nprof = 0;
  std::unordered_map<std::string, int> global_prof;
  std::vector<int> queue_slot_prof;                         // per queue, -1: no limit
  std::vector<std::unordered_map<std::string, int>> queue_cons_prof;
  std::unordered_map<std::string, int> queue_index;
  std::unordered_set<std::string> host_cons_names;
  bool mem_tracked = false, jobfs_tracked = false;
  std::int64_t free_now = 0;                                // actual free cores now
  bool prof0_ready = false;
  std::int64_t prof0_total = 0, prof0_used = 0;

  // ---- node state now
  std::vector<int> node_free;
  std::vector<std::uint32_t> core_off;
  std::vector<std::uint8_t> core_used;
  std::vector<std::vector<std::uint32_t>> bucket;           // by free cores
  std::vector<std::uint32_t> bucket_pos;
  int max_cores = 0;

  // ---- host-level plan (built lazily for node-bound jobs and MONITOR)
  bool nalloc_built = false;
  std::vector<std::vector<NodeAlloc>> nalloc;
  std::vector<std::vector<std::uint8_t>> queue_hosts;       // per queue: eligible mask (lazy)
  std::vector<std::uint8_t> queue_hosts_built;

  // ---- scratch
  std::vector<std::pair<Time, std::int64_t>> events;
  std::vector<std::pair<std::uint32_t, int>> avail;
  std::unordered_set<JobId> freed, suspend_freed;
  std::unordered_set<JobId> resumed;                        // Resume decisions of this pass
  std::vector<Time> run_end_of;                             // per running job
  std::vector<std::uint8_t> holds_cores, holds_other;
  Req req;

  // ---------------------------------------------------------------- setup
  int new_profile(std::int64_t cap) {
    if (nprof == prof.size()) prof.emplace_back();
    prof[nprof].reset(now, cap);
    return static_cast<int>(nprof++);
  }

  void bucket_remove(std::uint32_t n) {
    const int c = node_free[n];
    if (c <= 0) return;
    auto& b = bucket[static_cast<std::size_t>(c)];
    const std::uint32_t p = bucket_pos[n];
    b[p] = b.back();
    bucket_pos[b[p]] = p;
    b.pop_back();
  }
  void bucket_insert(std::uint32_t n) {
    const int c = node_free[n];
    if (c <= 0) return;
    auto& b = bucket[static_cast<std::size_t>(c)];
    bucket_pos[n] = static_cast<std::uint32_t>(b.size());
    b.push_back(n);
  }
  void set_node_free(std::uint32_t n, int f) {
    if (!buckets_ready) {
      node_free[n] = std::clamp(f, 0, snap->nodes[n].up ? std::max(0, snap->nodes[n].cores) : 0);
      return;
    }
    bucket_remove(n);
    // Clamped: a caller's over-committed node must never corrupt the buckets.
    node_free[n] = std::clamp(f, 0, snap->nodes[n].up ? std::max(0, snap->nodes[n].cores) : 0);
    bucket_insert(n);
  }

  Time release_time(std::size_t ri) const { return run_end_of[ri]; }

  void setup(const Snapshot& s, const PlannerConfig& c, const Plan& plan) {
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
        end = sat_add(rj.start, backfill_duration(rj.job, *cfg));
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

  bool buckets_ready = false;
  void ensure_buckets() {
    if (buckets_ready) return;
    buckets_ready = true;
    bucket.resize(static_cast<std::size_t>(max_cores) + 1);
    for (auto& b : bucket) b.clear();
    bucket_pos.assign(snap->nodes.size(), 0);
    for (std::size_t n = 0; n < snap->nodes.size(); ++n) bucket_insert(static_cast<std::uint32_t>(n));
  }

  std::vector<JobId> st_freed;
  const PassState* st_cur = nullptr;

  // PBA placement hook (PlannerConfig::may_place): keeps, per candidate
  // host, the most slots the hook allows there; drops hosts it refuses.
  std::int64_t filter_avail(const Job& j) {
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

  int queue_of(const Job& j) const {
    if (j.queue.empty()) return snap->queues.empty() ? -1 : 0;
    auto it = queue_index.find(j.queue);
    return it == queue_index.end() ? -2 : it->second;
  }

  const std::string& queue_name(const Job& j) const {
    static const std::string kDefault = "all.q";
    const int q = queue_of(j);
    return q >= 0 ? snap->queues[static_cast<std::size_t>(q)].name : j.queue.empty() ? kDefault : j.queue;
  }

  bool eligible(int q, std::uint32_t n) {
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

  // Resolves a job's needs; returns an error text if it can never be valid.
  std::string resolve(const Job& j, Req& r) {
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

  // ------------------------------------------------------- aggregate checks
  // Largest s in [smin, smax] the aggregate diagrams allow on [t, t+d); 0 if none.
  int agg_slots(const Req& r, Time t, Time d, int smin, int smax) {
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

  // Earliest t >= t0 at which smin slots fit in every aggregate diagram.
  Time agg_earliest(const Req& r, Time d, int smin, Time t0) {
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

  void agg_debit(const Req& r, int s, Time t0, Time t1, int sign) {
    for (const Use& u : r.uses)
      if (u.prof != 0 || prof0_ready) prof[static_cast<std::size_t>(u.prof)].add(t0, t1, -sign * u.per_slot * s);
  }

  // Builds the cores diagram from the running jobs plus this pass's starts.
  // Before it exists no reservation does either, so free cores never drop
  // below free_now after now and "fits now" is simply free_now >= slots.
  void ensure_prof0() {
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

  // ------------------------------------------------------------ host level
  void ensure_nalloc() {
    if (nalloc_built) return;
    nalloc_built = true;
    nalloc.resize(snap->nodes.size());
    for (auto& v : nalloc) v.clear();
    for (std::size_t ri = 0; ri < snap->running.size(); ++ri) {
      const RunningJob& rj = snap->running[ri];
      if (!holds_cores[ri] && !holds_other[ri]) continue;
      const Time end = holds_cores[ri] ? std::max(run_end_of[ri], now + 1) : kForever;
      const int tot = std::max(1, rj.slots);
      for (const Placement& p : rj.placement) {
        if (p.node >= nalloc.size()) continue;
        const int sl = static_cast<int>(p.slots);
        nalloc[p.node].push_back({now, end, rj.job.id, holds_cores[ri] ? sl : 0,
                                  holds_other[ri] ? ceil_div(rj.job.mem_mb * sl, tot) : 0,
                                  holds_other[ri] ? ceil_div(rj.job.jobfs_mb * sl, tot) : 0,
                                  holds_other[ri] ? &rj.job.consumables : nullptr, sl});
      }
    }
    for (const auto& [di, bk] : pass_allocs) {
      const Decision& d = out->decisions[di];
      if (!d.placement.empty()) add_nalloc(bk.job, bk.start, sat_add(bk.start, bk.dur), bk.slots, d.placement);
    }
  }

  void add_nalloc(const Job* j, Time t0, Time t1, int slots, const std::vector<Placement>& pl) {
    const int tot = std::max(1, slots);
    for (const Placement& p : pl) {
      const int sl = static_cast<int>(p.slots);
      nalloc[p.node].push_back({t0, t1, j->id, sl, ceil_div(j->mem_mb * sl, tot), ceil_div(j->jobfs_mb * sl, tot),
                                &j->consumables, sl});
    }
  }

  // Max concurrent usage on node n over [t, e) of one quantity.
  template <class F>
  std::int64_t node_peak(std::uint32_t n, Time t, Time e, F qty) const {
    std::int64_t peak = 0;
    const auto& v = nalloc[n];
    auto at = [&](Time c) {
      std::int64_t u = 0;
      for (const NodeAlloc& a : v)
        if (a.t0 <= c && c < a.t1) u += qty(a);
      return u;
    };
    peak = at(t);
    for (const NodeAlloc& a : v)
      if (a.t0 > t && a.t0 < e) peak = std::max(peak, at(a.t0));
    return peak;
  }

  // Slots job j may have on node n over [t, t+d).
  int node_slots(std::uint32_t n, const Job& j, const Req& r, Time t, Time d) {
    const Node& nd = snap->nodes[n];
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

  // Host-level availability at t; returns total slots (avail filled).
  std::int64_t node_scan(const Job& j, const Req& r, Time t, Time d) {
    avail.clear();
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

  // Picks nodes for s slots from `avail`: one node if possible (best fit),
  // else the largest first; ties by node index.
  std::vector<Placement> pick_from_avail(int s) {
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

  // Next time after t at which anything on the host level or aggregate changes.
  Time next_event(Time t) const {
    Time nx = prof0_ready ? prof[0].next_change(t) : kForever;
    if (nalloc_built)
      for (const auto& v : nalloc)
        for (const NodeAlloc& a : v) {
          if (a.t0 > t) nx = std::min(nx, a.t0);
          if (a.t1 > t) nx = std::min(nx, a.t1);
        }
    return nx;
  }

  // ------------------------------------------------------- core placement
  std::vector<int> pick_cores(std::uint32_t n, int s) {
    const Node& nd = snap->nodes[n];
    std::vector<int> out;
    std::uint8_t* used = core_used.data() + core_off[n];
    const int C = nd.cores;
    auto take_from = [&](int numa) {
      for (int c = 0; c < C && static_cast<int>(out.size()) < s; ++c)
        if (!used[c] && (numa < 0 || nd.core_numa[static_cast<std::size_t>(c)] == numa)) {
          used[c] = 1;
          out.push_back(c);
        }
    };
    if (static_cast<int>(nd.core_numa.size()) == C && C > 0) {
      // Prefer one NUMA node: the fullest one that still holds all s cores.
      std::map<int, int> freec;
      for (int c = 0; c < C; ++c)
        if (!used[c]) ++freec[nd.core_numa[static_cast<std::size_t>(c)]];
      int best = -1, bestf = 0;
      for (const auto& [d, f] : freec)
        if (f >= s && (best < 0 || f < bestf)) {
          best = d;
          bestf = f;
        }
      if (best >= 0) {
        take_from(best);
      } else {
        std::vector<std::pair<int, int>> order;
        for (const auto& [d, f] : freec) order.emplace_back(-f, d);
        std::sort(order.begin(), order.end());
        for (const auto& [f, d] : order) take_from(d);
      }
    }
    take_from(-1);
    return out;
  }

  // Placement for a job starting now that needs cores only (bucket search).
  std::vector<Placement> place_cores_now(int s) {
    ensure_buckets();
    std::vector<Placement> out;
    for (int c = s; c <= max_cores; ++c)
      if (!bucket[static_cast<std::size_t>(c)].empty()) {
        out.push_back({bucket[static_cast<std::size_t>(c)].back(), static_cast<std::uint32_t>(s), {}});
        return out;
      }
    int left = s;
    for (int c = std::min(max_cores, s); c >= 1 && left > 0; --c) {
      auto& b = bucket[static_cast<std::size_t>(c)];
      for (std::size_t i = b.size(); i-- > 0 && left > 0;) {
        const int take = std::min(c, left);
        out.push_back({b[i], static_cast<std::uint32_t>(take), {}});
        left -= take;
      }
    }
    return out;
  }

  void take_now(std::vector<Placement>& pl) {
    for (Placement& p : pl) {
      p.cores = pick_cores(p.node, static_cast<int>(p.slots));
      set_node_free(p.node, node_free[p.node] - static_cast<int>(p.slots));
      free_now -= p.slots;
    }
  }

  // ------------------------------------------------------------ the pass
  struct PassAlloc {
    const Job* job;
    Time start, dur;
    int slots;
  };
  std::vector<std::pair<std::size_t, PassAlloc>> pass_allocs;  // decision index, alloc

  void commit(Plan& plan, const Job& j, const Req& r, Action act, Time t, Time d, int s,
              std::vector<Placement> pl, bool backfilled) {
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

  // Tries to start j now for duration d (slots capped at smax). Returns true if started.
  bool try_start(Plan& plan, const Job& j, const Req& r, Time d, int smax, bool backfilled) {
    const int smin = j.slots_min;
    if (smin > smax || smin > free_now) return false;  // O(1) rejection
    int s = agg_slots(r, now, d, smin, std::min(smax, static_cast<int>(std::min<std::int64_t>(free_now, smax))));
    if (s < smin) return false;
    std::vector<Placement> pl;
    if (r.node_bound) {
      ensure_nalloc();
      std::int64_t tot = node_scan(j, r, now, d);
      if (tot >= smin && cfg->may_place) tot = filter_avail(j);
      if (tot < smin) return false;
      s = static_cast<int>(std::min<std::int64_t>(s, tot));
      pl = pick_from_avail(s);
    } else if (nalloc_built) {
      // Host-level (pinned) reservations exist: only take cores that stay
      // free on their host for the whole run, so none of them slips.
      std::int64_t tot = node_scan(j, r, now, d);
      if (tot >= smin && cfg->may_place) tot = filter_avail(j);
      if (tot < smin) return false;
      s = static_cast<int>(std::min<std::int64_t>(s, tot));
      pl = pick_from_avail(s);
    } else {
      pl = place_cores_now(s);
    }
    commit(plan, j, r, Action::Start, now, d, s, std::move(pl), backfilled);
    return true;
  }

  // Reserves the earliest start for j; false if it can never be planned.
  bool reserve(Plan& plan, const Job& j, const Req& r, Time d, Time* at = nullptr) {
    const int smin = j.slots_min;
    Time t = agg_earliest(r, d, smin, now);
    const bool need_hosts = r.node_bound || cfg->monitor;
    std::vector<Placement> pl;
    int s = 0;
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
    commit(plan, j, r, Action::Reserve, t, d, s, std::move(pl), false);
    if (at) *at = t;
    return true;
  }

  // Could j run at all in an empty cluster? (otherwise it is rejected)
  bool possible(const Job& j, const Req& r) {
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

  void reject(Plan& plan, const Job& j, std::string why) {
    Decision d;
    d.action = Action::Reject;
    d.job = j.id;
    d.at = now;
    d.reason = std::move(why);
    plan.decisions.push_back(std::move(d));
  }

  // Checkpoint policy, window end: stop overdue backfilled jobs (largest first)
  // until `head` fits now. Returns true if the head was started.
  bool checkpoint_for(Plan& plan, const Job& head, const Req& r, Time d) {
    ensure_prof0();
    std::vector<std::size_t> overdue;
    std::int64_t freeable = 0;
    for (std::size_t ri = 0; ri < snap->running.size(); ++ri) {
      const RunningJob& rj = snap->running[ri];
      if (!rj.backfilled || !holds_cores[ri]) continue;
      if (sat_add(rj.start, backfill_duration(rj.job, *cfg)) > now) continue;  // window not over
      overdue.push_back(ri);
      freeable += rj.slots;
    }
    if (overdue.empty() || free_now + freeable < head.slots_min) return false;
    std::stable_sort(overdue.begin(), overdue.end(),
                     [&](std::size_t a, std::size_t b) { return snap->running[a].slots > snap->running[b].slots; });
    // Trial: release all, test, restore.
    auto release = [&](std::size_t ri, int sign) {
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
        auto drop = [&](std::vector<NodeAlloc>& v) {
          v.erase(std::remove_if(v.begin(), v.end(), [&](const NodeAlloc& a) { return a.job == rj.job.id; }), v.end());
        };
        for (const Placement& p : rj.placement) if (p.node < nalloc.size()) drop(nalloc[p.node]);
      }
    };
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
        release(ri, -1);
        Req rr;
        resolve(snap->running[ri].job, rr);
        const Time until = sat_add(now, cfg->checkpoint_cost);
        for (const Use& u : rr.uses)
          prof[static_cast<std::size_t>(u.prof)].add(u.prof == 0 ? now : now + 1, until,
                                                     -u.per_slot * snap->running[ri].slots);
      }
    }
    for (std::size_t k = 0; k < used; ++k) {
      Decision dec;
      dec.action = Action::Checkpoint;
      dec.job = snap->running[overdue[k]].job.id;
      dec.at = now;
      dec.reason = "checkpoint backfill window ended for job " + std::to_string(head.id);
      plan.decisions.push_back(std::move(dec));
    }
    return cfg->checkpoint_cost > 0 ? false : try_start(plan, head, r, d, head.slots_max, false);
  }

  void run(const PassState& st, Plan& plan) {
    pass_allocs.clear();
    const Backfill pol = cfg->backfill;
    if (pol == Backfill::Conservative) plan.decisions.reserve(plan.decisions.size() + st.order.size());
    int reservations_left = pol == Backfill::Conservative ? -1
                            : pol == Backfill::Reserve    ? std::max(0, cfg->max_reservation)
                            : pol == Backfill::Fcfs       ? 0
                                                          : 1;
    bool blocked = false;
    // Checkpoint policy: head job data.
    int head_slots = 0;
    Time shadow = kForever;
    const auto& pend = snap->pending;
    for (std::uint32_t idx : st.order) {
      if (idx >= pend.size()) continue;
      const Job& j = pend[idx];
      if (std::string err = resolve(j, req); !err.empty()) {
        reject(plan, j, "job " + std::to_string(j.id) + ": " + err);
        continue;
      }
      const Time d = planned_duration(j, *cfg);
      if (!blocked || pol != Backfill::Checkpoint) {
        if (try_start(plan, j, req, d, j.slots_max, false)) continue;
      } else {
        // Non-head job under the checkpoint policy: fewer slots than the head;
        // (b) it can run alongside the head's reservation, else (a) its
        // shortened estimate ends within the window (it is then checkpointable).
        const int cap = std::min(j.slots_max, head_slots - 1);
        if (cap >= j.slots_min) {
          if (try_start(plan, j, req, d, cap, false)) continue;
          const Time db = backfill_duration(j, *cfg);
          if (sat_add(now, db) <= shadow && try_start(plan, j, req, db, cap, true)) continue;
        }
      }
      if (!possible(j, req)) {
        reject(plan, j, "job " + std::to_string(j.id) + " can never run: no set of up nodes can hold " +
                            std::to_string(j.slots_min) + " slots with its requests");
        continue;
      }
      if (pol == Backfill::Fcfs) break;
      if (pol == Backfill::Checkpoint && !blocked && checkpoint_for(plan, j, req, d)) continue;
      const bool wants = pol != Backfill::Reserve || j.reserve;
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
  }

  // ------------------------------------------------------------- MONITOR
  static std::string fmt_line(JobId id, const char* state, Time start, Time dur, char level,
                              const std::string& obj, const std::string& res, std::int64_t amount) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%" PRId64 ".000000", amount);
    return std::to_string(id) + ":1:" + state + ":" + std::to_string(start) + ":" + std::to_string(dur) + ":" +
           level + ":" + obj + ":" + res + ":" + buf;
  }

  void monitor_job(Plan& plan, const Job& j, const char* state, Time start, Time dur, int slots,
                   const std::vector<Placement>& pl) {
    const int q = queue_of(j);
    const std::string& qn = queue_name(j);
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

  void monitor(Plan& plan, std::size_t first_decision) {
    plan.monitor.push_back("::::::::");
    for (const RunningJob& rj : snap->running) {
      if (freed.count(rj.job.id) && !suspend_freed.count(rj.job.id)) continue;
      const bool susp = rj.suspended || suspend_freed.count(rj.job.id);
      monitor_job(plan, rj.job, susp ? "SUSPENDED" : "RUNNING", rj.start, std::max<Time>(0, rj.expected_end - rj.start),
                  rj.slots, rj.placement);
    }
    for (const auto& [di, a] : pass_allocs) {
      if (di < first_decision) continue;
      const Decision& d = plan.decisions[di];
      monitor_job(plan, *a.job, d.action == Action::Start ? "STARTING" : "RESERVING", a.start, a.dur, a.slots,
                  d.placement);
    }
  }
};

Planner::Planner() : impl_(std::make_unique<Impl>()) {}
Planner::~Planner() = default;
Planner::Planner(Planner&&) noexcept = default;
Planner& Planner::operator=(Planner&&) noexcept = default;

void Planner::plan(const Snapshot& snap, const PlannerConfig& cfg, const PassState& st, Plan& plan) {
  Impl& m = *impl_;
  plan.now = snap.now;
  const std::size_t first = plan.decisions.size();
  if (st.order.empty() && !cfg.monitor) return;  // nothing to plan
  m.st_freed = st.freed;
  m.st_cur = &st;
  m.out = &plan;
  m.setup(snap, cfg, plan);
  m.run(st, plan);
  if (cfg.monitor) m.monitor(plan, first);
}

void plan_pass(const Snapshot& snap, const PlannerConfig& cfg, const PassState& st, Plan& plan) {
  Planner p;
  p.plan(snap, cfg, st, plan);
}

}  // namespace corral
