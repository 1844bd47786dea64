// The planner's incremental path (a kept Planner: node state carried across
// passes, conservative reservations reused after arrivals and on-time ends)
// must give exactly the Plan of a from-scratch pass. A small random cluster
// is driven like the simulator drives it (starts appended to running, ends
// swap-removed, early, on-time and overdue ends, arrivals, some invalid jobs,
// now and then a reordered running list or a node going down) and every pass
// is planned three ways: kept incremental Planner, kept Planner with the
// incremental path off, and a fresh Planner. The three Plans must be equal.
#include <algorithm>
#include <catch2/catch.hpp>
#include <random>
#include <string>

#include "coordinator/planner/order.hpp"
#include "coordinator/planner/planner.hpp"
#include "coordinator/schedule.hpp"
#include "coordinator/sim/sim.hpp"
#include "tests/effort.hpp"
#include "tests/skip.hpp"
#include "tests/traces.hpp"


using namespace corral;

namespace {

std::string describe(const Decision& d) {
  std::string s = std::to_string(static_cast<int>(d.action)) + " job " + std::to_string(d.job) + " at " +
                  std::to_string(d.at) + " slots " + std::to_string(d.slots) + " bf " + std::to_string(d.backfilled) +
                  " q '" + d.queue + "' why '" + d.reason + "' on";
  for (const Placement& p : d.placement) {
    s += " " + std::to_string(p.node) + ":" + std::to_string(p.slots) + "[";
    for (int c : p.cores) s += std::to_string(c) + ",";
    s += "]";
  }
  return s;
}

std::string describe(const Plan& p) {
  std::string s;
  for (const Decision& d : p.decisions) s += describe(d) + "\n";
  return s;
}

struct World {
  std::mt19937_64 rng;
  Snapshot snap;
  PassHints hints;               // kept like the simulator's, as the flags below say
  std::vector<Time> actual_end;  // per running job (parallel to snap.running)
  JobId next_id = 1;
  int max_slots = 1;
  std::uint64_t version = 1;     // PassHints::nodes_version values are never reused
  bool track_running = false;    // keep RunningHints::version like the simulator
  bool run_changed = false;      // running touched since the last version
  bool track_log = false;        // also RunningHints::since / touched
  bool defer_some = false;       // the caller skips some starts or starts them a second later

  void touched(std::size_t k) {
    if (track_log) hints.running.touched.push_back(static_cast<std::uint32_t>(k));
  }

  long U(long a, long b) { return a + static_cast<long>(rng() % static_cast<std::uint64_t>(b - a + 1)); }

  explicit World(std::uint64_t seed, long max_nodes = 12) : rng(seed) {
    const int nodes = static_cast<int>(U(3, max_nodes));
    const bool multi = U(0, 1) == 1;
    for (int i = 0; i < nodes; ++i) {
      Node n;
      n.name = "n" + std::to_string(i);
      n.cores = multi ? static_cast<int>(U(1, 8)) : 1;
      max_slots += n.cores;
      snap.nodes.push_back(n);
    }
    hints.nodes_version = 1;
    snap.now = 1000;
  }

  void arrive() {
    Job j;
    j.id = next_id++;
    j.submit = snap.now;
    const long k = U(0, 99);
    j.slots_min = static_cast<int>(k < 60 ? U(1, 3) : k < 90 ? U(1, std::max(1, max_slots / 2)) : U(1, max_slots));
    j.slots_max = U(0, 9) == 0 ? j.slots_min + static_cast<int>(U(0, 4)) : j.slots_min;
    j.walltime = U(1, 400);
    if (U(0, 3) == 0) j.estimate = U(1, j.walltime);
    const long odd = U(0, 199);
    if (odd == 0) j.slots_min = max_slots + 3;              // can never run
    else if (odd == 1) j.queue = "nowhere";                 // unknown queue
    else if (odd == 2) j.consumables["licence"] = 1;       // defined nowhere
    else if (odd == 3) j.consumables["zero"] = 0;          // ignored
    else if (odd == 4) j.slots_max = j.slots_min - 1;       // bad range
    else if (odd == 5) j.walltime = 0;                      // default duration
    snap.pending.push_back(std::move(j));
  }

  void remove_running(std::size_t k) {
    run_changed = true;
    touched(k);
    if (k + 1 != snap.running.size()) {
      snap.running[k] = std::move(snap.running.back());
      actual_end[k] = actual_end.back();
    }
    snap.running.pop_back();
    actual_end.pop_back();
  }

  // Applies the plan like the simulator: starts move to running (end early,
  // on time or late), rejects leave the queue.
  void apply(const Plan& p, const PlannerConfig& cfg) {
    std::vector<JobId> gone;
    for (const Decision& d : p.decisions) {
      if (d.action == Action::Reject) gone.push_back(d.job);
      if (d.action != Action::Start) continue;
      Time start = snap.now;
      if (defer_some) {
        const long k = U(0, 9);
        if (k == 0) continue;     // deferred: stays pending
        if (k == 1) start += 1;   // started, but not when the plan said
      }
      auto it = std::find_if(snap.pending.begin(), snap.pending.end(), [&](const Job& j) { return j.id == d.job; });
      REQUIRE(it != snap.pending.end());
      RunningJob r;
      r.job = *it;
      r.start = start;
      r.slots = d.slots;
      r.placement = d.placement;
      const Time dur = planned_duration(r.job, cfg);
      r.expected_end = dur >= kForever ? kForever : snap.now + dur - (U(0, 9) == 0 ? U(0, 2) : 0);
      const long k = U(0, 9);
      const Time est = std::min<Time>(dur, 100000);
      actual_end.push_back(k < 5 ? snap.now + U(1, est) : k < 8 ? snap.now + est : snap.now + est + U(1, 50));
      snap.running.push_back(std::move(r));
      touched(snap.running.size() - 1);
      run_changed = true;
      gone.push_back(d.job);
    }
    std::erase_if(snap.pending, [&](const Job& j) { return std::find(gone.begin(), gone.end(), j.id) != gone.end(); });
  }

  // Advances to the next event (an end or an arrival) and applies it.
  void step() {
    Time next = snap.now + U(1, 60);
    for (Time e : actual_end) next = std::min(next, std::max(e, snap.now + 1));
    snap.now = next;
    for (std::size_t k = snap.running.size(); k-- > 0;)
      if (actual_end[k] <= snap.now) remove_running(k);
    if (U(0, 2) == 0) {
      const long n = U(1, 3);
      for (long i = 0; i < n; ++i) arrive();
    }
    const long r = U(0, 99);
    if (r == 0 && snap.running.size() > 1) {  // an unrelated order of the same jobs
      std::vector<std::size_t> perm(snap.running.size());
      for (std::size_t i = 0; i < perm.size(); ++i) perm[i] = i;
      std::shuffle(perm.begin(), perm.end(), rng);
      std::vector<RunningJob> rr;
      std::vector<Time> ae;
      for (std::size_t i : perm) {
        rr.push_back(snap.running[i]);
        ae.push_back(actual_end[i]);
      }
      snap.running = std::move(rr);
      for (std::size_t i = 0; i < snap.running.size(); ++i) touched(i);
      run_changed = true;
      actual_end = std::move(ae);
    } else if (r == 1) {  // a node goes down or comes back
      Node& n = snap.nodes[static_cast<std::size_t>(U(0, static_cast<long>(snap.nodes.size()) - 1))];
      n.up = !n.up;
      hints.nodes_version = ++version;
    } else if (r == 2) {  // a caller that does not track node changes (for a while)
      hints.nodes_version = 0;
    } else if (r == 3 && hints.nodes_version == 0) {
      hints.nodes_version = ++version;
    } else if (r == 4 && !snap.running.empty()) {  // an estimate extended in place
      snap.running[0].expected_end += U(1, 100);
      touched(0);
      run_changed = true;
    } else if (r == 5 && track_running) {  // RunningHints::version forgotten for a pass
      hints.running.version = 0;
      return;
    }
    // RunningHints::version: a new value whenever running changed (or was 0).
    if (track_running && (run_changed || hints.running.version == 0)) hints.running.version = ++version;
    run_changed = false;
  }
};

void drive(Backfill b, Time offset, std::uint64_t seed, int passes, bool track_running = false, bool track_log = false,
           bool defer_some = false) {
  World w(seed);
  w.defer_some = defer_some;
  w.track_running = track_running;
  w.track_log = track_log;
  PlannerConfig cfg;
  cfg.backfill = b;
  cfg.duration_offset = offset;
  cfg.default_duration = 500;
  Planner kept, full;
  full.set_incremental(false);
  for (int i = 0; i < 8; ++i) w.arrive();
  for (int pass = 0; pass < passes; ++pass) {
    PassState st;
    order_pending(w.snap, OrderConfig{}, st);
    Plan a, f, c;
    kept.plan(w.snap, cfg, st, a, w.hints);
    full.plan(w.snap, cfg, st, f, w.hints);
    Planner fresh;
    fresh.plan(w.snap, cfg, st, c);  // no hints
    INFO("policy " << name(b) << " seed " << seed << " pass " << pass << " now " << w.snap.now);
    REQUIRE(describe(a) == describe(f));
    REQUIRE(describe(c) == describe(f));
    if (track_log) {  // later changes are relative to what this pass saw
      w.hints.running.since = w.hints.running.version;
      w.hints.running.touched.clear();
    }
    w.apply(a, cfg);
    w.step();
  }
}

// The (node, slots) pairs a placement grants, node by node, sorted (a range
// of Placement::count nodes stands for that many entries).
std::vector<std::pair<std::uint32_t, std::uint32_t>> nodes_of(const std::vector<Placement>& pl) {
  std::vector<std::pair<std::uint32_t, std::uint32_t>> v;
  for (const Placement& p : pl)
    for (std::uint32_t k = 0; k < p.count; ++k) v.emplace_back(p.node + k, p.slots);
  std::sort(v.begin(), v.end());
  return v;
}

std::string describe_nodes(const Plan& p) {
  std::string s;
  for (const Decision& d : p.decisions) {
    Decision e = d;
    e.placement.clear();
    for (const auto& [n, sl] : nodes_of(d.placement)) e.placement.push_back({n, sl, {}});
    s += describe(e) + "\n";
  }
  return s;
}

// The node-range drivers' plain configuration: placement node by node, no
// core picking, 500 s for jobs without a walltime.
PlannerConfig whole_nodes_config(Backfill b) {
  PlannerConfig cfg;
  cfg.backfill = b;
  cfg.default_duration = 500;
  cfg.pick_cores = false;
  return cfg;
}

// PlannerConfig::node_ranges: the world runs the plans of a kept Planner that
// places by node ranges (its running entries hold ranges); each pass must
// grant the same nodes and slots as a kept Planner placing node by node, the
// general path (which expands the ranges it finds in running) and a fresh
// Planner. Returns the number of range entries (count > 1) seen.
std::size_t drive_ranges(Backfill b, std::uint64_t seed, int passes, long max_nodes) {
  World w(seed, max_nodes);
  w.track_running = w.track_log = seed % 2 == 0;
  w.defer_some = seed % 3 == 0;
  const PlannerConfig per_node = whole_nodes_config(b);
  PlannerConfig cfg = per_node;
  cfg.node_ranges = true;
  Planner kept, by_node, full;
  full.set_incremental(false);
  std::size_t ranges = 0;
  for (int i = 0; i < 8; ++i) w.arrive();
  for (int pass = 0; pass < passes; ++pass) {
    PassState st;
    order_pending(w.snap, OrderConfig{}, st);
    Plan a, n, f, c;
    kept.plan(w.snap, cfg, st, a, w.hints);
    by_node.plan(w.snap, per_node, st, n, w.hints);
    full.plan(w.snap, cfg, st, f, w.hints);
    Planner fresh;
    fresh.plan(w.snap, cfg, st, c);
    INFO("policy " << name(b) << " seed " << seed << " pass " << pass << " now " << w.snap.now);
    for (const Decision& d : n.decisions)
      for (const Placement& p : d.placement) REQUIRE(p.count == 1);
    for (const Decision& d : a.decisions)
      for (const Placement& p : d.placement) ranges += p.count > 1;
    REQUIRE(describe_nodes(a) == describe_nodes(n));
    REQUIRE(describe_nodes(f) == describe_nodes(n));
    REQUIRE(describe_nodes(c) == describe_nodes(n));
    if (w.track_log) {
      w.hints.running.since = w.hints.running.version;
      w.hints.running.touched.clear();
    }
    w.apply(a, cfg);
    w.step();
  }
  return ranges;
}

// A start's placement on single-core nodes as NodeSets::place_into gives it
// with node ranges (the plain path): its nodes from the highest down, one
// entry per maximal run of consecutive nodes (a run may cross a 64-node
// word), 1 slot each. The fast start (f_take1) must give exactly this.
std::string single_core_ranges(const std::vector<Placement>& pl) {
  std::vector<std::uint32_t> nodes;
  for (const Placement& p : pl)
    for (std::uint32_t k = 0; k < p.count; ++k) nodes.push_back(p.node + k);
  std::sort(nodes.rbegin(), nodes.rend());
  std::string s;
  for (std::size_t i = 0; i < nodes.size();) {
    std::size_t j = i + 1;
    while (j < nodes.size() && nodes[j] + 1 == nodes[j - 1]) ++j;
    s += " " + std::to_string(nodes[j - 1]) + "x" + std::to_string(j - i) + ":1";
    i = j;
  }
  return s;
}
std::string ranges_of(const std::vector<Placement>& pl) {
  std::string s;
  for (const Placement& p : pl)
    s += " " + std::to_string(p.node) + "x" + std::to_string(p.count) + ":" + std::to_string(p.slots) +
         (p.cores.empty() ? "" : "+cores");
  return s;
}
std::size_t word_crossing_starts = 0;  // starts with one entry across a 64-node word

// Single-core nodes, node ranges: the kept Planner changes its free-node set
// a 64-node word at a time while no node holds a count other than 0 or 1.
// Odd counts come from running entries the caller places over busy nodes
// (count 2) or lists twice; every pass must grant the same nodes as a fresh
// Planner given the same running jobs node by node (count-1 entries, the
// plain per-node path). Returns the passes that saw an odd count.
std::size_t drive_odd_single(Backfill b, std::uint64_t seed, int passes) {
  World w(seed, 200);
  w.max_slots = 1;
  for (Node& n : w.snap.nodes) {
    n.cores = 1;
    ++w.max_slots;
  }
  const PlannerConfig per_node = whole_nodes_config(b);
  PlannerConfig cfg = per_node;
  cfg.node_ranges = true;
  Planner kept;
  std::size_t odd_passes = 0;
  JobId odd_id = 1000000;
  for (int i = 0; i < 8; ++i) w.arrive();
  for (int pass = 0; pass < passes; ++pass) {
    if (w.U(0, 5) == 0) {  // a caller's start over possibly busy nodes
      RunningJob r;
      r.job.id = odd_id++;
      r.job.walltime = 300;
      const long nn = static_cast<long>(w.snap.nodes.size());
      const long k = w.U(1, std::min<long>(nn, 130));
      const auto n0 = static_cast<std::uint32_t>(w.U(0, nn - k));
      r.placement.push_back({n0, 1, {}, static_cast<std::uint32_t>(k)});
      if (w.U(0, 3) == 0) r.placement.push_back({n0, 1, {}});  // its first node twice
      r.slots = static_cast<int>(k) + (r.placement.size() > 1 ? 1 : 0);
      r.start = w.snap.now;
      r.expected_end = w.snap.now + w.U(1, 300);
      w.actual_end.push_back(r.expected_end - (w.U(0, 1) ? w.U(0, 20) : 0));
      w.snap.running.push_back(std::move(r));
    }
    std::vector<int> count(w.snap.nodes.size(), 0);
    Snapshot plain = w.snap;
    for (RunningJob& r : plain.running) {
      std::vector<Placement> one;
      for (const Placement& p : r.placement)
        for (std::uint32_t q = 0; q < p.count; ++q) {
          one.push_back({p.node + q, p.slots, {}});
          count[p.node + q] += static_cast<int>(p.slots);
        }
      r.placement = std::move(one);
    }
    odd_passes += std::any_of(count.begin(), count.end(), [](int c) { return c > 1; });
    PassState st;
    order_pending(w.snap, OrderConfig{}, st);
    Plan a, c;
    kept.plan(w.snap, cfg, st, a, w.hints);
    Planner fresh;
    fresh.plan(plain, per_node, st, c);
    INFO("policy " << name(b) << " seed " << seed << " pass " << pass << " now " << w.snap.now);
    REQUIRE(describe_nodes(a) == describe_nodes(c));
    for (const Decision& d : a.decisions) {
      if (d.action != Action::Start) continue;
      INFO("job " << d.job);
      REQUIRE(ranges_of(d.placement) == single_core_ranges(d.placement));
      for (const Placement& p : d.placement) word_crossing_starts += p.count > 1 && p.node / 64 != (p.node + p.count - 1) / 64;
    }
    w.apply(a, cfg);
    w.step();
  }
  return odd_passes;
}

// PendingHints::slots_min (with cores_only): the fast easy scan
// passes over jobs that need more than the free cores in the array. A kept
// Planner given the array must plan exactly as kept and fresh Planners
// given the same snapshot without it (which read every job). The world's
// jobs are all cores-only (some need more than the machine: rejected);
// pending is shuffled now and then (the array follows pending's positions,
// not the order) and the queue order policy varies; min_duration
// lets it also pass over jobs that fit now but end after the shadow time. Returns the passes that
// had a job past the reservation that needs more than the free cores.
std::size_t long_fit_passes = 0;  // passes with a job left that fits now
std::size_t order_array_passes = 0;  // passes given the order arrays, order == PendingHints::order
std::size_t drive_slots_min(Backfill b, Order order, std::uint64_t seed, int passes) {
  World w(seed, seed % 2 == 0 ? 40 : 12);
  w.track_running = w.track_log = seed % 2 == 0;
  PlannerConfig cfg;
  cfg.backfill = b;
  cfg.default_duration = 500;
  cfg.duration_offset = seed % 2 == 0 ? 0 : 60;  // 0: the floor is the duration
  cfg.pick_cores = seed % 3 != 0;
  cfg.node_ranges = !cfg.pick_cores;
  OrderConfig oc;
  oc.policy = order;
  oc.aging = seed % 4 == 0 ? 300 : 0;
  Planner kept, plain;
  std::size_t skippable = 0;
  std::size_t& long_fits = long_fit_passes;
  auto arrive_plain = [&] {
    w.arrive();
    Job& j = w.snap.pending.back();
    if (!cores_only_job(j)) {  // only cores-only jobs (the promise holds)
      j.queue.clear();
      j.consumables.clear();
      j.slots_max = std::max(j.slots_max, j.slots_min);
    }
  };
  for (int i = 0; i < 12; ++i) arrive_plain();
  for (int pass = 0; pass < passes; ++pass) {
    Snapshot& s = w.snap;
    PendingHints& h = w.hints.pending;
    for (const Job& j : s.pending) REQUIRE(cores_only_job(j));
    h.cores_only = true;
    h.slots_min.clear();
    h.min_duration.clear();
    for (const Job& j : s.pending) {
      h.slots_min.push_back(j.slots_min);
      // A lower bound of the planned duration: the floor, or less (seed % 5
      // == 0: none given).
      if (seed % 5 != 0) h.min_duration.push_back(seed % 5 == 1 ? duration_floor(j) / 2 : duration_floor(j));
    }
    // PendingHints::order with order_slots_min / order_min_duration
    // (seed % 3 != 2): the same figures in FIFO order, read contiguously
    // when the pass's order is exactly that order (fifo, no aging moves).
    h.order.clear();
    h.order_slots_min.clear();
    h.order_min_duration.clear();
    if (seed % 3 != 2) {
      for (std::uint32_t k = 0; k < s.pending.size(); ++k) h.order.push_back(k);
      std::stable_sort(h.order.begin(), h.order.end(),
                       [&](std::uint32_t x, std::uint32_t y) { return fifo_less(s.pending[x], s.pending[y]); });
      for (std::uint32_t k : h.order) {
        const Job& j = s.pending[k];
        h.order_slots_min.push_back(j.slots_min);
        const Time d = seed % 5 == 0 ? 0 : seed % 5 == 1 ? duration_floor(j) / 2 : duration_floor(j);
        h.order_min_duration.push_back(static_cast<std::int32_t>(std::min<Time>(d, INT32_MAX)));
      }
    }
    PassState st;
    order_pending(s, oc, st, w.hints);
    if (!h.order.empty() && st.order == h.order) ++order_array_passes;
    PassHints without = w.hints;
    without.pending.slots_min.clear();
    without.pending.min_duration.clear();
    without.pending.order_slots_min.clear();
    without.pending.order_min_duration.clear();
    Plan a, p, c;
    kept.plan(s, cfg, st, a, w.hints);
    plain.plan(s, cfg, st, p, without);
    Planner fresh;
    fresh.plan(s, cfg, st, c);  // no hints
    INFO("policy " << name(b) << " order " << name(order) << " seed " << seed << " pass " << pass << " now " << s.now);
    REQUIRE(describe(a) == describe(p));
    REQUIRE(describe(a) == describe(c));
    // Did this pass have something to pass over? (free cores after the
    // plan's starts, a reservation made, a later job needing more.)
    std::int64_t free = 0;
    for (const Node& nd : s.nodes)
      if (nd.up) free += nd.cores;
    for (const RunningJob& r : s.running) free -= r.slots;
    bool res = false;
    for (const Decision& d : a.decisions) {
      if (d.action == Action::Start) free -= d.slots;
      res |= d.action == Action::Reserve;
    }
    if (res && free > 0)
      for (const Job& j : s.pending) skippable += j.slots_min > free && j.slots_min < w.max_slots;
    if (res && free > 0) {  // a later job that fits now but does not start
      std::size_t fits = 0;
      for (const Job& j : s.pending) fits += j.slots_min <= free;
      long_fits += fits > 0;
    }
    if (w.track_log) {
      w.hints.running.since = w.hints.running.version;
      w.hints.running.touched.clear();
    }
    w.apply(a, cfg);
    w.step();
    for (std::size_t k = s.pending.size(); k-- > 0;)  // hooks: arrivals of step() made cores-only
      if (!cores_only_job(s.pending[k])) {
        Job& j = s.pending[k];
        j.queue.clear();
        j.consumables.clear();
        j.slots_max = std::max(j.slots_max, j.slots_min);
      }
    if (seed % 3 == 2)  // whole 100 s: jobs started together end together, ties with the shadow time
      for (Job& j : s.pending) {
        j.walltime = (j.walltime + 99) / 100 * 100;
        j.estimate = 0;
      }
    if (w.U(0, 4) == 0) std::shuffle(s.pending.begin(), s.pending.end(), w.rng);  // as the simulator's holes
    if (w.U(0, 2) == 0) arrive_plain();
  }
  return skippable;
}

// PlannerConfig::compact_starts (and on most seeds compact_reserves): a
// Planner whose starts come as Plan::starts (reservations as Plan::reserves),
// run through schedule() with one Plan kept across passes (as the
// simulator), must make exactly the starts (in order, same slots and
// placements), reservations and other decisions of a kept Planner giving
// decisions; the world runs the compact plan. Returns the starts seen.
std::size_t compact_reserves_seen = 0;
std::size_t drive_compact(Backfill b, std::uint64_t seed, int passes) {
  std::size_t& reserves = compact_reserves_seen;
  World w(seed, seed % 2 == 0 ? 100 : 12);
  w.track_running = w.track_log = seed % 2 == 0;
  w.defer_some = seed % 3 == 0;
  SchedConfig sc;
  sc.planner.backfill = b;
  sc.planner.default_duration = 500;
  sc.planner.pick_cores = false;
  sc.planner.node_ranges = seed % 4 != 1;
  PlannerConfig plain_cfg = sc.planner;
  sc.planner.compact_starts = true;
  sc.planner.compact_reserves = seed % 3 != 2;
  Planner compact, plain;
  Plan kept;  // reused by schedule() every pass
  std::size_t starts = 0;
  for (int i = 0; i < 8; ++i) w.arrive();
  for (int pass = 0; pass < passes; ++pass) {
    schedule(w.snap, w.hints, sc, 1, compact, kept);
    PassState st;
    order_pending(w.snap, OrderConfig{}, st);
    Plan p;
    plain.plan(w.snap, plain_cfg, st, p, w.hints);
    INFO("policy " << name(b) << " seed " << seed << " pass " << pass << " now " << w.snap.now);
    // The compact plan as Start decisions, in order, after the others.
    // (A pass of the general path gives Start decisions and no records.)
    Plan e;
    std::string others, plain_others, plain_starts, compact_starts, plain_res, compact_res;
    for (const Decision& d : kept.decisions)
      (d.action == Action::Start ? compact_starts : d.action == Action::Reserve ? compact_res : others) += describe(d) + "\n";
    REQUIRE((compact_starts.empty() || kept.starts.empty()));
    REQUIRE((compact_res.empty() || kept.reserves.empty()));
    if (!sc.planner.compact_reserves) REQUIRE(kept.reserves.empty());
    for (const ReserveRecord& r : kept.reserves) {  // as the Reserve decision it stands for
      Decision d;
      d.action = Action::Reserve;
      d.job = r.job;
      d.at = r.at;
      d.slots = r.slots;
      compact_res += describe(d) + "\n";
    }
    for (const Decision& d : p.decisions)
      (d.action == Action::Start ? plain_starts : d.action == Action::Reserve ? plain_res : plain_others) += describe(d) + "\n";
    REQUIRE(compact_res == plain_res);
    reserves += kept.reserves.size();
    e.decisions = kept.decisions;
    for (const StartRecord& r : kept.starts) {
      REQUIRE(std::size_t{r.first} + r.count <= kept.start_placements.size());
      Decision d;
      d.action = Action::Start;
      d.job = r.job;
      d.at = w.snap.now;
      d.slots = r.slots;
      d.placement.assign(kept.start_placements.begin() + r.first, kept.start_placements.begin() + r.first + r.count);
      compact_starts += describe(d) + "\n";
      e.decisions.push_back(std::move(d));
    }
    starts += kept.starts.size();
    REQUIRE(others == plain_others);
    REQUIRE(compact_starts == plain_starts);
    if (w.track_log) {
      w.hints.running.since = w.hints.running.version;
      w.hints.running.touched.clear();
    }
    w.apply(e, sc.planner);
    w.step();
  }
  return starts;
}

}  // namespace

TEST_CASE("incremental planner: PlannerConfig::compact_starts and compact_reserves make the Start and Reserve decisions", "[planner][incremental]") {
  // Single- and multi-core nodes (World picks), with and without node
  // ranges; some passes fall back to the general path (odd jobs), whose
  // starts stay decisions.
  std::size_t starts = 0;
  for (Backfill b : {Backfill::Fcfs, Backfill::Easy, Backfill::Conservative})
    for (std::uint64_t seed = 1; seed <= 12; ++seed) starts += drive_compact(b, seed * 5381 + static_cast<int>(b), 400);
  CHECK(starts > 5000);
  CHECK(compact_reserves_seen > 5000);
}

TEST_CASE("incremental planner: PendingHints::slots_min and order_slots_min pass over jobs as the full scan", "[planner][incremental]") {
  std::size_t skippable = 0;
  for (Backfill b : {Backfill::Fcfs, Backfill::Easy, Backfill::Conservative})
    for (Order order : {Order::Fifo, Order::Lxf, Order::Sjbf})
      for (std::uint64_t seed = 1; seed <= 8; ++seed)
        skippable += drive_slots_min(b, order, seed * 3571 + static_cast<int>(b), 400);
  CHECK(skippable > 1000);  // the skip had work to do
  CHECK(long_fit_passes > 500);
  CHECK(order_array_passes > 3000);
}

// PassState::order_is_pending_order: order_pending says the order is
// exactly PendingHints::order only when it is (fifo, or every job aged or
// none; wide jobs aging sooner move ahead of older narrow ones), and a
// Planner trusting it plans as one given the same order without it (the
// memcmp path). pending is shuffled and PendingHints::order gives its FIFO order.
TEST_CASE("incremental planner: PassState::order_is_pending_order only when the order is the hints' order", "[planner][incremental]") {
  std::mt19937_64 rng(4242);
  auto U = [&](long a, long b) { return a + static_cast<long>(rng() % static_cast<std::uint64_t>(b - a + 1)); };
  std::size_t trusted = 0, moved = 0;
  for (int round = 0; round < 3000; ++round) {
    Snapshot s;
    const int nodes = static_cast<int>(U(2, 20));
    for (int i = 0; i < nodes; ++i) {
      Node n;
      n.name = "n" + std::to_string(i);
      n.cores = 1;
      s.nodes.push_back(n);
    }
    s.now = 10000;
    const int np = static_cast<int>(U(1, 30));
    for (int i = 0; i < np; ++i) {
      Job j;
      j.id = static_cast<JobId>(i + 1);
      j.submit = s.now - U(0, 5000);
      j.slots_min = j.slots_max = static_cast<int>(U(1, nodes));
      j.walltime = U(1, 3000);
      s.pending.push_back(j);
    }
    std::shuffle(s.pending.begin(), s.pending.end(), rng);
    PassHints hints;
    PendingHints& h = hints.pending;
    for (std::uint32_t i = 0; i < s.pending.size(); ++i) h.order.push_back(i);
    std::sort(h.order.begin(), h.order.end(),
              [&](std::uint32_t a, std::uint32_t b) { return fifo_less(s.pending[a], s.pending[b]); });
    h.cores_only = true;
    for (std::uint32_t i : h.order) {
      h.order_slots_min.push_back(s.pending[i].slots_min);
      h.order_min_duration.push_back(static_cast<std::int32_t>(duration_floor(s.pending[i])));
    }
    for (int k = static_cast<int>(U(0, 3)); k > 0; --k) {  // a few running jobs
      RunningJob r;
      r.job.id = static_cast<JobId>(1000 + k);
      r.start = s.now - 10;
      r.expected_end = s.now + U(1, 2000);
      r.slots = 1;
      r.placement.push_back({static_cast<std::uint32_t>(k - 1), 1, {}});
      s.running.push_back(r);
    }
    OrderConfig oc;
    const long pol = U(0, 3);
    oc.policy = pol <= 1 ? Order::Fifo : pol == 2 ? Order::Lxf : Order::Sjbf;
    if (U(0, 2) != 0) oc.aging = U(1, 5000);
    if (U(0, 1) == 0) oc.aging_wide = U(1, 3000);
    PassState st;
    order_pending(s, oc, st, hints);
    INFO("round " << round << " policy " << name(oc.policy) << " aging " << oc.aging << "/" << oc.aging_wide);
    if (st.order_is_pending_order) REQUIRE(st.order == h.order);
    trusted += st.order_is_pending_order;
    moved += oc.policy == Order::Fifo && st.order != h.order;
    PassState plain = st;
    plain.order_is_pending_order = false;
    PlannerConfig cfg;
    cfg.backfill = U(0, 1) == 0 ? Backfill::Easy : Backfill::Conservative;
    cfg.pick_cores = false;
    Planner a, b;
    Plan pa, pb;
    a.plan(s, cfg, st, pa, hints);
    b.plan(s, cfg, plain, pb, hints);
    REQUIRE(describe(pa) == describe(pb));
  }
  CHECK(trusted > 500);
  CHECK(moved > 100);  // wide jobs aged ahead of older ones: not trusted
}

TEST_CASE("incremental planner: node ranges grant the same nodes as placements node by node", "[planner][incremental]") {
  // Up to 200 nodes (ranges across 64-node words of the free-node sets),
  // single- and multi-core (World picks); the kept ranges Planner's node
  // state is updated a range at a time, so a wrong update shows in later passes.
  std::size_t ranges = 0;
  for (Backfill b : {Backfill::Fcfs, Backfill::Easy, Backfill::Conservative})
    for (std::uint64_t seed = 1; seed <= 12; ++seed) ranges += drive_ranges(b, seed * 6151 + static_cast<int>(b), 400, 200);
  CHECK(ranges > 1000);
}

TEST_CASE("incremental planner: single-core free nodes a word at a time, odd counts included", "[planner][incremental]") {
  std::size_t odd = 0;
  for (Backfill b : {Backfill::Fcfs, Backfill::Easy, Backfill::Conservative})
    for (std::uint64_t seed = 1; seed <= 8; ++seed) odd += drive_odd_single(b, seed * 7001 + static_cast<int>(b), 300);
  CHECK(odd > 500);  // the odd counts had work to do
  // Starts placed in one walk down the free bits (f_take1) give their nodes
  // as place_into's ranges, runs across a 64-node word included.
  CHECK(word_crossing_starts > 50);
}

TEST_CASE("incremental planner: same plans as a from-scratch pass over random workloads", "[planner][incremental]") {
  for (Backfill b : {Backfill::Fcfs, Backfill::Easy, Backfill::Conservative})
    for (std::uint64_t seed = 1; seed <= corral_test::scaled<std::uint64_t>(30, 3); ++seed) drive(b, seed % 3 == 0 ? 60 : 0, seed * 7919 + static_cast<int>(b), 600);
}

TEST_CASE("incremental planner: RunningHints::version skips the diff, same plans", "[planner][incremental]") {
  // The caller bumps RunningHints::version on every change of running (as the
  // simulator does) and sometimes sends 0; a kept Planner must plan exactly
  // as a from-scratch one.
  for (Backfill b : {Backfill::Fcfs, Backfill::Easy, Backfill::Conservative})
    for (std::uint64_t seed = 1; seed <= corral_test::scaled<std::uint64_t>(12, 3); ++seed) drive(b, seed % 3 == 0 ? 60 : 0, seed * 104729 + static_cast<int>(b), 600, true);
}

TEST_CASE("incremental planner: RunningHints::touched limits the diff, same plans", "[planner][incremental]") {
  // As the simulator: every change of running bumps RunningHints::version and
  // lists its position; the kept Planner compares only those entries.
  for (Backfill b : {Backfill::Fcfs, Backfill::Easy, Backfill::Conservative})
    for (std::uint64_t seed = 1; seed <= corral_test::scaled<std::uint64_t>(12, 3); ++seed) drive(b, seed % 3 == 0 ? 60 : 0, seed * 15485863 + static_cast<int>(b), 600, true, true);
}

TEST_CASE("incremental planner: starts the caller skips or runs at another time are released", "[planner][incremental]") {
  // A kept Planner keeps its starts applied until the next pass finds them
  // in `running`; the ones that are not there (or started at another time)
  // must give their cores back.
  for (Backfill b : {Backfill::Fcfs, Backfill::Easy, Backfill::Conservative})
    for (std::uint64_t seed = 1; seed <= 12; ++seed)
      drive(b, seed % 3 == 0 ? 60 : 0, seed * 7727 + static_cast<int>(b), 600, seed % 2 == 0, seed % 4 == 0, true);
}

TEST_CASE("incremental planner: a copy with running changed, its running not hinted, is re-read", "[planner][incremental]") {
  // A stage that hands the planner a modified copy (preempt, nci claims)
  // has schedule() say the hints about running do not describe it; the kept
  // Planner must see the change.
  Snapshot s;
  for (int i = 0; i < 4; ++i) {
    Node n;
    n.name = "n" + std::to_string(i);
    n.cores = 1;
    s.nodes.push_back(n);
  }
  PassHints hints;
  hints.nodes_version = 1;
  hints.running.version = 7;
  s.now = 100;
  for (int i = 0; i < 4; ++i) {
    RunningJob r;
    r.job.id = static_cast<JobId>(i + 1);
    r.job.slots_min = r.job.slots_max = 1;
    r.job.walltime = 1000;
    r.start = 0;
    r.slots = 1;
    r.expected_end = 1000;
    r.placement.push_back(Placement{static_cast<std::uint32_t>(i), 1, {0}});
    s.running.push_back(r);
  }
  Job j;
  j.id = 9;
  j.submit = 100;
  j.slots_min = j.slots_max = 2;
  j.walltime = 50;
  s.pending.push_back(j);
  PlannerConfig cfg;
  cfg.backfill = Backfill::Conservative;
  cfg.duration_offset = 0;
  Planner kept;
  PassState st;
  order_pending(s, OrderConfig{}, st);
  Plan p1;
  kept.plan(s, cfg, st, p1, hints);
  REQUIRE(p1.decisions.size() == 1);
  CHECK(p1.decisions[0].action == Action::Reserve);
  CHECK(p1.decisions[0].at == 1000);
  Snapshot copy = s;  // two jobs' ends moved earlier in a copy
  copy.running[0].expected_end = copy.running[1].expected_end = 300;
  Plan p2;
  kept.plan(copy, cfg, st, p2, hints, false);
  REQUIRE(p2.decisions.size() == 1);
  CHECK(p2.decisions[0].at == 300);
  Plan p3;  // the original again, same version as the first pass: re-read too
  kept.plan(s, cfg, st, p3, hints);
  REQUIRE(p3.decisions.size() == 1);
  CHECK(p3.decisions[0].at == 1000);
}

TEST_CASE("incremental planner: general-path features still planned from scratch", "[planner][incremental]") {
  // Memory tracking makes jobs node-bound: the kept Planner must leave the
  // pass to the general path and give the same plan as a fresh one.
  Snapshot s;
  s.now = 100;
  for (int i = 0; i < 4; ++i) {
    Node n;
    n.name = "n" + std::to_string(i);
    n.cores = 4;
    n.mem_mb = 1000;
    s.nodes.push_back(n);
  }
  for (JobId id = 1; id <= 6; ++id) {
    Job j;
    j.id = id;
    j.slots_min = j.slots_max = 3;
    j.mem_mb = 900;
    j.walltime = 50;
    s.pending.push_back(j);
  }
  PlannerConfig cfg;
  cfg.backfill = Backfill::Conservative;
  PassState st;
  order_pending(s, OrderConfig{}, st);
  Planner kept;
  Plan a, b;
  kept.plan(s, cfg, st, a);
  plan_pass(s, cfg, st, b);
  REQUIRE(describe(a) == describe(b));
  // Memory limits one 3-slot job per node: 4 start, 2 are reserved.
  int starts = 0, reserves = 0;
  for (const Decision& d : a.decisions) {
    starts += d.action == Action::Start;
    reserves += d.action == Action::Reserve;
  }
  CHECK(starts == 4);
  CHECK(reserves == 2);
}

TEST_CASE("incremental planner: a trace replay gives the same starts as from-scratch passes", "[planner][incremental]") {
  std::string why;
  const std::string path = corral_test::trace("lublin_256.swf", &why);
  if (path.empty()) {
    CORRAL_SKIP(why);
    return;
  }
  const sim::SwfTrace tr = sim::read_swf(path);
  for (Backfill b : {Backfill::Easy, Backfill::Conservative}) {
    sim::SimOptions inc;
    inc.sched.planner.backfill = b;
    inc.max_jobs = 3000;
    sim::SimOptions scratch = inc;
    Planner full;
    full.set_incremental(false);
    scratch.scheduler = [&full](const Snapshot& s, const SchedConfig& c, std::uint64_t seed) {
      return schedule(s, c, seed, full);
    };
    const sim::SimResult r1 = sim::simulate(tr, inc);
    const sim::SimResult r2 = sim::simulate(tr, scratch);
    INFO(name(b));
    REQUIRE(r1.per_job.size() == r2.per_job.size());
    std::size_t diff = 0;
    for (std::size_t i = 0; i < r1.per_job.size(); ++i) diff += r1.per_job[i].first_start != r2.per_job[i].first_start;
    CHECK(diff == 0);
    CHECK(r1.finished == r2.finished);
    CHECK(r1.mean_bsld == r2.mean_bsld);
  }
}
