// The planner's general path: one pass over the aggregate utilization
// diagrams (cores, queue slots, global and queue consumables) built from the
// running jobs, and, for node-bound jobs and MONITOR, a host-level plan.
// Walks st.order: start what fits now without touching any reservation
// already made, else (policy permitting) reserve the earliest start (SGE
// sections 2a/2b/4). Its parts: the pass (general_pass.cpp), the host-level
// plan and conservative's pins (host_plan.cpp), the checkpoint policy's
// window end (checkpoint_window.cpp) and the MONITOR lines (monitor_lines.cpp).
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "coordinator/model.hpp"
#include "coordinator/planner/node_sets.hpp"
#include "coordinator/planner/planner.hpp"
#include "coordinator/planner/profile.hpp"

namespace corral::planning {

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
  bool ghost;            // last pass's pin of a later job (conservative; see GeneralPass::pins)
};

struct Req {
  int queue = -1;
  bool node_bound = false;
  Time dur = 0;
  std::vector<Use> uses;
  std::int64_t mem_slot = 0, jobfs_slot = 0;   // per-slot share for host checks
  bool host_cons = false;
};

inline std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return b <= 0 ? 0 : (a + b - 1) / b; }

// A Reject decision for job j at `now`.
inline void add_reject(Plan& plan, JobId j, Time now, std::string why) {
  Decision d;
  d.action = Action::Reject;
  d.job = j;
  d.at = now;
  d.reason = std::move(why);
  plan.decisions.push_back(std::move(d));
}

// The reason given to a job no set of up nodes can ever hold.
inline std::string never_fits_text(const Job& j) {
  return "job " + std::to_string(j.id) + " can never run: no set of up nodes can hold " + std::to_string(j.slots_min) +
         " slots with its requests";
}

class GeneralPass {
 public:
  // Plans one pass: `st` and `plan` as in Planner::plan.
  void plan(const Snapshot& snap, const PlannerConfig& cfg, const PassState& st, Plan& plan);
  // Forgets the host pins of the last pass (a pass of the fast path pins nothing).
  void forget_pins() { pins.clear(); }

 private:
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
  void prefer_pin(const Job& j, const Req& r, Time t, Time d, int s, std::vector<Placement>& pl);

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

  void setup(const Snapshot& s, const PlannerConfig& c, const Plan& plan);

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
  std::int64_t filter_avail(const Job& j);

  int queue_of(const Job& j) const {
    if (j.queue.empty()) return snap->queues.empty() ? -1 : 0;
    auto it = queue_index.find(j.queue);
    return it == queue_index.end() ? -2 : it->second;
  }

  const std::string& queue_name(const Job& j) const;

  bool eligible(int q, std::uint32_t n);

  // Resolves a job's needs; returns an error text if it can never be valid.
  std::string resolve(const Job& j, Req& r);

  // ------------------------------------------------------- aggregate checks
  // Largest s in [smin, smax] the aggregate diagrams allow on [t, t+d); 0 if none.
  int agg_slots(const Req& r, Time t, Time d, int smin, int smax);

  // Earliest t >= t0 at which smin slots fit in every aggregate diagram.
  Time agg_earliest(const Req& r, Time d, int smin, Time t0);

  void agg_debit(const Req& r, int s, Time t0, Time t1, int sign) {
    for (const Use& u : r.uses)
      if (u.prof != 0 || prof0_ready) prof[static_cast<std::size_t>(u.prof)].add(t0, t1, -sign * u.per_slot * s);
  }

  // Builds the cores diagram from the running jobs plus this pass's starts.
  // Before it exists no reservation does either, so free cores never drop
  // below free_now after now and "fits now" is simply free_now >= slots.
  void ensure_prof0();

  // ------------------------------------------------------------ host level
  void ensure_nalloc();

  // Running job ri's host-level holds from now until `end` (ensure_nalloc;
  // a job the checkpoint trial puts back).
  void hold_running(std::size_t ri, Time end);

  void add_nalloc(const Job* j, Time t0, Time t1, int slots, const std::vector<Placement>& pl, bool ghost = false);

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
  int node_slots(std::uint32_t n, const Job& j, const Req& r, Time t, Time d);

  // Host-level availability at t; returns total slots (avail filled).
  std::int64_t node_scan(const Job& j, const Req& r, Time t, Time d);

  // Picks nodes for s slots from `avail`: one node if possible (best fit),
  // else the largest first; ties by node index.
  std::vector<Placement> pick_from_avail(int s);

  // Next time after t at which anything on the host level or aggregate changes.
  Time next_event(Time t) const;

  // ------------------------------------------------------- core placement
  std::vector<int> pick_cores(std::uint32_t n, int s) {
    return planning::pick_cores(snap->nodes[n], core_used.data() + core_off[n], s);
  }

  // Placement for a job starting now that needs cores only (NodeSets).
  std::vector<Placement> place_cores_now(int s) {
    ensure_buckets();
    return sets.place(s, snap->nodes.size());
  }

  void take_now(std::vector<Placement>& pl);

  // ------------------------------------------------------------ the pass
  struct PassAlloc {
    const Job* job;
    Time start, dur;
    int slots;
  };
  std::vector<std::pair<std::size_t, PassAlloc>> pass_allocs;  // decision index, alloc

  void commit(Plan& plan, const Job& j, const Req& r, Action act, Time t, Time d, int s, std::vector<Placement> pl, bool backfilled);

  // Slots and hosts for j starting now for duration d (slots capped at smax);
  // false if it cannot start now.
  bool probe_start(const Job& j, const Req& r, Time d, int smax, int& s, std::vector<Placement>& pl);

  // Tries to start j now for duration d (slots capped at smax). Returns true if started.
  bool try_start(Plan& plan, const Job& j, const Req& r, Time d, int smax, bool backfilled);

  // Earliest start (t), slots (s) and, for host-level jobs, hosts (pl) for j;
  // false if it can never be planned.
  bool find_reservation(const Job& j, const Req& r, Time d, Time& t, int& s, std::vector<Placement>& pl);

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
  bool reserve(Plan& plan, const Job& j, const Req& r, Time d, Time* at = nullptr);

  // Tries to start j now, preferring hosts no later job's pin needs; ignores
  // the pins if avoiding them would not start j now or give it fewer slots
  // (a later job's pin never delays j).
  bool start_pref(Plan& plan, const Job& j, const Req& r, Time d, int smax, bool backfilled);

  // Could j run at all in an empty cluster? (otherwise it is rejected)
  bool possible(const Job& j, const Req& r);

  void reject(Plan& plan, const Job& j, std::string why);

  // Checkpoint policy, window end: stop overdue backfilled jobs (largest first)
  // until `head` fits now. Returns true if the head was started.
  std::vector<std::size_t> checkpointed;  // running jobs checkpointed this pass (run() clears)
  bool checkpoint_for(Plan& plan, const Job& head, const Req& r, Time d);

  // Conservative: loads last pass's pins of jobs in this pass's order as
  // ghosts (a pin is skipped if its job's duration or slot range changed, or
  // it names a node that is gone or down).
  void load_ghosts(const PassState& st);

  void drop_ghost(JobId id);

  void run(const PassState& st, Plan& plan);

  // ------------------------------------------------------------- MONITOR
  static std::string fmt_line(JobId id, const char* state, Time start, Time dur, char level, const std::string& obj, const std::string& res, std::int64_t amount);

  void monitor_job(Plan& plan, const Job& j, const char* state, Time start, Time dur, int slots, const std::vector<Placement>& pl);

  void monitor(Plan& plan, std::size_t first_decision);
};

}  // namespace corral::planning
