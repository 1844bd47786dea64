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
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <span>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "coordinator/planner/profile.hpp"

namespace corral {

namespace {
// planned_duration's body, inlined into the fast easy scan (called for most
// jobs that fit now).
inline Time duration_of(const Job& job, const PlannerConfig& cfg) {
  Time base = job.estimate > 0 ? job.estimate : job.walltime > 0 ? job.walltime : cfg.default_duration;
  if (base <= 0) base = 1;
  if (base >= kForever) return kForever;
  if (job.work_done > 0) base = std::max<Time>(1, base - job.work_done) + cfg.restart_cost;
  return sat_add(base, std::max<Time>(0, cfg.duration_offset));
}
}  // namespace

Time planned_duration(const Job& job, const PlannerConfig& cfg) { return duration_of(job, cfg); }

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
  bool ghost;            // last pass's pin of a later job (conservative; see Impl::pins)
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

// Nodes grouped by their free core count, one bitset per count. A cores-only
// start takes the best-fitting node (fewest free cores that hold the job),
// ties to the highest node index; a job no single node holds is spread over
// the nodes with the most free cores first, again highest index first. Being
// a set, the answer never depends on the order of earlier updates, so sets
// rebuilt in a pass and sets kept up to date across passes pick the same node.
struct NodeSets {
  std::size_t nw = 0;                    // words per bitset
  int maxc = 0;
  std::vector<std::uint64_t> bits;       // (maxc + 1) x nw
  std::vector<std::uint32_t> count;      // nodes per free count

  void init(std::size_t nodes, int max_free) {
    nw = (nodes + 63) / 64;
    maxc = std::max(0, max_free);
    bits.assign((static_cast<std::size_t>(maxc) + 1) * nw, 0);
    count.assign(static_cast<std::size_t>(maxc) + 1, 0);
  }
  void insert(std::uint32_t n, int c) {
    if (c <= 0 || c > maxc) return;
    bits[static_cast<std::size_t>(c) * nw + n / 64] |= std::uint64_t{1} << (n % 64);
    ++count[static_cast<std::size_t>(c)];
  }
  void erase(std::uint32_t n, int c) {
    if (c <= 0 || c > maxc) return;
    bits[static_cast<std::size_t>(c) * nw + n / 64] &= ~(std::uint64_t{1} << (n % 64));
    --count[static_cast<std::size_t>(c)];
  }
  // Highest node index below `below` with exactly c free; -1 if none.
  std::int64_t highest(int c, std::int64_t below) const {
    if (below <= 0) return -1;
    const std::uint64_t* w = bits.data() + static_cast<std::size_t>(c) * nw;
    std::size_t wi = static_cast<std::size_t>((below - 1) / 64);
    std::uint64_t m = w[wi];
    const unsigned top = static_cast<unsigned>((below - 1) % 64);
    if (top < 63) m &= (std::uint64_t{1} << (top + 1)) - 1;
    for (;;) {
      if (m) return static_cast<std::int64_t>(wi * 64 + 63 - static_cast<std::size_t>(__builtin_clzll(m)));
      if (wi == 0) return -1;
      m = w[--wi];
    }
  }
  // Length of the run of nodes with exactly c free at n, n - 1, ... (n has
  // c free), at most maxk: whole words at a time.
  std::int64_t run_down(int c, std::int64_t n, std::int64_t maxk) const {
    const std::uint64_t* w = bits.data() + static_cast<std::size_t>(c) * nw;
    std::int64_t k = 0;
    while (k < maxk && n >= 0) {
      const unsigned b = static_cast<unsigned>(n % 64);
      // Bit b moved to the top: the leading ones are the run (the bits
      // shifted in below are zeros, so it stops at bit 0 of the word).
      const std::uint64_t inv = ~(w[n / 64] << (63 - b));
      const std::int64_t ones = inv ? __builtin_clzll(inv) : 64;
      k += ones;
      n -= ones;
      if (ones < static_cast<std::int64_t>(b) + 1) break;
    }
    return std::min(k, maxk);
  }
  // Placement of s slots now (see above); the nodes' free counts are not
  // changed. ranges: consecutive nodes with the same slots make one entry
  // (Placement::count, PlannerConfig::node_ranges); the nodes and slots are
  // the same either way.
  std::vector<Placement> place(int s, std::size_t nodes, bool ranges = false) const {
    std::vector<Placement> out;
    // Single-core nodes: one entry per slot, reserved at once (no regrowth);
    // with ranges, room for a few (CTC: 2.6 a start on average).
    if (ranges) out.reserve(4);
    else if (maxc == 1)
      out.reserve(static_cast<std::size_t>(std::min<std::int64_t>(std::max(1, s), static_cast<std::int64_t>(nodes))));
    place_into(out, s, nodes, ranges);
    return out;
  }
  // The same, appended to `out` (PlannerConfig::compact_starts: one buffer
  // for every start of a pass).
  void place_into(std::vector<Placement>& out, int s, std::size_t nodes, bool ranges) const {
    const std::size_t first = out.size();
    const auto nn = static_cast<std::int64_t>(nodes);
    for (int c = std::max(1, s); c <= maxc; ++c)
      if (count[static_cast<std::size_t>(c)] > 0) {
        out.push_back({static_cast<std::uint32_t>(highest(c, nn)), static_cast<std::uint32_t>(s), {}});
        return;
      }
    // Nodes lo .. lo + k - 1 with `take` slots each (found highest first:
    // a run that ends right below the last entry's first node joins it).
    auto add = [&](std::int64_t lo, int take, std::int64_t k) {
      if (ranges && out.size() > first && out.back().node == lo + k && out.back().slots == static_cast<std::uint32_t>(take)) {
        out.back().node = static_cast<std::uint32_t>(lo);
        out.back().count += static_cast<std::uint32_t>(k);
        return;
      }
      out.push_back({static_cast<std::uint32_t>(lo), static_cast<std::uint32_t>(take), {}, static_cast<std::uint32_t>(k)});
    };
    int left = s;
    for (int c = std::min(maxc, s); c >= 1 && left > 0; --c)
      for (std::int64_t n = highest(c, nn); n >= 0 && left > 0;) {
        if (ranges && left >= c) {
          const std::int64_t k = run_down(c, n, left / c);
          add(n - k + 1, c, k);
          left -= static_cast<int>(k) * c;
          n = highest(c, n - k + 1);
          continue;
        }
        const int take = std::min(c, left);
        add(n, take, 1);
        left -= take;
        n = highest(c, n);
      }
  }
};

// Cores for s slots on a node (first free ones; with core_numa, preferably
// on the fullest NUMA node that holds them all). `used` counts holders per core.
std::vector<int> pick_cores(const Node& nd, std::uint16_t* used, int s) {
  std::vector<int> out;
  const int C = nd.cores;
  auto take_from = [&](int numa) {
    for (int c = 0; c < C && static_cast<int>(out.size()) < s; ++c)
      if (!used[c] && (numa < 0 || nd.core_numa[static_cast<std::size_t>(c)] == numa)) {
        ++used[c];
        out.push_back(c);
      }
  };
  if (static_cast<int>(nd.core_numa.size()) == C && C > 0) {
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

// The fast easy scan past the reservation over Snapshot::pending_order_slots_min
// / pending_order_min_duration (model.hpp: contiguous, in the pass's order):
// the first position k' >= k whose job may do something, or `no`. A job is
// passed over when lo < need <= total (fits neither now nor in the least free
// count before the shadow time), and with kShadow also when ash < need <= lo
// and its least duration exceeds room (ends after the shadow time where it
// does not fit). The thresholds are int64 clamped into int32, which keeps
// every compare with an int32 need exact; a duration capped at INT32_MAX is
// a lower bound, so a cap only passes over fewer jobs. Eight jobs a step
// with GCC vector types (two SSE2 compares each), as the planner's full path
// gives the same answer for any job not passed over.
using V4 = std::int32_t __attribute__((vector_size(16)));
inline std::int32_t clamp32(std::int64_t v) {
  return static_cast<std::int32_t>(std::clamp<std::int64_t>(v, INT32_MIN, INT32_MAX));
}
template <bool kShadow>
std::size_t scan_skip(const std::int32_t* need, const std::int32_t* mind, std::size_t k, std::size_t no,
                      std::int32_t lo, std::int32_t total, std::int32_t ash, std::int32_t room) {
  auto passed = [&](std::int32_t n, std::int32_t m) {
    return (n > lo && n <= total) || (kShadow && n > ash && n <= lo && m > room);
  };
  // 16-byte vectors only: wider ones are split through memory without AVX.
  const V4 vlo = V4{} + lo, vtot = V4{} + total, vash = V4{} + ash, vroom = V4{} + room;
  auto keep4 = [&](std::size_t at) {
    V4 n;
    std::memcpy(&n, need + at, sizeof n);
    V4 pass = (n > vlo) & (n <= vtot);
    if constexpr (kShadow) {
      V4 m;
      std::memcpy(&m, mind + at, sizeof m);
      pass |= (n > vash) & (n <= vlo) & (m > vroom);
    }
    return ~pass;
  };
  for (; k + 8 <= no; k += 8) {
    const V4 keep = keep4(k) | keep4(k + 4);
    std::uint64_t w[2];
    std::memcpy(w, &keep, sizeof w);
    if ((w[0] | w[1]) != 0) break;
  }
  for (; k < no; ++k)
    if (!passed(need[k], kShadow ? mind[k] : 0)) break;
  return k;
}

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
  std::vector<std::uint16_t> core_used;
  NodeSets sets;                                            // by free cores (lazy)
  int max_cores = 0;

  // ---- host-level plan (built lazily for node-bound jobs and MONITOR)
  bool nalloc_built = false;
  std::vector<std::vector<NodeAlloc>> nalloc;
  std::vector<std::vector<std::uint8_t>> queue_hosts;       // per queue: eligible mask (lazy)
  std::vector<std::uint8_t> queue_hosts_built;

  // ---- conservative: last pass's host pins (kept between passes)
  // A node-bound reservation is pinned to hosts. The next conservative pass
  // puts last pass's pins of still-pending jobs into the host plan as
  // "ghosts": a job ahead of a pinned job prefers hosts and times that leave
  // the pin free, but only when that changes neither its start time nor its
  // slots; a job drops its own ghost when its turn comes. So a job ahead
  // never waits for a later job's pin, and a pinned job keeps its start
  // unless a job ahead of it could start no later than promised only on its
  // hosts.
  struct Pin {
    JobId job;
    Time at, dur;
    int slots;
    std::vector<Placement> pl;
  };
  std::vector<Pin> pins, next_pins;
  bool use_ghosts = true;        // false: node_peak/next_event ignore ghosts
  std::size_t ghosts_live = 0;   // jobs whose ghost is still in nalloc
  std::unordered_set<JobId> ghost_jobs;
  std::unordered_map<JobId, const Pin*> pin_of;   // this pass's valid pins
  std::uint64_t scan_work = 0;                    // node_scan work this pass (nodes and allocations)
  static constexpr std::uint64_t kPinWork = 20'000'000;

  // A job whose start time and slots are those of its pin keeps the pin's
  // hosts when they still hold it (ties in host choice would otherwise move
  // it onto hosts an earlier-promised job could take, see pins).
  void prefer_pin(const Job& j, const Req& r, Time t, Time d, int s, std::vector<Placement>& pl) {
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

  void set_node_free(std::uint32_t n, int f) {
    if (!buckets_ready) {
      node_free[n] = std::clamp(f, 0, snap->nodes[n].up ? std::max(0, snap->nodes[n].cores) : 0);
      return;
    }
    sets.erase(n, node_free[n]);
    // Clamped: a caller's over-committed node must never corrupt the sets.
    node_free[n] = std::clamp(f, 0, snap->nodes[n].up ? std::max(0, snap->nodes[n].cores) : 0);
    sets.insert(n, node_free[n]);
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
    sets.init(snap->nodes.size(), max_cores);
    for (std::size_t n = 0; n < snap->nodes.size(); ++n) sets.insert(static_cast<std::uint32_t>(n), node_free[n]);
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
      if (!holds_cores[ri] && !holds_other[ri]) continue;
      hold_running(ri, holds_cores[ri] ? std::max(run_end_of[ri], now + 1) : kForever);
    }
    for (const auto& [di, bk] : pass_allocs) {
      const Decision& d = out->decisions[di];
      if (!d.placement.empty()) add_nalloc(bk.job, bk.start, sat_add(bk.start, bk.dur), bk.slots, d.placement);
    }
  }

  // Running job ri's host-level holds from now until `end` (ensure_nalloc;
  // a job the checkpoint trial puts back).
  void hold_running(std::size_t ri, Time end) {
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

  void add_nalloc(const Job* j, Time t0, Time t1, int slots, const std::vector<Placement>& pl, bool ghost = false) {
    const int tot = std::max(1, slots);
    for (const Placement& p : pl) {
      const int sl = static_cast<int>(p.slots);
      nalloc[p.node].push_back({t0, t1, j->id, sl, ceil_div(j->mem_mb * sl, tot), ceil_div(j->jobfs_mb * sl, tot),
                                &j->consumables, sl, ghost});
    }
  }

  // Max concurrent usage on node n over [t, e) of one quantity.
  template <class F>
  std::int64_t node_peak(std::uint32_t n, Time t, Time e, F qty) const {
    std::int64_t peak = 0;
    const auto& v = nalloc[n];
    const bool skip_ghosts = !use_ghosts;
    auto at = [&](Time c) {
      std::int64_t u = 0;
      for (const NodeAlloc& a : v)
        if (a.t0 <= c && c < a.t1 && !(a.ghost && skip_ghosts)) u += qty(a);
      return u;
    };
    peak = at(t);
    for (const NodeAlloc& a : v)
      if (a.t0 > t && a.t0 < e && !(a.ghost && skip_ghosts)) peak = std::max(peak, at(a.t0));
    return peak;
  }

  // Slots job j may have on node n over [t, t+d).
  int node_slots(std::uint32_t n, const Job& j, const Req& r, Time t, Time d) {
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

  // Host-level availability at t; returns total slots (avail filled).
  std::int64_t node_scan(const Job& j, const Req& r, Time t, Time d) {
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
          if (a.ghost && !use_ghosts) continue;
          if (a.t0 > t) nx = std::min(nx, a.t0);
          if (a.t1 > t) nx = std::min(nx, a.t1);
        }
    return nx;
  }

  // ------------------------------------------------------- core placement
  std::vector<int> pick_cores(std::uint32_t n, int s) {
    return corral::pick_cores(snap->nodes[n], core_used.data() + core_off[n], s);
  }

  // Placement for a job starting now that needs cores only (NodeSets).
  std::vector<Placement> place_cores_now(int s) {
    ensure_buckets();
    return sets.place(s, snap->nodes.size());
  }

  void take_now(std::vector<Placement>& pl) {
    for (Placement& p : pl) {
      if (cfg->pick_cores) p.cores = pick_cores(p.node, static_cast<int>(p.slots));
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

  // Slots and hosts for j starting now for duration d (slots capped at smax);
  // false if it cannot start now.
  bool probe_start(const Job& j, const Req& r, Time d, int smax, int& s, std::vector<Placement>& pl) {
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

  // Tries to start j now for duration d (slots capped at smax). Returns true if started.
  bool try_start(Plan& plan, const Job& j, const Req& r, Time d, int smax, bool backfilled) {
    int s = 0;
    std::vector<Placement> pl;
    if (!probe_start(j, r, d, smax, s, pl)) return false;
    commit(plan, j, r, Action::Start, now, d, s, std::move(pl), backfilled);
    return true;
  }

  // Earliest start (t), slots (s) and, for host-level jobs, hosts (pl) for j;
  // false if it can never be planned.
  bool find_reservation(const Job& j, const Req& r, Time d, Time& t, int& s, std::vector<Placement>& pl) {
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

  // Runs f() with later jobs' ghosts out of node_peak/next_event (they stay
  // in nalloc), then puts them back.
  template <class F>
  bool without_ghosts(F&& f) {
    use_ghosts = ghosts_live == 0;
    const bool ok = f();
    use_ghosts = true;
    return ok;
  }

  // Reserves the earliest start for j; false if it can never be planned.
  bool reserve(Plan& plan, const Job& j, const Req& r, Time d, Time* at = nullptr) {
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

  // Tries to start j now, preferring hosts no later job's pin needs; ignores
  // the pins if avoiding them would not start j now or give it fewer slots
  // (a later job's pin never delays j).
  bool start_pref(Plan& plan, const Job& j, const Req& r, Time d, int smax, bool backfilled) {
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
  std::vector<std::size_t> checkpointed;  // running jobs checkpointed this pass (run() clears)
  bool checkpoint_for(Plan& plan, const Job& head, const Req& r, Time d) {
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

  // Conservative: loads last pass's pins of jobs in this pass's order as
  // ghosts (a pin is skipped if its job's duration or slot range changed, or
  // it names a node that is gone or down).
  void load_ghosts(const PassState& st) {
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

  void drop_ghost(JobId id) {
    if (!ghost_jobs.erase(id)) return;
    for (const Placement& q : pin_of.at(id)->pl) {
      auto& v = nalloc[q.node];
      v.erase(std::remove_if(v.begin(), v.end(), [id](const NodeAlloc& a) { return a.ghost && a.job == id; }), v.end());
    }
    --ghosts_live;
  }

  void run(const PassState& st, Plan& plan) {
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
    for (std::uint32_t idx : st.order) {
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
          if (j.checkpointable && (cfg->checkpoint_fresh || j.requeues > 0) && sat_add(now, db) <= shadow && try_start(plan, j, req, db, cap, true)) continue;
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
    pin_of.clear();
    pins.swap(next_pins);
    next_pins.clear();
    ghost_jobs.clear();
    ghosts_live = 0;
  }

  // ============================================================ fast path
  // Cores-only passes (no queues, no global or host consumables, no memory or
  // jobfs tracking, no MONITOR, nothing freed, suspended or resumed by an
  // earlier stage) under fcfs, easy and conservative. The Planner keeps the
  // node state of snap.running from pass to pass and updates it by the
  // difference (compared position by position, so a caller that passes an
  // unrelated snapshot only costs a full update): a pass then costs a few
  // steps per running and pending job instead of a walk over every node.
  // The decisions are exactly those of the general path (tests compare them).
  bool fast_enabled = true;
  PassState pass_scratch;  // Planner::pass_state()

  // Node layout, rebuilt when Snapshot::nodes_version is 0 or changes.
  std::uint64_t fl_version = 0;
  bool fl_built = false;
  bool fl_plain = false;          // no node tracks memory, jobfs or consumables
  std::size_t fl_nn = 0;
  std::int64_t fl_total = 0;      // cores of up nodes
  int fl_maxc = 0;
  std::vector<int> fl_cap;        // schedulable cores (0 if down)
  std::vector<int> fl_cores;      // Node::cores (core index bound)
  std::vector<std::uint8_t> fl_up;
  std::vector<std::uint32_t> fl_coff;

  // Mirror of snap.running as of the last fast pass.
  // RunRec's trivially copyable part.
  struct RunRecPod {
    static constexpr std::uint32_t kInline = 10;
    JobId id = 0;
    Time start = 0, end = 0;      // expected_end
    int slots = 0, on_up = 0;     // on_up: slots on up nodes (cores held)
    bool suspended = false, backfilled = false, holds = false;
    // The placement flattened (node, slots, core count, cores...), inline when
    // short, so comparing it reads only the snapshot's side from the heap.
    // A range (Placement::count != 1, no cores) stores -1 - count as its core
    // count.
    std::uint32_t n = 0;
    std::int32_t inl[kInline] = {};
  };
  struct RunRec : RunRecPod {
    std::vector<std::int32_t> ext;
    const std::int32_t* sig() const { return n <= kInline ? inl : ext.data(); }
    bool empty_pl() const { return n == 0; }
    static std::int32_t third(const Placement& p) {
      return p.count == 1 ? static_cast<std::int32_t>(p.cores.size()) : -1 - static_cast<std::int32_t>(p.count);
    }
    static std::uint32_t ncores(const Placement& p) { return p.count == 1 ? static_cast<std::uint32_t>(p.cores.size()) : 0; }
    void set(const std::vector<Placement>& pl) { set(pl.data(), pl.data() + pl.size()); }
    void set(const Placement* b, const Placement* e) {
      std::uint32_t len = 0;
      for (const Placement* p = b; p != e; ++p) len += 3 + ncores(*p);
      n = len;
      std::int32_t* o = inl;
      if (len > kInline) {
        ext.resize(len);
        o = ext.data();
      }
      for (const Placement& p : std::span<const Placement>(b, e)) {
        *o++ = static_cast<std::int32_t>(p.node);
        *o++ = static_cast<std::int32_t>(p.slots);
        *o++ = third(p);
        if (p.count == 1)
          for (int c : p.cores) *o++ = c;
      }
    }
    bool same(const std::vector<Placement>& pl) const {
      const std::int32_t* q = sig();
      const std::int32_t* e = q + n;
      for (const Placement& p : pl) {
        if (e - q < 3 || q[0] != static_cast<std::int32_t>(p.node) || q[1] != static_cast<std::int32_t>(p.slots) ||
            q[2] != third(p))
          return false;
        q += 3;
        if (p.count != 1) continue;
        if (e - q < static_cast<std::ptrdiff_t>(p.cores.size())) return false;
        for (int c : p.cores)
          if (*q++ != c) return false;
      }
      return q == e;
    }
  };
  // The records live in one arena (f_recs, spare slots in f_spare); the
  // mirror, the diff's pool and the provisional lists hold their indices, so
  // a record changes lists by a 4-byte copy instead of a ~110-byte swap
  // (three to four per start and end).
  std::vector<RunRec> f_recs;
  std::vector<std::uint32_t> f_spare;
  std::uint32_t f_new_rec() {  // may grow f_recs: no RunRec& held across it
    if (!f_spare.empty()) {
      const std::uint32_t i = f_spare.back();
      f_spare.pop_back();
      return i;
    }
    f_recs.emplace_back();
    return static_cast<std::uint32_t>(f_recs.size() - 1);
  }
  std::vector<std::uint32_t> fr;  // arena index per position of running
  std::uint64_t fr_version = 0;   // Snapshot::running_version fr mirrors (0: none)
  std::size_t fr_bad = 0;         // holding jobs without a placement (general path)
  std::vector<int> f_used;        // per node: slots held (may exceed cores)
  std::vector<int> f_free;        // per node: clamped free cores
  std::int64_t f_sum_free = 0, f_used_now = 0;
  // Single-core fast path of f_range_add: up nodes of capacity 1 as a
  // bitset, and how many nodes hold a count other than 0 or 1 (with none,
  // a node's free bit says its count exactly).
  std::vector<std::uint64_t> f_up1;
  std::int64_t f_odd = 0;
  // f_fast1: single-core nodes, every up node of capacity 1 (the fast path
  // may run). f_stale: the fast path left f_used / f_free behind; with no
  // odd count they follow from the bits (free bit: count 0 and 1 free; an up
  // node without it: count 1; a down node: count 0), rebuilt by
  // f_materialize before a per-node update reads them.
  bool f_fast1 = false, f_stale = false;
  void f_materialize() {
    f_stale = false;
    const std::uint64_t* w = f_sets.bits.data() + f_sets.nw;
    for (std::size_t n = 0; n < fl_nn; ++n) {
      const bool fb = (w[n / 64] >> (n % 64)) & 1;
      const bool ub = (f_up1[n / 64] >> (n % 64)) & 1;
      f_free[n] = fb ? 1 : 0;
      f_used[n] = ub && !fb ? 1 : 0;
    }
  }
  static int f_is_odd(int u) { return static_cast<unsigned>(u) > 1u; }  // u < 0 || u > 1
  std::vector<std::uint16_t> f_core;             // per core: holders
  NodeSets f_sets;
  // A holder's release: (expected_end, on_up). Trivially copyable, so the
  // sorted vector's insert and erase move the tail with one memmove (a
  // std::pair has a user-provided assignment: the tail moved element by
  // element, 36 M instructions of a CTC easy replay).
  struct FEnd {
    Time first;
    int second;
    friend bool operator<(const FEnd& a, const FEnd& b) { return a.first != b.first ? a.first < b.first : a.second < b.second; }
    friend bool operator==(const FEnd& a, const FEnd& b) { return a.first == b.first && a.second == b.second; }
  };
  static_assert(std::is_trivially_copyable_v<FEnd>);
  std::vector<FEnd> f_ends;                      // sorted (expected_end, on_up) of holders
  struct Change {
    JobId id;
    Time end;
    int on_up;
    bool holds;
  };
  std::vector<Change> f_removed, f_added;        // net changes of the last diff
  // Whether the diff lists them: only conservative's reuse reads them (an
  // easy or fcfs pass also leaves cc_valid false, so no later pass reads a
  // list it did not make).
  bool f_track = true;

  // This pass's starts (records in fu_prov) and their release events.
  std::vector<std::pair<Time, std::int64_t>> fu_ends;     // (now + d, slots) of starts
  Profile fprof;                                          // conservative/easy profile

  // Conservative: the previous fast pass, reused when only arrivals and
  // on-time events happened since (see fast_conservative_reuse).
  enum : std::uint8_t { kNone, kStart, kReserve, kReject };
  struct CEntry {
    JobId id;
    int smin, smax;
    Time d;
    std::uint8_t kind;
    Time t;
    int s;
  };
  std::vector<CEntry> cc, cc_next;
  bool cc_valid = false;
  Time cc_now = 0;

  void fl_build(const Snapshot& s) {
    const std::size_t nn = s.nodes.size();
    fl_built = true;
    fl_version = s.nodes_version;
    fl_nn = nn;
    fl_plain = true;
    fl_total = 0;
    fl_maxc = 0;
    fl_cap.assign(nn, 0);
    fl_cores.assign(nn, 0);
    fl_up.assign(nn, 0);
    fl_coff.assign(nn + 1, 0);
    std::uint32_t off = 0;
    for (std::size_t n = 0; n < nn; ++n) {
      const Node& nd = s.nodes[n];
      fl_coff[n] = off;
      fl_cores[n] = std::max(0, nd.cores);
      off += static_cast<std::uint32_t>(fl_cores[n]);
      if (!nd.up) continue;
      fl_up[n] = 1;
      fl_cap[n] = fl_cores[n];
      fl_total += fl_cap[n];
      fl_maxc = std::max(fl_maxc, nd.cores);
      if (nd.mem_mb > 0 || nd.jobfs_mb > 0 || !nd.consumables.empty()) fl_plain = false;
    }
    fl_coff[nn] = off;
    // Running state starts empty; the diff adds every running job.
    fr.clear();
    f_recs.clear();
    f_spare.clear();
    f_prov.clear();
    fu_prov.clear();
    fr_version = 0;
    fr_bad = 0;
    f_used.assign(nn, 0);
    f_free = fl_cap;
    f_odd = 0;
    f_stale = false;
    f_fast1 = fl_maxc == 1;
    f_up1.assign((nn + 63) / 64, 0);
    for (std::size_t n = 0; n < nn; ++n)
      if (fl_up[n]) {
        if (fl_cap[n] == 1) f_up1[n / 64] |= std::uint64_t{1} << (n % 64);
        else f_fast1 = false;  // an up node with no core: counted per node
      }
    f_sum_free = fl_total;
    f_used_now = 0;
    f_core.assign(off, 0);
    f_sets.init(nn, fl_maxc);
    for (std::size_t n = 0; n < nn; ++n) f_sets.insert(static_cast<std::uint32_t>(n), f_free[n]);
    f_ends.clear();
    cc_valid = false;
  }

  void f_node_add(std::uint32_t n, int delta) {
    if (f_fast1) {  // the word path (it counts per node when it must)
      f_range_add(n, 1, delta, false);
      return;
    }
    const int old = f_free[n];
    const int u0 = f_used[n];
    f_used[n] += delta;
    f_odd += f_is_odd(f_used[n]) - f_is_odd(u0);
    const int nf = std::clamp(fl_cap[n] - f_used[n], 0, fl_cap[n]);
    if (nf == old) return;
    f_sets.erase(n, old);
    f_sets.insert(n, nf);
    f_free[n] = nf;
    f_sum_free += nf - old;
  }

  // f_node_add for nodes n0 .. n0 + k - 1 (up ones only when check_up). On
  // single-core nodes only the set of free count 1 exists: its bits change
  // a word at a time.
  void f_range_add(std::uint32_t n0, std::uint32_t k, int delta, bool check_up) {
    const std::uint64_t end = std::min<std::uint64_t>(fl_nn, std::uint64_t{n0} + k);
    if (f_sets.maxc != 1) {
      for (std::uint64_t n = n0; n < end; ++n)
        if (!check_up || fl_up[n]) f_node_add(static_cast<std::uint32_t>(n), delta);
      return;
    }
    std::uint64_t* w = f_sets.bits.data() + f_sets.nw;  // the bitset of free count 1
    int* used = f_used.data();
    int* fr1 = f_free.data();
    const int* cap = fl_cap.data();
    const std::uint8_t* up = fl_up.data();
    std::int64_t dsum = 0;
    for (std::uint64_t n = n0; n < end;) {
      // One word of the bitset at a time.
      const std::uint64_t wend = std::min(end, (n / 64 + 1) * 64);
      std::uint64_t& word = w[n / 64];
      // With no odd count anywhere, a start on nodes all free (count 0) or
      // an end on up nodes all taken (count 1) changes every node alike:
      // the word at once (the per-node counts are rebuilt when next read).
      if (f_fast1 && f_odd == 0 && (delta == 1 || delta == -1)) {
        const auto len = static_cast<unsigned>(wend - n);
        if (f_word_flip(n / 64, static_cast<unsigned>(n % 64), len, delta)) {
          dsum -= delta * static_cast<std::int64_t>(len);
          n = wend;
          continue;
        }
      }
      if (f_stale) f_materialize();
      std::uint64_t set = 0, clr = 0;
      std::int64_t dodd = 0;  // local: used[] stores would alias a member
      for (; n < wend; ++n) {
        if (check_up && !up[n]) continue;
        const int old = fr1[n];
        const int u0 = used[n];
        const int u = used[n] += delta;
        dodd += f_is_odd(u) - f_is_odd(u0);
        const int nf = cap[n] > 0 && u <= 0 ? 1 : 0;  // clamp(cap - u, 0, cap) with cap <= 1
        if (nf == old) continue;
        fr1[n] = nf;
        dsum += nf - old;
        (nf ? set : clr) |= std::uint64_t{1} << (n % 64);
      }
      word = (word & ~clr) | set;
      f_odd += dodd;
    }
    f_sum_free += dsum;
    f_sets.count[1] = static_cast<std::uint32_t>(static_cast<std::int64_t>(f_sets.count[1]) + dsum);
  }

  // The word path of f_range_add and f_flip1 (with f_fast1, no odd count and
  // delta +-1): nodes lo .. lo + len - 1 of word wi, a start on nodes all
  // free (count 0) or an end on up nodes all taken (count 1), change alike,
  // so their free bits flip at once and the per-node counts are left behind
  // (f_stale, rebuilt when next read). False (nothing changed) otherwise.
  bool f_word_flip(std::size_t wi, unsigned lo, unsigned len, int delta) {
    const std::uint64_t mask = (len == 64 ? ~std::uint64_t{0} : ((std::uint64_t{1} << len) - 1)) << lo;
    // want: the free bits a start needs (all set) or an end needs (all
    // clear, and the nodes up): computed without a branch on delta.
    const std::uint64_t want = mask & (std::uint64_t{0} - static_cast<std::uint64_t>(delta == 1));
    std::uint64_t& word = f_sets.bits[f_sets.nw + wi];
    if ((((word & mask) ^ want) | (~(f_up1[wi] | want) & mask)) != 0) return false;
    f_stale = true;
    word ^= mask;  // every bit in the mask flips
    return true;
  }

  // f_range_add's word path without its call and loop, for a start or end of
  // one slot a node within one 64-node word (most of a single-core machine's
  // ends and released provisional starts): false when it does not apply
  // (then f_range_add decides, per node if it must).
  bool f_flip1(std::uint32_t n0, std::uint32_t k, int delta) {
    if (!f_fast1 || f_odd != 0 || (delta != 1 && delta != -1)) return false;
    const std::uint64_t end = std::min<std::uint64_t>(fl_nn, std::uint64_t{n0} + k);
    const std::size_t wi = n0 / 64;
    if (end <= n0 || (end - 1) / 64 != wi) return false;
    const auto len = static_cast<unsigned>(end - n0);
    if (!f_word_flip(wi, n0 % 64, len, delta)) return false;
    const std::int64_t d = -delta * static_cast<std::int64_t>(len);
    f_sum_free += d;
    f_sets.count[1] = static_cast<std::uint32_t>(static_cast<std::int64_t>(f_sets.count[1]) + d);
    return true;
  }

  void f_apply(const RunRec& r, int sign) {
    if (!r.holds) return;
    f_apply_nodes(r, sign);
    f_apply_end(r, sign);
  }
  // The node part of f_apply: slots per node and the cores it lists.
  void f_apply_nodes(const RunRec& r, int sign) {
    const std::int32_t* q = r.sig();
    const std::int32_t* qe = q + r.n;
    while (q < qe) {
      const auto node = static_cast<std::uint32_t>(q[0]);
      const int slots = q[1];
      if (q[2] < 0) {  // a range of -1 - q[2] nodes
        const auto k = static_cast<std::uint32_t>(-1 - q[2]);
        q += 3;
        if (node < fl_nn && !f_flip1(node, k, sign * slots)) f_range_add(node, k, sign * slots, true);
        continue;
      }
      const int nc = q[2];
      q += 3;
      const std::int32_t* cores = q;
      q += nc;
      if (node >= fl_nn || !fl_up[node]) continue;
      if (nc != 0 || !f_flip1(node, 1, sign * slots)) f_node_add(node, sign * slots);
      for (int k = 0; k < nc; ++k) {
        const int c = cores[k];
        if (c >= 0 && c < fl_cores[node]) f_core[fl_coff[node] + static_cast<std::uint32_t>(c)] += static_cast<std::uint16_t>(sign);
      }
    }
  }
  // The release part of f_apply: cores held now and their expected end.
  void f_apply_end(const RunRec& r, int sign) {
    f_used_now += sign * r.on_up;
    const FEnd e{r.end, r.on_up};
    if (sign > 0) {
      f_ends.insert(std::upper_bound(f_ends.begin(), f_ends.end(), e), e);
    } else {
      auto it = std::lower_bound(f_ends.begin(), f_ends.end(), e);
      if (it != f_ends.end() && *it == e) f_ends.erase(it);
    }
  }

  // Brings the mirror up to snap.running; records the net changes. An entry
  // that only moved (a swap-remove by the caller) is found among the removed
  // ones and moved with its record: its cores are not released and re-taken.
  std::vector<std::uint32_t> fd_changed;  // scratch: positions that differ
  std::vector<std::uint32_t> fd_pool;     // scratch: records of the removed entries
  bool f_same(const RunRec& r, const RunningJob& rj, std::uint64_t version) const {
    return rj.job.id == r.id && rj.expected_end == r.end && rj.slots == r.slots && rj.start == r.start &&
           rj.suspended == r.suspended && rj.backfilled == r.backfilled &&
           (version != 0 || r.same(rj.placement));  // model.hpp: placement fixed per (id, start)
  }
  // Starts of the last fast pass stay applied to the node state (f_used,
  // f_free, f_sets, f_core) as provisional records: the caller usually runs
  // them, and the next diff adopts each one that appears in `running` as
  // started (same id, start, slots and placement) instead of releasing and
  // re-taking its nodes; the others are released by f_settle().
  // Both pools keep their spare records past the count (no reallocation of
  // a record's placement per start).
  std::vector<std::uint32_t> f_prov, fu_prov;  // kept across passes / this pass's starts
  // Adopts a provisional record as fr[k]'s.
  bool f_adopt(std::uint32_t k, const RunningJob& rj) {
    if (rj.suspended) return false;
    for (std::size_t m = 0; m < f_prov.size(); ++m) {
      const RunRec& p = f_recs[f_prov[m]];
      if (p.id != rj.job.id || p.start != rj.start || p.slots != rj.slots || !p.same(rj.placement)) continue;
      fr[k] = f_prov[m];
      f_prov[m] = f_prov.back();
      f_prov.pop_back();
      RunRec& r = f_recs[fr[k]];
      r.end = rj.expected_end;
      r.backfilled = rj.backfilled;
      f_apply_end(r, +1);  // its nodes are taken already
      if (f_track) f_added.push_back({r.id, r.end, r.on_up, r.holds});
      return true;
    }
    return false;
  }
  void f_settle() {
    for (std::uint32_t i : f_prov) {
      f_apply_nodes(f_recs[i], -1);
      f_spare.push_back(i);
    }
    f_prov.clear();
  }
  void f_diff(const Snapshot& s) {
    f_removed.clear();
    f_added.clear();
    fd_changed.clear();
    const std::size_t nr = s.running.size(), no = fr.size();
    const std::size_t lo = std::min(nr, no), hi = std::max(nr, no);
    if (s.running_version != 0 && s.running_since != 0 && s.running_since == fr_version) {
      // model.hpp running_touched: only the listed entries and the tail can differ.
      // Kept sorted and unique as it grows (a pass touches a few entries: an
      // insertion costs less than std::sort and std::unique's calls).
      for (std::uint32_t k : s.running_touched) {
        if (k >= lo || f_same(f_recs[fr[k]], s.running[k], s.running_version)) continue;
        std::size_t at = fd_changed.size();
        while (at > 0 && fd_changed[at - 1] > k) --at;
        if (at > 0 && fd_changed[at - 1] == k) continue;
        fd_changed.insert(fd_changed.begin() + static_cast<std::ptrdiff_t>(at), k);
      }
      for (std::size_t k = lo; k < hi; ++k) fd_changed.push_back(static_cast<std::uint32_t>(k));
    } else {
      for (std::size_t k = 0; k < hi; ++k)
        if (k >= lo || !f_same(f_recs[fr[k]], s.running[k], s.running_version)) fd_changed.push_back(static_cast<std::uint32_t>(k));
    }
    if (fd_changed.empty()) return;
    fd_pool.clear();
    for (std::uint32_t k : fd_changed) {
      if (k >= no) break;
      fd_pool.push_back(fr[k]);
    }
    if (fr.size() < nr) fr.resize(nr);
    for (std::uint32_t k : fd_changed) {
      if (k >= nr) break;
      const RunningJob& rj = s.running[k];
      bool moved = false;
      for (std::size_t m = 0; m < fd_pool.size(); ++m)
        if (f_same(f_recs[fd_pool[m]], rj, s.running_version)) {
          fr[k] = fd_pool[m];
          fd_pool[m] = fd_pool.back();
          fd_pool.pop_back();
          moved = true;
          break;
        }
      if (moved) continue;
      if (f_adopt(k, rj)) continue;
      fr[k] = f_new_rec();
      RunRec& r = f_recs[fr[k]];
      r.id = rj.job.id;
      r.start = rj.start;
      r.end = rj.expected_end;
      r.slots = rj.slots;
      r.suspended = rj.suspended;
      r.backfilled = rj.backfilled;
      r.holds = !rj.suspended;
      r.set(rj.placement);
      r.on_up = 0;
      for (const Placement& p : rj.placement) {
        const std::uint64_t end = std::min<std::uint64_t>(fl_nn, std::uint64_t{p.node} + p.count);
        for (std::uint64_t n = p.node; n < end; ++n)
          if (fl_up[n]) r.on_up += static_cast<int>(p.slots);
      }
      if (r.holds && r.empty_pl()) ++fr_bad;
      f_apply(r, +1);
      if (f_track) f_added.push_back({r.id, r.end, r.on_up, r.holds});
    }
    for (std::uint32_t i : fd_pool) {
      const RunRec& r = f_recs[i];
      f_apply(r, -1);
      if (r.holds && r.empty_pl()) --fr_bad;
      if (f_track) f_removed.push_back({r.id, r.end, r.on_up, r.holds});
      f_spare.push_back(i);
    }
    fd_pool.clear();
    fr.resize(nr);
    // An entry whose flags changed but not its release shows up as removed
    // and added unchanged: the pair cancels.
    for (std::size_t a = 0; a < f_added.size(); ++a)
      for (std::size_t b = 0; b < f_removed.size(); ++b) {
        const Change& x = f_added[a];
        const Change& y = f_removed[b];
        if (x.id == y.id && x.end == y.end && x.on_up == y.on_up && x.holds == y.holds) {
          f_added[a] = f_added.back();
          f_added.pop_back();
          f_removed[b] = f_removed.back();
          f_removed.pop_back();
          --a;
          break;
        }
      }
  }

  // NodeSets::place_into with ranges on single-core nodes, and the
  // f_range_add of each range it gives, in one walk: the highest free nodes
  // first, a run at a time, each word's bits cleared once (the word path of
  // f_range_add: with f_fast1 and no odd count the per-node counts follow
  // from the bits, f_stale). A run that ends at a word's bit 0 and goes on
  // at bit 63 of the word below joins the same entry, as place_into's runs
  // cross words. Returns the nodes taken.
  int f_take1(std::vector<Placement>& out, int sl) {
    const std::size_t first = out.size();
    std::uint64_t* w = f_sets.bits.data() + f_sets.nw;  // the bitset of free count 1
    int left = sl;
    for (std::size_t wi = f_sets.nw; wi-- > 0 && left > 0;) {
      std::uint64_t m = w[wi];
      if (m == 0) continue;
      std::uint64_t taken = 0;
      while (m != 0 && left > 0) {
        const int h = 63 - __builtin_clzll(m);
        const std::uint64_t inv = ~(m << (63 - h));  // the run down from h leads
        int ones = inv ? __builtin_clzll(inv) : 64;
        if (ones > left) ones = left;
        const int low = h - ones + 1;
        const std::uint64_t run = (ones == 64 ? ~std::uint64_t{0} : ((std::uint64_t{1} << ones) - 1)) << low;
        m &= ~run;
        taken |= run;
        left -= ones;
        const auto lo = static_cast<std::uint32_t>(wi * 64 + static_cast<std::size_t>(low));
        if (out.size() > first && out.back().node == lo + static_cast<std::uint32_t>(ones)) {
          out.back().node = lo;
          out.back().count += static_cast<std::uint32_t>(ones);
        } else {
          Placement& p = out.emplace_back();  // in place: no temporary moved in
          p.node = lo;
          p.slots = 1;
          p.count = static_cast<std::uint32_t>(ones);
        }
      }
      w[wi] &= ~taken;
    }
    const int got = sl - left;
    if (got > 0) f_stale = true;
    f_sum_free -= got;
    f_sets.count[1] -= static_cast<std::uint32_t>(got);
    return got;
  }

  // Starts j now on s slots: node state, undo log, decision.
  void f_start(Plan& plan, const Snapshot& s, const Job& j, int sl, Time d) {
    const bool cores = cfg->pick_cores;
    const bool ranges = cfg->node_ranges && !cores;
    // PlannerConfig::compact_starts: the placement goes to the pass's one
    // buffer, the start to Plan::starts (no Decision, no heap block).
    const bool compact = cfg->compact_starts;
    std::vector<Placement> own;
    std::vector<Placement>& buf = compact ? plan.start_placements : own;
    const std::size_t first = buf.size();
    int on_up = 0;
    // Single-core nodes, node ranges, no odd count: placed and taken in one
    // walk down the free bits (f_take1), the same nodes place_into picks.
    const bool take1 = ranges && f_fast1 && f_odd == 0;
    if (take1) on_up = f_take1(buf, sl);
    else if (compact) f_sets.place_into(buf, sl, fl_nn, ranges);
    else own = f_sets.place(sl, fl_nn, ranges);
    const std::span<Placement> pl(buf.data() + first, buf.size() - first);
    if (!take1)
      for (Placement& p : pl) {
        if (cores) {
          std::uint16_t* used = f_core.data() + fl_coff[p.node];
          p.cores = corral::pick_cores(s.nodes[p.node], used, static_cast<int>(p.slots));
        }
        if (p.count == 1) f_node_add(p.node, static_cast<int>(p.slots));
        else f_range_add(p.node, p.count, static_cast<int>(p.slots), false);
        on_up += static_cast<int>(p.slots * p.count);  // f_sets holds up nodes only
      }
    fu_ends.emplace_back(sat_add(s.now, d), sl);
    // Its provisional record (see f_prov).
    fu_prov.push_back(f_new_rec());
    RunRec& r = f_recs[fu_prov.back()];
    r.id = j.id;
    r.start = s.now;
    r.end = 0;  // set from running when adopted
    r.slots = sl;
    r.on_up = on_up;
    r.suspended = r.backfilled = false;
    r.holds = true;
    r.set(pl.data(), pl.data() + pl.size());
    if (compact) {
      plan.starts.push_back({j.id, sl, static_cast<std::uint32_t>(first), static_cast<std::uint32_t>(pl.size())});
      return;
    }
    Decision dec;  // not emplace_back() (see f_reserve)
    dec.action = Action::Start;
    dec.job = j.id;
    dec.at = s.now;
    dec.slots = sl;
    dec.placement = std::move(own);
    plan.decisions.push_back(std::move(dec));
  }

  // End of a fast pass: its starts become the provisional records.
  void f_keep_starts() {
    f_prov.insert(f_prov.end(), fu_prov.begin(), fu_prov.end());
    fu_prov.clear();
    fu_ends.clear();
  }

  // The general path's resolve() for a cores-only layout: "" if the job is
  // valid (it then needs cores only), else the same error text.
  static std::string f_check(const Job& j) {
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
  void f_reserve(Plan& plan, const Job& j, Time at, int slots) const {
    if (cfg->compact_reserves) {  // PlannerConfig::compact_reserves
      plan.reserves.push_back({j.id, at, slots});
      return;
    }
    // Not emplace_back(), with or without arguments: value-initialization
    // (and parenthesized aggregate initialization too, GCC 12) zero-fills
    // the whole Decision first with `rep stos`, few instructions but slow
    // (CTC conservative replay 0.67 -> 0.71 s CPU with it).
    Decision dec;
    dec.action = Action::Reserve;
    dec.job = j.id;
    dec.at = at;
    dec.slots = slots;
    plan.decisions.push_back(std::move(dec));
  }
  std::string never_text(const Job& j) const {
    return "job " + std::to_string(j.id) + " can never run: no set of up nodes can hold " + std::to_string(j.slots_min) +
           " slots with its requests";
  }

  // Builds the cores profile (running jobs + this pass's starts), as ensure_prof0.
  void f_build_prof(Time t) {
    events.clear();
    std::int64_t used = f_used_now;
    for (const auto& [e, n] : f_ends) events.emplace_back(std::max(e, t), n);
    for (const auto& [e, n] : fu_ends) {
      used += n;
      events.emplace_back(e, n);
    }
    std::sort(events.end() - static_cast<std::ptrdiff_t>(fu_ends.size()), events.end());
    if (!fu_ends.empty()) std::inplace_merge(events.begin(), events.end() - static_cast<std::ptrdiff_t>(fu_ends.size()), events.end());
    fprof.build(t, fl_total, fl_total - used, events);
  }

  // Returns false (nothing changed in `plan`) when the pass is not for the fast path.
  bool fast_plan(const Snapshot& s, const PlannerConfig& c, const PassState& st, Plan& plan) {
    const Backfill pol = c.backfill;
    if (!fast_enabled || c.monitor || !st.freed.empty() || !s.queues.empty() || !s.global.empty() ||
        (pol != Backfill::Fcfs && pol != Backfill::Easy && pol != Backfill::Conservative)) {
      cc_valid = false;
      return false;
    }
    for (const Decision& d : plan.decisions)
      if (d.action == Action::Suspend || d.action == Action::Resume) {
        cc_valid = false;
        return false;
      }
    if (!fl_built || s.nodes_version == 0 || s.nodes_version != fl_version || s.nodes.size() != fl_nn) fl_build(s);
    if (!fl_plain) {
      cc_valid = false;
      return false;
    }
    // Snapshot::running_version: the same nonzero value promises an unchanged
    // running set, so the entry-by-entry diff is skipped (nothing changed).
    f_track = pol == Backfill::Conservative;
    if (s.running_version != 0 && s.running_version == fr_version && fr.size() == s.running.size()) {
      f_removed.clear();
      f_added.clear();
    } else {
      f_diff(s);
    }
    f_settle();  // provisional starts not found in running
    fr_version = s.running_version;
    if (fr_bad > 0) {
      cc_valid = false;
      return false;
    }
    snap = &s;
    cfg = &c;
    now = s.now;
    out = &plan;
    pins.clear();  // a cores-only pass pins nothing
    if (pol == Backfill::Conservative) {
      fast_conservative(s, c, st, plan);
    } else {
      cc_valid = false;
      fast_easy(s, c, st, plan);
    }
    f_keep_starts();
    return true;
  }

  // fcfs and easy: one reservation at most, so the profile after it is known
  // in closed form: free cores never drop after now except for the
  // reservation [shadow, shadow + d), and the least free over a window that
  // reaches past the shadow time is the free count at the shadow time.
  void fast_easy(const Snapshot& s, const PlannerConfig& c, const PassState& st, Plan& plan) {
    const Backfill pol = c.backfill;
    const auto& pend = s.pending;
    std::int64_t free_now = std::min(f_sum_free, fl_total - f_used_now);
    std::int64_t pass_used = 0;
    bool prof_ready = false, have_res = false;
    std::int64_t at_now = 0, at_shadow = 0;  // profile values at now / at the shadow time
    Time shadow = kForever;
    int reservations_left = pol == Backfill::Fcfs ? 0 : 1;
    const std::size_t np = pend.size();
    const bool all_plain = s.pending_cores_only;  // model.hpp: no job needs the check
    // Snapshot::pending_slots_min (model.hpp): past the reservation, the jobs
    // that do nothing are passed over in this compact array without reading
    // their Job: those that need more than the free cores (and no more than
    // the machine), and with pending_min_duration those that fit now but not
    // at the shadow time and surely end after it (the path below ends in the
    // same `continue`).
    const int* need = all_plain && np > 0 && s.pending_slots_min.size() == np && pol != Backfill::Fcfs
                          ? s.pending_slots_min.data()
                          : nullptr;
    const Time* mind = need != nullptr && s.pending_min_duration.size() == np ? s.pending_min_duration.data() : nullptr;
    const std::uint32_t* ord = st.order.data();
    const std::size_t no = st.order.size();
    // Snapshot::pending_order_slots_min / _min_duration (model.hpp): when
    // this pass's order is exactly pending_order, the same figures in order
    // (scan_skip), checked by one memcmp unless order_pending says so
    // (PassState::order_is_pending_order).
    const std::int32_t* oneed = nullptr;
    const std::int32_t* omind = nullptr;
    if (all_plain && pol != Backfill::Fcfs && no > 0 && s.pending_order.size() == no &&
        s.pending_order_slots_min.size() == no && s.pending_order_min_duration.size() == no &&
        (st.order_is_pending_order || std::memcmp(ord, s.pending_order.data(), no * sizeof *ord) == 0)) {
      oneed = s.pending_order_slots_min.data();
      omind = s.pending_order_min_duration.data();
    }
    for (std::size_t k = 0; k < no; ++k) {
      if ((oneed != nullptr || need != nullptr) && reservations_left == 0) {
        if (free_now <= 0) {
          // Every valid job needs more: the first one ends the pass.
          while (k < no && ord[k] >= np) ++k;
          if (k == no) break;
          if ((oneed != nullptr ? oneed[k] : need[ord[k]]) <= fl_total) return;
        } else {
          // Skipped: n in (lo, fl_total] (fits neither now nor in the least
          // free count before the shadow time; one unsigned compare).
          const std::int64_t lo = std::min(free_now, at_now);
          const auto span = static_cast<std::uint64_t>(fl_total - lo);
          if (oneed != nullptr) {
            const std::int32_t lo32 = clamp32(lo), tot32 = clamp32(fl_total);
            if (at_shadow >= lo) k = scan_skip<false>(oneed, omind, k, no, lo32, tot32, 0, 0);
            else k = scan_skip<true>(oneed, omind, k, no, lo32, tot32, clamp32(at_shadow), clamp32(shadow - now));
          } else if (mind == nullptr || at_shadow >= lo) {
            for (; k < no; ++k) {
              const std::uint32_t i = ord[k];
              if (i < np && static_cast<std::uint64_t>(need[i] - lo - 1) >= span) break;
            }
          } else {
            // Also n in (at_shadow, lo] with an end surely past the shadow time.
            const Time room = shadow - now;
            for (; k < no; ++k) {
              const std::uint32_t i = ord[k];
              if (i >= np) continue;
              const int n = need[i];
              if (static_cast<std::uint64_t>(n - lo - 1) < span) continue;
              if (n > at_shadow && n <= lo && mind[i] > room) continue;
              break;
            }
          }
          if (k == no) break;
        }
      }
      const std::uint32_t idx = ord[k];
      if (idx >= np) continue;
      const Job& j = pend[idx];
      // Past easy's one reservation, a valid job that needs more cores than
      // are free now does nothing (the path below ends in the same `continue`
      // or `break`); most of a pass's visits end here, so they end early.
      if (reservations_left == 0 && j.slots_min > free_now && j.slots_min <= fl_total && pol != Backfill::Fcfs &&
          (all_plain || cores_only_job(j))) {
        if (free_now <= 0) break;
        continue;
      }
      if (!all_plain && !cores_only_job(j)) {
        if (std::string err = f_check(j); !err.empty()) {
          reject(plan, j, "job " + std::to_string(j.id) + ": " + err);
          continue;
        }
      }
      const int smin = j.slots_min;
      if (smin <= free_now) {
        // The duration only matters for a start, or when the job's end
        // decides whether the reservation's lower free count applies.
        Time d = -1, end = 0;
        auto need_end = [&] {
          if (d < 0) {
            d = duration_of(j, c);
            end = sat_add(now, d);
          }
        };
        const int cap = static_cast<int>(std::min<std::int64_t>(j.slots_max, free_now));
        int sl = cap;
        bool ok = true;
        if (prof_ready) {
          // m = least free cores over its run: at_shadow counts only if it
          // ends after the shadow time (and is lower).
          std::int64_t m = at_now;
          if (at_now >= smin && have_res && at_shadow < at_now) {
            need_end();
            if (end > shadow) m = at_shadow;
          }
          if (m < smin) ok = false;
          else if (cap != smin) sl = static_cast<int>(std::max<std::int64_t>(smin, std::min<std::int64_t>(cap, m)));
          else sl = smin;
        }
        if (ok) {
          need_end();
          f_start(plan, s, j, sl, d);
          free_now -= sl;
          pass_used += sl;
          if (prof_ready) {
            at_now -= sl;
            if (have_res && end > shadow) at_shadow -= sl;
          }
          continue;
        }
      }
      if (smin > fl_total) {
        reject(plan, j, never_text(j));
        continue;
      }
      if (pol == Backfill::Fcfs) break;
      if (reservations_left != 0) {
        // Free cores over time before any reservation: non-decreasing.
        std::int64_t v = fl_total - f_used_now - pass_used;
        std::sort(fu_ends.begin(), fu_ends.end());
        std::size_t a = 0, b = 0;
        while (a < f_ends.size() && f_ends[a].first <= now) v += f_ends[a++].second;
        if (!prof_ready) {
          prof_ready = true;
          at_now = v;
        }
        Time t = now;
        if (fu_ends.empty() && v < smin) {
          // No start this pass (most passes that reach here): the running
          // ends alone, in order until enough cores are free, then
          // the rest of that instant (the merge below, without its second
          // list). Ends at kForever never free anything.
          const FEnd* e = f_ends.data();
          const std::size_t ne = f_ends.size();
          std::size_t lim = ne;  // ends at kForever sort last
          while (lim > a && e[lim - 1].first >= kForever) --lim;
          // Four ends a step while they leave v short of smin (the cores an
          // end frees are >= 0, so no end inside the four reaches it), then
          // one at a time to the end that does.
          while (a + 4 <= lim) {
            const std::int64_t v4 = v + e[a].second + e[a + 1].second + e[a + 2].second + e[a + 3].second;
            if (v4 >= smin) break;
            v = v4;
            a += 4;
          }
          while (v < smin && a < lim) {
            t = e[a].first;
            v += e[a++].second;
          }
          if (v < smin) t = kForever;
          else
            while (a < ne && e[a].first == t) v += e[a++].second;
        }
        while (v < smin) {
          const Time ta = a < f_ends.size() ? f_ends[a].first : kForever;
          const Time tb = b < fu_ends.size() ? fu_ends[b].first : kForever;
          t = std::min(ta, tb);
          if (t >= kForever) break;
          while (a < f_ends.size() && f_ends[a].first == t) v += f_ends[a++].second;
          while (b < fu_ends.size() && fu_ends[b].first == t) v += fu_ends[b++].second;
        }
        if (v >= smin && t < kForever) {
          const int sl = j.slots_max == smin ? smin : static_cast<int>(std::max<std::int64_t>(smin, std::min<std::int64_t>(j.slots_max, v)));
          f_reserve(plan, j, t, sl);
          have_res = true;
          shadow = t;
          at_shadow = v - sl;
          --reservations_left;
        }
      }
      if (free_now <= 0 && reservations_left == 0) break;
    }
  }

  // conservative: every blocked job gets the earliest start in the profile.
  void fast_conservative(const Snapshot& s, const PlannerConfig& c, const PassState& st, Plan& plan) {
    const auto& pend = s.pending;
    std::int64_t free_now = std::min(f_sum_free, fl_total - f_used_now);
    bool prof_ready = false;
    std::size_t pos = 0;
    plan.decisions.reserve(plan.decisions.size() + st.order.size());
    cc_next.clear();
    if (cc_valid && conservative_reuse(s, c, st, plan, pos)) {
      prof_ready = true;
    } else {
      cc_next.clear();
      pos = 0;
    }
    for (std::size_t k = pos; k < st.order.size(); ++k) {
      const std::uint32_t idx = st.order[k];
      if (idx >= pend.size()) continue;
      const Job& j = pend[idx];
      const int smin = j.slots_min;
      if (!s.pending_cores_only && !cores_only_job(j)) {  // model.hpp pending_cores_only
        if (std::string err = f_check(j); !err.empty()) {
          reject(plan, j, "job " + std::to_string(j.id) + ": " + err);
          cc_next.push_back({j.id, smin, j.slots_max, 0, kReject, 0, 0});
          continue;
        }
      }
      const Time d = planned_duration(j, c);
      const Time end = sat_add(now, d);
      if (smin <= free_now) {
        const int cap = static_cast<int>(std::min<std::int64_t>(j.slots_max, free_now));
        int sl = cap;
        bool ok = true;
        if (prof_ready) {
          if (fprof.run_end(now, smin) < end) ok = false;
          else if (cap != smin) sl = static_cast<int>(std::max<std::int64_t>(smin, std::min<std::int64_t>(cap, fprof.min_free(now, end))));
          else sl = smin;
        }
        if (ok) {
          if (prof_ready) fprof.add(now, end, -sl);
          f_start(plan, s, j, sl, d);
          free_now -= sl;
          cc_next.push_back({j.id, smin, j.slots_max, d, kStart, now, sl});
          continue;
        }
      }
      if (smin > fl_total) {
        reject(plan, j, never_text(j));
        cc_next.push_back({j.id, smin, j.slots_max, d, kReject, 0, 0});
        continue;
      }
      if (!prof_ready) {
        f_build_prof(now);
        prof_ready = true;
      }
      const Time t = fprof.earliest(smin, d, now);
      if (t >= kForever) {  // no room at any planned time yet
        cc_next.push_back({j.id, smin, j.slots_max, d, kNone, 0, 0});
        continue;
      }
      const Time te = sat_add(t, d);
      const int sl = j.slots_max == smin ? smin
                                         : static_cast<int>(std::max<std::int64_t>(smin, std::min<std::int64_t>(j.slots_max, fprof.min_free(t, te))));
      fprof.add(t, te, -sl);
      f_reserve(plan, j, t, sl);
      cc_next.push_back({j.id, smin, j.slots_max, d, kReserve, t, sl});
    }
    cc.swap(cc_next);
    cc_now = now;
    cc_valid = prof_ready;
  }

  // Reuse of the previous conservative pass. Its reservations stand when the
  // cores profile from now on is the one that pass left: every running job
  // that went away had released its cores by now (ended on or after its
  // estimate), every new running job is one of that pass's starts with the
  // same release, no reservation is due yet, and the queue holds the same jobs
  // in the same order (new ones only at its end). Then a full re-plan would
  // find every old job at its old place (the earliest fit of each job only
  // looks at the profile from now on), so only the new jobs are planned.
  // Returns false, with `plan` untouched, when it does not apply.
  bool conservative_reuse(const Snapshot& s, const PlannerConfig& c, const PassState& st, Plan& plan, std::size_t& pos) {
    if (now < cc_now) return false;
    for (const Change& r : f_removed)
      if (r.holds && r.on_up != 0 && r.end > now) return false;
    std::size_t starts = 0;
    for (const CEntry& e : cc) starts += e.kind == kStart;
    if (f_added.size() != starts) return false;
    for (const Change& a : f_added) {
      bool found = false;
      for (const CEntry& e : cc)
        if (e.kind == kStart && e.id == a.id) {
          found = a.holds && a.on_up == e.s && std::max(a.end, now) == std::max(sat_add(cc_now, e.d), now);
          break;
        }
      if (!found) return false;
    }
    const std::size_t first = plan.decisions.size(), first_res = plan.reserves.size();
    auto fail = [&]() {
      plan.decisions.resize(first);
      plan.reserves.resize(first_res);
      cc_next.clear();
      return false;
    };
    const auto& pend = s.pending;
    std::size_t k = 0, p = 0;
    for (; p < st.order.size(); ++p) {
      const std::uint32_t idx = st.order[p];
      if (idx >= pend.size()) continue;
      const Job& j = pend[idx];
      while (k < cc.size() && cc[k].id != j.id) {
        if (cc[k].kind == kReserve) return fail();  // left the queue or moved
        ++k;
      }
      if (k == cc.size()) break;  // a new job: planned from here on
      const CEntry& e = cc[k++];
      if (e.kind == kStart || j.slots_min != e.smin || j.slots_max != e.smax) return fail();
      const bool plain = cores_only_job(j);
      if (e.kind == kReject) {
        if (!plain) {
          std::string err = f_check(j);
          if (err.empty()) return fail();
          reject(plan, j, "job " + std::to_string(j.id) + ": " + err);
        } else if (j.slots_min > fl_total) {
          reject(plan, j, never_text(j));
        } else {
          return fail();
        }
        cc_next.push_back(e);
        continue;
      }
      if (!plain || planned_duration(j, c) != e.d) return fail();
      if (e.kind == kReserve) {
        if (e.t <= now) return fail();
        f_reserve(plan, j, e.t, e.s);
      }
      cc_next.push_back(e);
    }
    for (; k < cc.size(); ++k)
      if (cc[k].kind == kReserve) return fail();
    pos = p;
    return true;
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

  void monitor(Plan& plan, std::size_t first_decision) {
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

void Planner::plan(const Snapshot& snap, const PlannerConfig& cfg, const PassState& st, Plan& plan) {
  Impl& m = *impl_;
  plan.now = snap.now;
  const std::size_t first = plan.decisions.size();
  if (st.order.empty() && !cfg.monitor) return;  // nothing to plan
  if (m.fast_plan(snap, cfg, st, plan)) return;
  // The general path on a snapshot with node ranges: a copy, node by node
  // (the fast path's ranges meet it only when a pass falls back to it).
  Snapshot expanded;
  const Snapshot* sp = &snap;
  if (has_ranges(snap)) {
    expanded = snap;
    expanded.running_version = expanded.running_since = 0;
    expand_ranges(expanded.running);
    sp = &expanded;
  }
  m.st_freed = st.freed;
  m.st_cur = &st;
  m.out = &plan;
  m.setup(*sp, cfg, plan);
  m.run(st, plan);
  if (cfg.monitor) m.monitor(plan, first);
}

PassState& Planner::pass_state() { return impl_->pass_scratch; }

void Planner::set_incremental(bool on) {
  impl_->fast_enabled = on;
  impl_->cc_valid = false;
  impl_->fl_built = false;
}

void plan_pass(const Snapshot& snap, const PlannerConfig& cfg, const PassState& st, Plan& plan) {
  Planner p;
  p.plan(snap, cfg, st, plan);
}

}  // namespace corral
