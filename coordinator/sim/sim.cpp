#include "coordinator/sim/sim.hpp"

#include <algorithm>
#include <bit>
#include <chrono>
#include <map>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <optional>
#include <queue>
#include <set>
#include <span>
#include <stdexcept>
#include <type_traits>
#include <unordered_map>

#include "coordinator/nci/ledger.hpp"
#include "coordinator/sim/checkpointable.hpp"
#include "coordinator/sim/events.hpp"
#include "coordinator/planner/order.hpp"

namespace corral::sim {

namespace {

enum class St : std::uint8_t { Future, Pending, Running, Checkpointing, Suspended, Done, Rejected };

// Per-job simulator state; the index in the trace is the job's internal id - 1
// (trace ids are only used for output, so duplicate ids in a trace are harmless).
// What every event and pass reads is a small record of its own (Hot, a few
// bytes, many jobs a cache line); the rest (Rec) is read only when a job
// starts, stops or is summarized.
struct Hot {
  std::uint32_t gen = 0;    // bumps invalidate queued events
  St st = St::Future;
  bool starting = false;    // selected by this pass's Start decisions
  bool odd = false;         // pending and not planner.hpp cores_only_job() (counted in odd_pending_)
};
struct Rec {
  Time first_start = -1, end = -1;
  Time seg_start = 0;       // start of the current run segment
  Time seg_overhead = 0;    // restart cost paid at the start of this segment
  Time actual_end = 0;      // when the current segment completes the job
  Time remaining = 0;       // while suspended: seconds still to run
  Time suspended_at = 0;
  Time work_done = 0;       // seconds of the run saved by checkpoints
  Time plan_est = 0;        // planning estimate (prediction or requested)
  int checkpoints = 0, requeues = 0;
};
// Trivially destructible: no walk over every job's record when the replay ends.
static_assert(std::is_trivially_destructible_v<Rec>);

// A start this pass accepted (Hot::starting), until the job leaves pending:
// kept per pass, not per job (Rec stays small and trivially destructible).
struct StartNote {
  std::size_t idx = 0;
  int slots = 0;
  bool backfilled = false;
  std::vector<Placement> place;
};

// Members of an aggregate (counted by brace-initializing it from placeholders):
// shift_job/shift_running below must list every member.
struct AnyField {
  template <class T>
  operator T() const;
};
template <class T, class... A>
constexpr std::size_t field_count() {
  if constexpr (requires { T{A{}..., AnyField{}}; }) return field_count<T, A..., AnyField>();
  else return sizeof...(A);
}

// Moves pending job `s` into the place `d` of a job that left (the queue's
// compaction, once per job that leaves). A trace job's strings and
// consumables are mostly empty: moving only the members that hold something
// skips most of Job's out-of-line member moves. Lists every member of
// model.hpp's Job: the member count check fails when Job changes, so this is
// updated with it.
void shift_job(Job& d, Job& s) {
  static_assert(field_count<Job>() == 27, "corral::Job changed: update shift_job()");
  auto str = [](std::string& a, std::string& b) {
    if ((a.size() | b.size()) != 0) a = std::move(b);  // one branch: both empty, nothing to do
  };
  d.id = s.id;
  str(d.name, s.name);
  str(d.user, s.user);
  str(d.group, s.group);
  str(d.project, s.project);
  str(d.queue, s.queue);
  str(d.flow_step, s.flow_step);
  str(d.pe, s.pe);
  d.submit = s.submit;
  d.walltime = s.walltime;
  d.estimate = s.estimate;
  d.predicted = s.predicted;
  d.slots_min = s.slots_min;
  d.slots_max = s.slots_max;
  d.mem_mb = s.mem_mb;
  d.jobfs_mb = s.jobfs_mb;
  if ((d.consumables.size() | s.consumables.size()) != 0) d.consumables = std::move(s.consumables);
  d.reserve = s.reserve;
  d.checkpointable = s.checkpointable;
  d.preempt = s.preempt;
  d.priority = s.priority;
  d.cycles_pending = s.cycles_pending;
  d.requeues = s.requeues;
  d.pba_preemptions = s.pba_preemptions;
  d.last_start_priority = s.last_start_priority;
  d.work_done = s.work_done;
  d.first_start = s.first_start;
}

// A Job built from pending job `s` by shift_job() where it is needed: as the
// first argument of a RunningJob's parenthesized aggregate initialization it
// builds the entry's job in place (the conversion's result is the member), so
// the entry is not value-initialized (zeroed, then given its defaults) first.
struct MovedJob {
  Job& s;
  operator Job() const {
    Job d;  // the defaults only (every scalar member has one; `{}` would zero it first)
    shift_job(d, s);
    return d;  // NRVO: d is the member
  }
};

// A Job with id `id` and every other member its default, built where it is
// needed (a vector's emplace_back(NewJob{id}) constructs it in place).
struct NewJob {
  JobId id;
  operator Job() const {
    Job d;
    d.id = id;
    return d;
  }
};

// The same for a running entry (finish() moves the last entry into the
// place of the one that ended).
void shift_running(RunningJob& d, RunningJob& s) {
  static_assert(field_count<RunningJob>() == 10, "corral::RunningJob changed: update shift_running()");
  shift_job(d.job, s.job);
  d.start = s.start;
  d.expected_end = s.expected_end;
  d.slots = s.slots;
  d.placement.swap(s.placement);  // s is destroyed next: no vector freed here
  d.suspended = s.suspended;
  d.backfilled = s.backfilled;
  d.suspended_for = s.suspended_for;
  d.suspended_since = s.suspended_since;
  d.stopping = s.stopping;
}

// d = s for a start's placement (a pooled buffer: its old entries are
// overwritten in place). Member-wise, and an entry's cores only when either
// side has some: compact starts on node ranges carry none, and vector::assign
// spent ~80 instructions a start in the elements' vector<int> assignments.
void copy_place(std::vector<Placement>& d, std::span<const Placement> s) {
  static_assert(field_count<Placement>() == 4, "corral::Placement changed: update copy_place()");
  if (d.size() > s.size()) d.resize(s.size());
  const std::size_t k = d.size();
  Placement* const o = d.data();
  for (std::size_t i = 0; i < k; ++i) {
    o[i].node = s[i].node;
    o[i].slots = s[i].slots;
    o[i].count = s[i].count;
    if ((o[i].cores.size() | s[i].cores.size()) != 0) o[i].cores = s[i].cores;
  }
  for (std::size_t i = k; i < s.size(); ++i) d.push_back(s[i]);
}

using detail::Ev;
using detail::EventQueue;
using MinHeap = std::priority_queue<Ev, std::vector<Ev>, std::greater<Ev>>;

class Simulator {
 public:
  Simulator(const SwfTrace& tr, const SimOptions& o) : tr_(tr), opt_(o), cfg_(o.sched) {
    n_ = tr.jobs.size();
    if (opt_.max_jobs > 0 && opt_.max_jobs < n_) n_ = opt_.max_jobs;
    int machine = tr.max_procs > 0 ? tr.max_procs : tr.max_nodes;
    int nodes = opt_.nodes > 0 ? opt_.nodes : machine;
    if (nodes <= 0)
      throw std::invalid_argument("the trace has no '; MaxProcs:' or '; MaxNodes:' header: give --nodes N");
    if (opt_.cores <= 0) throw std::invalid_argument("cores per node must be > 0");
    cpn_ = opt_.cores;
    total_ = static_cast<std::int64_t>(nodes) * cpn_;
    if (total_ > (1 << 24)) throw std::invalid_argument("machine too large (more than 16M cores)");
    snap_.nodes.resize(static_cast<std::size_t>(nodes));
    for (int i = 0; i < nodes; ++i) {
      snap_.nodes[static_cast<std::size_t>(i)].name = "n" + std::to_string(i);
      snap_.nodes[static_cast<std::size_t>(i)].cores = cpn_;
    }
    node_used_.assign(static_cast<std::size_t>(nodes), 0);
    busy_.assign((static_cast<std::size_t>(nodes) + 63) / 64, 0);
    bits_ = cpn_ == 1;
    // The trace's run times are exact: no SGE duration offset; the planner
    // knows what a restart costs.
    cfg_.planner.duration_offset = 0;
    cfg_.planner.restart_cost = opt_.restart_cost;
    cfg_.planner.checkpoint_cost = opt_.checkpoint_cost;
    if (opt_.on_monitor) cfg_.planner.monitor = true;
    if (opt_.on_setup) opt_.on_setup(snap_, cfg_);
    // Pending stays in FIFO order (arrivals in trace order, requeues at
    // their place, starts removed in place): the order stage need not check
    // it (model.hpp pending_fifo); arrive() keeps the promise true.
    snap_.pending_fifo = std::is_sorted(snap_.pending.begin(), snap_.pending.end(), fifo_less);
    snap_.nodes_version = 1;  // the nodes never change during a replay (a kept Planner reuses them)
    if (cfg_.pba.enabled && !cfg_.planner.may_place &&
        std::any_of(snap_.nodes.begin(), snap_.nodes.end(), [](const Node& nd) { return nd.mem_mb > 0; }))
      cfg_.planner.may_place = pba::may_place_now;  // placeholder slots need node memory
    if (opt_.projects) setup_projects();
    // The replay binds no cores: placements name nodes and slots only (one
    // heap block less per node of every start). NCI reads the cores of its
    // suspended jobs' placements, so with it (or PBA) they are still picked.
    if (!cfg_.nci.enabled && !cfg_.pba.enabled) cfg_.planner.pick_cores = false;
    // Without cores, consecutive nodes of a start come as one range
    // (Placement::count): one entry per range instead of per node. Only
    // where passes take the planner's fast path (fcfs, easy, conservative
    // on plain nodes, nothing freed by a stage): the general path would
    // expand the ranges into a copy of the snapshot every pass.
    const Backfill bf = cfg_.planner.backfill;
    if (!cfg_.nci.enabled && !cfg_.pba.enabled && !cfg_.planner.pick_cores &&
        (bf == Backfill::Fcfs || bf == Backfill::Easy || bf == Backfill::Conservative) &&
        !runs_selective_preemption(cfg_) && !cfg_.planner.monitor && snap_.queues.empty() && snap_.global.empty() &&
        std::all_of(snap_.nodes.begin(), snap_.nodes.end(),
                    [](const Node& nd) { return nd.mem_mb <= 0 && nd.jobfs_mb <= 0 && nd.consumables.empty(); }))
      cfg_.planner.node_ranges = true;
    // There too, starts come as compact records (model.hpp Plan::starts):
    // no Decision and no placement vector per start. Not for a caller's
    // pass function (it may read Start decisions).
    // Reservations too (Plan::reserves): the replay does not read them.
    if (cfg_.planner.node_ranges && !opt_.scheduler) cfg_.planner.compact_starts = cfg_.planner.compact_reserves = true;
    // There every start comes from the planner's fast path, which places it
    // on nodes free in its own occupancy (kept from `running`, the same
    // placements the simulator would count): the simulator keeps the core
    // count only, not a second occupancy per node (one node walk less per
    // start and end). A caller's pass function is checked node by node.
    planner_nodes_ = cfg_.planner.compact_starts && !opt_.scheduler;
    // With no allocation policy and no checkpointing, a pass can only start
    // jobs into free cores: when no pending job fits in them it is a no-op.
    only_starts_ = !cfg_.pba.enabled && !cfg_.nci.enabled && cfg_.planner.backfill != Backfill::Checkpoint &&
                   !runs_selective_preemption(cfg_) &&
                   !cfg_.planner.monitor && !opt_.scheduler;
    slots_n_.assign(static_cast<std::size_t>(total_) + 2, 0);
    slots_nz_.assign((slots_n_.size() + 63) / 64, 0);
    slots_lo_ = slots_n_.size();
    recs_.resize(n_);
    hot_.resize(n_);
    ckpt_mark_ = mark_checkpointable(n_, opt_.checkpointable, opt_.seed);
    run_pos_.assign(n_, -1);
    // Pending kept unordered (a job that leaves is replaced by the last one:
    // one Job moved, not every job behind it), its FIFO order given in
    // Snapshot::pending_order (model.hpp). Not with PBA or NCI (their stages
    // read pending in vector order), nor for a caller's own pass function.
    swap_pending_ = !cfg_.pba.enabled && !cfg_.nci.enabled && !opt_.scheduler && snap_.pending.empty();
    cores_only_ok_ = snap_.pending.empty();
    snap_.pending_cores_only = cores_only_ok_;
    if (swap_pending_) {
      snap_.pending_fifo = false;
      pend_pos_.assign(n_, -1);
      snap_.pending_slots_min.clear();
      snap_.pending_min_duration.clear();
      snap_.pending_order_slots_min.clear();
      snap_.pending_order_min_duration.clear();
    }
    res_.machine_procs = static_cast<int>(total_);
    // User and group names: read by NCI (per-user limits and shares), PBA
    // (project membership, the projects plan) and whatever a caller's hooks
    // or pass function do. The plain planner policies never read them, and
    // without them a queued job's strings are all empty: nothing to copy on
    // each move between pending and running (~5 % of an easy replay).
    names_ = cfg_.nci.enabled || cfg_.pba.enabled || opt_.projects || opt_.scheduler || opt_.on_arrival || opt_.on_setup;
  }

  SimResult run() {
    auto t0 = std::chrono::steady_clock::now();
    std::size_t next = 0;             // next arrival
    std::size_t tick = std::max<std::size_t>(1, n_ / 100), last_tick = 0;
    for (;;) {
      drop_stale();
      Time t = kForever;
      if (next < n_) t = tr_.jobs[next].submit;
      if (!heap_.empty()) t = std::min(t, heap_.top().t);
      if (!wake_.empty()) t = std::min(t, wake_.top());
      if (t == kForever) break;
      integrate(t);
      report_weeks_until(t);
      // Cores left idle while jobs waited (what packing loses).
      if (!snap_.pending.empty() && t > now_)
        res_.idle_while_waiting += static_cast<double>(total_ - used_) * static_cast<double>(t - now_);
      now_ = t;
      while (!wake_.empty() && wake_.top() <= now_) wake_.pop();
      // 1. completions (and checkpoints that finished)
      while (!heap_.empty() && heap_.top().t == now_) {
        Ev e = heap_.top();
        heap_.pop();
        const Hot& h = hot_[e.idx];
        if (e.gen != h.gen) continue;
        if (h.st == St::Running) finish(e.idx);
        else if (h.st == St::Checkpointing) end_checkpoint(e.idx);
      }
      // 2. arrivals
      while (next < n_ && tr_.jobs[next].submit == now_) arrive(next++);
      // 3. one scheduling pass
      if (!snap_.pending.empty() || suspended_ > 0) {
        if (pass_can_act()) pass();
        else ++res_.skipped_passes;
      }
      if (opt_.progress && next - last_tick >= tick) {
        last_tick = next;
        opt_.progress(static_cast<double>(next) / static_cast<double>(n_));
      }
    }
    if (opt_.progress) opt_.progress(1.0);
    res_.sim_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (opt_.weekly_reports && ledger_) {  // the last (partial) week
      Snapshot s = snap_;
      s.now = now_;
      res_.weekly.push_back(build_report(*ledger_, s, report_week_, allocations_of(report_week_)));
    }
    summarize();
    return std::move(res_);
  }

 private:
  const SwfTrace& tr_;
  const SimOptions& opt_;
  SchedConfig cfg_;
  std::size_t n_ = 0;
  int cpn_ = 1;
  std::int64_t total_ = 0, used_ = 0;
  std::vector<int> node_used_;
  Snapshot snap_;
  std::vector<Rec> recs_;
  std::vector<std::uint8_t> ckpt_mark_;  // job i may be checkpointed (checkpointable.hpp)
  std::size_t arrived_ = 0, jobs_checkpointed_ = 0;  // for SimOptions::checkpoint_budget
  std::vector<Hot> hot_;  // parallel to recs_
  std::vector<std::int32_t> run_pos_;  // index in snap_.running, -1 if not there
  EventQueue heap_;    // completions / checkpoint ends
  MinHeap extend_;     // predicted expected ends to check (EASY++ extension)
  // Extra pass times: the end of a backfilled job's window (checkpoint policy),
  // when the planner may checkpoint it for the head job.
  std::priority_queue<Time, std::vector<Time>, std::greater<Time>> wake_;
  RunPredictor predictor_{opt_.predictor};  // users' run history (predict.hpp)
  std::unordered_map<long, int> pend_of_user_;  // queued jobs per user (repredict)
  // Trace user and group ids as names: SWF numbers them 1, 2, ..., so a
  // table indexed by the id (no hash lookup, no number formatting per
  // arrival); ids past kNameTable (never seen in the archive) are formatted.
  static constexpr long kNameTable = 1 << 16;
  std::vector<std::string> user_names_, group_names_;
  std::string big_name_;
  const std::string& name_of(std::vector<std::string>& table, long id) {
    if (id >= kNameTable) return big_name_ = std::to_string(id);
    const auto k = static_cast<std::size_t>(id);
    if (k >= table.size()) table.resize(std::max(k + 1, table.size() * 2));
    if (table[k].empty()) table[k] = std::to_string(id);
    return table[k];
  }
  Time now_ = 0;
  std::size_t suspended_ = 0;
  // Pending jobs by slots_min (clamped to 1 .. total_ + 1) and the smallest
  // slots_min pending (slots_n_.size() when none): a pass that can only
  // start jobs acts when it is within the free cores. (A Fenwick tree of
  // the counts did the same with a walk per arrival, start and query.)
  std::vector<std::int32_t> slots_n_;
  std::vector<std::uint64_t> slots_nz_;  // bit i: slots_n_[i] > 0
  std::size_t slots_lo_ = 0;
  bool only_starts_ = false;       // the configured pass can only start jobs
  bool names_ = true;              // jobs carry user and group names (constructor)
  Planner planner_;  // scratch buffers reused across passes
  Plan plan_;        // the last pass's plan (its vectors reused)
  SimResult res_;
  std::vector<std::uint32_t> upd_of_;  // scratch: update index per job (apply_updates)
  std::vector<std::size_t> leaving_, leave_pos_;  // scratch (pass): jobs leaving pending, their positions
  std::vector<StartNote> notes_;  // this pass's accepted starts (entries past notes_n_ kept for reuse)
  std::size_t notes_n_ = 0;
  StartNote& new_note(std::size_t idx) {
    if (notes_n_ == notes_.size()) notes_.emplace_back();
    StartNote& n = notes_[notes_n_++];
    n.idx = idx;
    return n;
  }
  std::size_t note_at_ = 0;  // where note_of() looks first (both compactions ask in idx order)
  // The note of job idx (one per starting job; notes_ sorted by idx in pass()).
  StartNote& note_of(std::size_t idx) {
    if (note_at_ < notes_n_ && notes_[note_at_].idx == idx) return notes_[note_at_++];
    StartNote* const b = notes_.data();
    return *std::lower_bound(b, b + notes_n_, idx, [](const StartNote& a, std::size_t i) { return a.idx < i; });
  }
  // A Start (decision or compact record) of job idx on `want` slots (0: the
  // trace's procs) placed on `place`: taken and noted if the job is pending
  // and not started yet this pass and its cores are free (else, e.g. a
  // checkpoint still being written, a deferred start). The caller fills the
  // note's placement and backfilled flag; nullptr: not started.
  StartNote* accept_start(std::size_t idx, int want, std::span<const Placement> place) {
    Hot& h = hot_[idx];
    if (h.st != St::Pending || h.starting) return nullptr;
    const int slots = want > 0 ? want : tr_.jobs[idx].procs;
    if (!can_take(slots, place)) {
      ++res_.deferred_starts;
      return nullptr;
    }
    take(slots, place);
    h.starting = true;
    leaving_.push_back(idx);
    StartNote& sn = new_note(idx);
    sn.slots = slots;
    return &sn;
  }
  // compact_starts: placement buffers of finished jobs, the first pool_n_
  // (the rest are empty, kept so that buffers are swapped in and out
  // without a vector destroyed).
  std::vector<std::vector<Placement>> place_pool_;
  std::size_t pool_n_ = 0;
  bool swap_pending_ = false;           // pending unordered, FIFO order in snap_.pending_order
  // Pending jobs that are not cores_only_job(); at 0 the snapshot promises
  // pending_cores_only (model.hpp). Jobs put in pending by on_setup have no
  // record: with any, the promise is never made.
  std::size_t odd_pending_ = 0;
  bool cores_only_ok_ = true;
  void set_odd(std::size_t idx, const Job& j) {  // job idx is pending as j
    const bool odd = !cores_only_job(j);
    if (odd != hot_[idx].odd) {
      hot_[idx].odd = odd;
      if (odd) ++odd_pending_;
      else --odd_pending_;
    }
    snap_.pending_cores_only = cores_only_ok_ && odd_pending_ == 0;
    // Every change of a queued job passes here: its entry of
    // Snapshot::pending_slots_min follows (arrivals and requeues get theirs
    // in fifo_insert()).
    if (swap_pending_ && pend_pos_[idx] >= 0) {
      const auto pos = static_cast<std::size_t>(pend_pos_[idx]);
      put_need(pos, j);
      put_order_need(fifo_at_[pos], j);
    }
  }
  // Pending position pos's entries of Snapshot::pending_slots_min and
  // pending_min_duration (model.hpp), from its job j.
  void put_need(std::size_t pos, const Job& j) {
    snap_.pending_slots_min[pos] = j.slots_min;
    snap_.pending_min_duration[pos] = duration_floor(j);
  }
  // The same at FIFO place m: Snapshot::pending_order_slots_min and
  // pending_order_min_duration (model.hpp) follow pending_order.
  static std::int32_t min_duration32(const Job& j) {
    return static_cast<std::int32_t>(std::min<Time>(duration_floor(j), INT32_MAX));
  }
  void put_order_need(std::size_t m, const Job& j) {
    snap_.pending_order_slots_min[m] = j.slots_min;
    snap_.pending_order_min_duration[m] = min_duration32(j);
  }
  void clear_odd(std::size_t idx) {  // job idx leaves pending
    if (!hot_[idx].odd) return;
    hot_[idx].odd = false;
    --odd_pending_;
    snap_.pending_cores_only = cores_only_ok_ && odd_pending_ == 0;
  }
  std::vector<std::int32_t> pend_pos_;  // swap_pending_: per job, its position in pending (-1: none)
  std::vector<std::uint32_t> fifo_at_;  // swap_pending_: per pending position, its place in pending_order
  std::vector<std::uint32_t> gone_;     // scratch (leave_swapped): FIFO places that empty this pass

  // swap_pending_: pending position `pos` (just added) takes its FIFO place.
  void fifo_insert(std::size_t pos) {
    auto& ord = snap_.pending_order;
    const auto& pend = snap_.pending;
    if (fifo_at_.size() < pend.size()) fifo_at_.resize(pend.size() + pend.size() / 2 + 16);
    const Job& j = pend[pos];
    pend_pos_[j.id - 1] = static_cast<std::int32_t>(pos);
    // Snapshot::pending_slots_min (model.hpp): parallel to pending; pos is
    // its last entry (both callers append), so the arrays grow by one.
    const Time floor = duration_floor(j);
    const auto floor32 = static_cast<std::int32_t>(std::min<Time>(floor, INT32_MAX));
    snap_.pending_slots_min.push_back(j.slots_min);
    snap_.pending_min_duration.push_back(floor);
    if (ord.empty() || !fifo_less(j, pend[ord.back()])) {  // arrivals: at the end
      fifo_at_[pos] = static_cast<std::uint32_t>(ord.size());
      ord.push_back(static_cast<std::uint32_t>(pos));
      snap_.pending_order_slots_min.push_back(j.slots_min);
      snap_.pending_order_min_duration.push_back(floor32);
      return;
    }
    auto it = std::upper_bound(ord.begin(), ord.end(), pos,
                               [&](std::size_t a, std::uint32_t b) { return fifo_less(pend[a], pend[b]); });
    const std::size_t k = static_cast<std::size_t>(it - ord.begin());
    ord.insert(it, static_cast<std::uint32_t>(pos));
    const auto at = static_cast<std::ptrdiff_t>(k);
    snap_.pending_order_slots_min.insert(snap_.pending_order_slots_min.begin() + at, j.slots_min);
    snap_.pending_order_min_duration.insert(snap_.pending_order_min_duration.begin() + at, floor32);
    for (std::size_t m = k; m < ord.size(); ++m) fifo_at_[ord[m]] = static_cast<std::uint32_t>(m);
  }

  // ---- project figures (SimOptions::projects)
  struct ProjAcc {
    std::int64_t used = 0;         // slots of its running (not suspended) jobs
    double used_int = 0;           // integral of `used` over time
    std::int64_t pend_within = 0;  // slots of its pending jobs submitted within the allocation
    double su = 0;
    std::size_t suffered = 0, caused = 0;
  };
  std::optional<Ledger> ledger_;
  std::vector<ProjAcc> pacc_;         // plan projects in order, then "(none)"
  std::vector<std::int32_t> proj_;    // per job: index into pacc_
  std::vector<std::uint8_t> within_;  // per job: within its allocation when submitted
  std::unordered_map<std::string, std::int32_t> proj_index_;
  Time last_t_ = 0;

  void setup_projects() {
    const pba::ProjectPlan& plan = cfg_.pba.plan;
    if (snap_.queues.empty()) snap_.queues = project_queues(plan, cfg_);
    std::string defq = cfg_.nci.default_queue;
    if (!nci_find_queue(snap_.queues, defq) && !snap_.queues.empty()) defq = snap_.queues.front().name;
    const Time origin = n_ ? tr_.jobs[0].submit : 0;
    LedgerConfig lc;
    lc.period_origin = origin;
    lc.week_origin = origin;
    lc.default_queue = defq;
    ledger_.emplace(snap_.queues, lc);
    for (const pba::Grant& g : plan.grants) ledger_->set_grant_every(g.project, g.su, g.period);
    for (std::size_t i = 0; i < plan.projects.size(); ++i)
      proj_index_.emplace(plan.projects[i].name, static_cast<std::int32_t>(i));
    pacc_.assign(plan.projects.size() + 1, {});
    proj_.assign(n_, static_cast<std::int32_t>(plan.projects.size()));
    within_.assign(n_, 0);
    last_t_ = origin;
  }

  // Weekly reports: every week that ended by `t` (the snapshot as it stands at
  // the week's end, since nothing changes between events).
  std::int64_t report_week_ = 0;
  std::map<std::string, double> allocations_of(std::int64_t week) const {
    std::map<std::string, double> m;
    for (const auto& p : cfg_.pba.plan.projects)
      m[p.name] = cfg_.pba.plan.allocated_slots(p.name, ledger_->week_start(week));
    return m;
  }
  void report_weeks_until(Time t) {
    if (!opt_.weekly_reports || !ledger_) return;
    while (ledger_->week_start(report_week_ + 1) <= t) {
      Snapshot s = snap_;
      s.now = ledger_->week_start(report_week_ + 1);
      res_.weekly.push_back(build_report(*ledger_, s, report_week_, allocations_of(report_week_)));
      ++report_week_;
    }
  }

  std::int32_t none_project() const { return static_cast<std::int32_t>(pacc_.size()) - 1; }

  ProjAcc* acc(std::size_t idx) { return pacc_.empty() ? nullptr : &pacc_[static_cast<std::size_t>(proj_[idx])]; }

  void integrate(Time t) {
    if (pacc_.empty() || t <= last_t_) return;
    for (ProjAcc& a : pacc_) a.used_int += static_cast<double>(a.used) * static_cast<double>(t - last_t_);
    last_t_ = t;
  }

  // Service units for the running stretch that ends now (nci-pbs-policy.txt
  // "Charging": walltime in the running state x cpus x queue charge factor).
  void charge(std::size_t idx, const RunningJob& rj) {
    ProjAcc* a = acc(idx);
    if (!a || !ledger_) return;
    a->used -= rj.slots;
    const Time secs = now_ - recs_[idx].seg_start;
    if (secs <= 0) return;
    try {
      a->su += ledger_->charge(rj.job, secs, now_, rj.slots);
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument("job " + std::to_string(tr_.jobs[idx].id) + ": " + e.what());
    }
  }

  // A preemption (requeue, suspension, checkpoint) was applied to job idx;
  // the decision's reason names the job it was made for ("... job N ...").
  void count_preemption(std::size_t idx, const std::string& reason) {
    ProjAcc* a = acc(idx);
    if (!a) return;
    ++a->suffered;
    for (std::size_t p = reason.find("job "); p != std::string::npos; p = reason.find("job ", p + 1)) {
      std::size_t q = p + 4;
      if (q >= reason.size() || reason[q] < '0' || reason[q] > '9') continue;
      unsigned long long id = std::strtoull(reason.c_str() + q, nullptr, 10);
      if (id >= 1 && id <= n_) ++pacc_[static_cast<std::size_t>(proj_[id - 1])].caused;
      break;
    }
  }

  // Plan::updates (priority, cycles_pending) go into the jobs before any
  // decision is applied (pba.hpp contract), so PBA priorities and NCI's start
  // window advance from pass to pass.
  void apply_updates(const std::vector<JobUpdate>& ups) {
    if (upd_of_.size() != n_) upd_of_.assign(n_, UINT32_MAX);
    bool any_pending = false;
    for (std::size_t k = 0; k < ups.size(); ++k) {
      const JobId id = ups[k].job;
      if (id < 1 || id > n_) continue;
      const std::size_t idx = static_cast<std::size_t>(id - 1);
      if (run_pos_[idx] >= 0) {
        pba::apply_update(snap_.running[static_cast<std::size_t>(run_pos_[idx])].job, ups[k]);
        touch_running(run_pos_[idx]);
      } else if (hot_[idx].st == St::Pending) {
        upd_of_[idx] = static_cast<std::uint32_t>(k);
        any_pending = true;
      }
    }
    if (!any_pending) return;
    for (Job& j : snap_.pending) {
      std::uint32_t& k = upd_of_[j.id - 1];
      if (k == UINT32_MAX) continue;
      pba::apply_update(j, ups[k]);
      k = UINT32_MAX;
    }
  }

  static JobId jid(std::size_t idx) { return static_cast<JobId>(idx + 1); }

  // Every change of snap_.running: a new running_version, and the position
  // in running_touched (model.hpp), so a kept Planner compares only these.
  void touch_running(std::int32_t pos) {
    ++snap_.running_version;
    snap_.running_touched.push_back(static_cast<std::uint32_t>(pos));
  }

  void slots_add(int slots, int d) {
    const auto i = static_cast<std::size_t>(std::clamp<std::int64_t>(slots, 1, total_ + 1));
    const std::uint64_t bit = std::uint64_t{1} << (i % 64);
    if ((slots_n_[i] += d) > 0) {
      slots_nz_[i / 64] |= bit;
      slots_lo_ = std::min(slots_lo_, i);
      return;
    }
    slots_nz_[i / 64] &= ~bit;
    if (i != slots_lo_) return;
    // The smallest has gone: the next count above, a word at a time.
    slots_lo_ = slots_n_.size();
    for (std::size_t w = i / 64; w < slots_nz_.size(); ++w) {
      const std::uint64_t m = slots_nz_[w] & (w == i / 64 ? ~(bit - 1) : ~std::uint64_t{0});
      if (m != 0) {
        slots_lo_ = w * 64 + static_cast<std::size_t>(std::countr_zero(m));
        break;
      }
    }
  }
  bool pass_can_act() const {
    if (!only_starts_ || suspended_ > 0) return true;
    // Some pending job's slots_min <= the free cores.
    return static_cast<std::int64_t>(slots_lo_) <= total_ - used_;
  }

  void drop_stale() {
    while (!heap_.empty() && heap_.top().gen != hot_[heap_.top().idx].gen) heap_.pop();
  }

  Time predict(const SwfJob& s) const {
    if (!opt_.predict) return 0;
    return predictor_.predict(s);  // 0: no history, the requested time is the estimate
  }

  // The prediction plans the job, or with predict_order_only only orders it
  // (the planner then plans with the request: no reservation slips when a
  // job outlives its prediction).
  void set_prediction(Job& j, const SwfJob& s) const {
    if (opt_.predict_order_only) j.predicted = predict(s);
    else j.estimate = predict(s);
  }

  void arrive(std::size_t idx) {
    const SwfJob& s = tr_.jobs[idx];
    Rec& r = recs_[idx];
    Hot& h = hot_[idx];
    // Arrivals come in submit, id order; built in place with its defaults
    // (not value-initialized: that zeroes the whole Job first).
    Job& j = snap_.pending.emplace_back(NewJob{jid(idx)});
    if (names_) {
      if (s.user >= 0) j.user = name_of(user_names_, s.user);
      if (s.group >= 0) j.group = name_of(group_names_, s.group);
    }
    j.submit = s.submit;
    j.walltime = s.estimate;
    set_prediction(j, s);
    j.slots_min = j.slots_max = s.procs;
    j.checkpointable = ckpt_mark_[idx] != 0;
    ++arrived_;
    if (opt_.on_arrival) opt_.on_arrival(j, s);
    // A hook may have changed its submit time.
    if (snap_.pending.size() >= 2 && fifo_less(j, snap_.pending[snap_.pending.size() - 2])) snap_.pending_fifo = false;
    if (opt_.projects) arrive_project(idx, j);
    // Time-based policy thresholds need a pass when they are crossed, even
    // if no job arrives or ends then: PBA's pending threshold ("pending for
    // more than a predetermined period") and NCI's start window.
    if (cfg_.pba.enabled && cfg_.pba.preempt && !j.project.empty() && cfg_.pba.preempt_after > 0)
      wake_.push(s.submit + cfg_.pba.preempt_after);
    if (cfg_.nci.enabled && cfg_.nci.window_wait > 0) {
      wake_.push(s.submit + cfg_.nci.window_wait);
      wake_.push(s.submit + window_bound(cfg_.nci));  // when it becomes overdue
    }
    // An aged job may preempt (planner/preempt.hpp): a pass when it ages.
    if (runs_selective_preemption(cfg_) && cfg_.preempt.aged_preempt)
      if (Time a = aging_of(j, cfg_.order, total_); a > 0) wake_.push(s.submit + a);
    r.plan_est = j.estimate > 0 ? j.estimate : j.walltime;
    h.st = St::Pending;
    slots_add(j.slots_min, +1);
    count_pending(idx, +1);
    set_odd(idx, j);
    if (swap_pending_) fifo_insert(snap_.pending.size() - 1);
  }

  // The job's project (the plan's members: ProjectPlan::project_of) and
  // whether it is within the project's allocation as it arrives.
  void arrive_project(std::size_t idx, Job& j) {
    const pba::ProjectPlan& plan = cfg_.pba.plan;
    if (j.project.empty()) j.project = plan.project_of(j.user, j.group);
    auto it = proj_index_.find(j.project);
    if (it == proj_index_.end()) return;  // "(none)"
    proj_[idx] = it->second;
    ProjAcc& a = pacc_[static_cast<std::size_t>(it->second)];
    bool covered = false;
    for (const pba::Allocation* al : plan.allocations_at(now_))
      if (pba::covers(*al, j)) covered = true;
    if (!covered) return;
    const std::int64_t alloc = plan.allocated_slots(j.project, now_);
    if (a.used + a.pend_within + j.slots_min <= alloc) {
      within_[idx] = 1;
      a.pend_within += j.slots_min;
    }
  }

  // Job j (a pending entry, moved from) starts on `place` (moved from).
  void add_running(std::size_t idx, Job& j, int slots, std::vector<Placement>& place, bool backfilled) {
    Rec& r = recs_[idx];
    Hot& h = hot_[idx];
    const SwfJob& s = tr_.jobs[idx];
    if (ProjAcc* a = acc(idx)) {
      if (r.first_start < 0 && within_[idx]) a->pend_within -= j.slots_min;
      a->used += slots;
    }
    if (r.first_start < 0) r.first_start = now_;
    pba::on_start(j, now_);  // last_start_priority, first_start (pba.hpp contract)
    r.seg_start = now_;
    r.seg_overhead = r.work_done > 0 ? opt_.restart_cost : 0;
    res_.restart_cost_total += r.seg_overhead * slots;
    r.actual_end = now_ + r.seg_overhead + (s.run - r.work_done);
    h.st = St::Running;
    ++h.gen;
    heap_.push({r.actual_end, static_cast<std::uint32_t>(idx), h.gen});
    run_pos_[idx] = static_cast<std::int32_t>(snap_.running.size());
    const Time left_est = std::max<Time>(1, r.plan_est - r.work_done);
    const Time expected_end = now_ + r.seg_overhead + left_est;
    // Built in place, its job moved member-wise (j is a pending entry the
    // compaction overwrites); every other member as listed or its default.
    // Every member listed: GCC zeroes an aggregate given fewer first.
    static_assert(field_count<RunningJob>() == 10, "corral::RunningJob changed: list every member here");
    static const RunningJob kDefault{};
    RunningJob& rj = snap_.running.emplace_back(MovedJob{j}, now_, expected_end, slots, std::move(place),
                                                /*suspended=*/false, backfilled, kDefault.suspended_for,
                                                kDefault.suspended_since, kDefault.stopping);
    if (backfilled && cfg_.planner.backfill == Backfill::Checkpoint) {
      Time window_end = now_ + std::max<Time>(1, backfill_duration(rj.job, cfg_.planner));
      if (window_end < r.actual_end) wake_.push(window_end);
    }
    if (expected_end < r.actual_end) extend_.push({expected_end, static_cast<std::uint32_t>(idx), h.gen});
    touch_running(run_pos_[idx]);
  }

  // Removes a job from snap_.running (swap with last) and frees its cores.
  RunningJob take_running(std::size_t idx) {
    RunningJob rj = std::move(snap_.running[static_cast<std::size_t>(run_pos_[idx])]);
    erase_running(idx);
    stop_running(idx, rj);
    return rj;
  }

  // A running job leaves: its slots are free and its running stretch charged
  // (a suspended one holds no slots; its stretch was charged at suspension).
  void stop_running(std::size_t idx, const RunningJob& rj) {
    if (rj.suspended) return;
    release(rj.slots, rj.placement);
    charge(idx, rj);
  }

  // Removes job idx's running entry: the last entry moves into its place.
  void erase_running(std::size_t idx) {
    const std::int32_t p = run_pos_[idx];
    touch_running(p);  // the last entry moves here
    RunningJob& here = snap_.running[static_cast<std::size_t>(p)];
    // Its placement buffer serves a later compact start (pass()).
    if (cfg_.planner.compact_starts && here.placement.capacity() > 0) {
      if (pool_n_ == place_pool_.size()) place_pool_.emplace_back();
      here.placement.swap(place_pool_[pool_n_++]);  // an empty one in its place
    }
    if (static_cast<std::size_t>(p) + 1 != snap_.running.size()) {
      shift_running(here, snap_.running.back());
      run_pos_[here.job.id - 1] = p;
    }
    snap_.running.pop_back();
    run_pos_[idx] = -1;
  }

  // Placements name nodes p.node .. p.node + p.count - 1 (model.hpp).
  // Single-core nodes (cpn_ == 1) hold 0 or 1 slot each, so the nodes in use
  // are a bitset (busy_) and a range is checked, taken and released a word
  // at a time: the per-node loops mispredicted their exits (~0.6 M branches
  // of a CTC replay). Other machines count slots per node (node_used_), and
  // so does a single-core one from the first start whose placement lists a
  // node twice (only a caller's pass function makes one; a count of 2 is
  // then possible, which the bitset cannot hold).
  std::vector<std::uint64_t> busy_;
  bool bits_ = false;  // busy_ holds the nodes in use (else node_used_)
  bool planner_nodes_ = false;  // nodes in use are the planner's to keep (constructor): used_ only
  // f(word, mask) for the bits of nodes lo .. end - 1, one word at a time.
  template <class F>
  static bool all_words(std::size_t lo, std::size_t end, F&& f) {
    while (lo < end) {
      const std::size_t b = lo % 64, len = std::min<std::size_t>(64 - b, end - lo);
      const std::uint64_t m = (len == 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << len) - 1) << b;
      if (!f(lo / 64, m)) return false;
      lo += len;
    }
    return true;
  }
  void to_counts() {
    for (std::size_t n = 0; n < node_used_.size(); ++n) node_used_[n] = static_cast<int>((busy_[n / 64] >> (n % 64)) & 1);
    bits_ = false;
  }
  void release(int slots, std::span<const Placement> place) {
    used_ -= slots;
    if (planner_nodes_) return;
    for (const Placement& p : place) {
      const std::size_t end = std::min<std::size_t>(node_used_.size(), std::size_t{p.node} + p.count);
      if (bits_) {
        if (p.slots != 0)  // taken with 1 slot a node (can_take)
          all_words(p.node, end, [&](std::size_t w, std::uint64_t m) { return (busy_[w] &= ~m), true; });
        continue;
      }
      for (std::size_t n = p.node; n < end; ++n) node_used_[n] -= static_cast<int>(p.slots);
    }
  }
  bool can_take(int slots, std::span<const Placement> place) const {
    if (used_ + slots > total_) return false;
    if (planner_nodes_) return true;
    for (const Placement& p : place) {
      if (std::size_t{p.node} + p.count > node_used_.size()) return false;
      if (bits_) {  // every count is 0 or 1
        if (p.slots == 0) continue;
        if (p.slots > 1) return false;
        if (!all_words(p.node, std::size_t{p.node} + p.count,
                       [&](std::size_t w, std::uint64_t m) { return (busy_[w] & m) == 0; }))
          return false;
        continue;
      }
      for (std::size_t n = p.node; n < std::size_t{p.node} + p.count; ++n)
        if (node_used_[n] + static_cast<int>(p.slots) > cpn_) return false;
    }
    return true;
  }
  void take(int slots, std::span<const Placement> place) {
    used_ += slots;
    if (planner_nodes_) return;
    for (const Placement& p : place) {
      std::size_t n = p.node;
      const std::size_t end = std::size_t{p.node} + p.count;
      if (bits_) {
        if (p.slots == 0) continue;
        // can_take checked each entry alone: a node in use here is listed
        // twice in this start. Counted from here on (this entry's rest
        // below, from the word that met it).
        if (all_words(n, end, [&](std::size_t w, std::uint64_t m) {
              if ((busy_[w] & m) != 0) return false;
              busy_[w] |= m;
              n += static_cast<std::size_t>(std::popcount(m));
              return true;
            }))
          continue;
        to_counts();
      }
      for (; n < end; ++n) node_used_[n] += static_cast<int>(p.slots);
    }
  }

  void segment(std::size_t idx, const RunningJob& rj, Time end, bool ckpt) {
    if (!opt_.record_segments) return;
    res_.segments.push_back({tr_.jobs[idx].id, recs_[idx].seg_start, end, rj.slots, rj.placement, ckpt});
  }

  void finish(std::size_t idx) {
    Rec& r = recs_[idx];
    Hot& h = hot_[idx];
    {
      // As take_running(), but read in place: the entry is not moved out.
      const RunningJob& rj = snap_.running[static_cast<std::size_t>(run_pos_[idx])];
      stop_running(idx, rj);
      segment(idx, rj, now_, false);
      // Throughput SLA progress (pba.hpp contract).
      if (cfg_.pba.enabled && !rj.job.project.empty()) ++cfg_.pba.jobs_done[rj.job.project];
      erase_running(idx);
    }
    r.end = now_;
    h.st = St::Done;
    ++h.gen;
    if (!opt_.predict && !opt_.repredict) return;  // the trace job is not read (a cache miss an end)
    const SwfJob& s = tr_.jobs[idx];
    if (s.user >= 0) {  // run history (read by predict() only)
      if (opt_.predict) predictor_.record(s);
      if (opt_.repredict) repredict(s.user);
    }
  }

  // The user's queued jobs take the prediction of the new history (a burst
  // of identical jobs is judged by the first of them that ends).
  void repredict(long user) {
    auto it = pend_of_user_.find(user);
    if (it == pend_of_user_.end() || it->second <= 0) return;
    for (Job& j : snap_.pending) {
      const std::size_t k = static_cast<std::size_t>(j.id - 1);
      if (tr_.jobs[k].user != user) continue;
      set_prediction(j, tr_.jobs[k]);
      recs_[k].plan_est = j.estimate > 0 ? j.estimate : j.walltime;
      set_odd(k, j);
    }
  }
  void count_pending(std::size_t idx, int d) {
    if (opt_.repredict && tr_.jobs[idx].user >= 0) pend_of_user_[tr_.jobs[idx].user] += d;
  }

  // Puts a stopped job back in the pending queue at its submit-order place.
  void requeue(std::size_t idx, Job&& j) {
    Rec& r = recs_[idx];
    Hot& h = hot_[idx];
    h.st = St::Pending;
    ++h.gen;
    j.work_done = r.work_done;
    slots_add(j.slots_min, +1);
    count_pending(idx, +1);
    set_odd(idx, j);
    if (swap_pending_) {
      snap_.pending.push_back(std::move(j));
      fifo_insert(snap_.pending.size() - 1);
      return;
    }
    auto pos = std::lower_bound(snap_.pending.begin(), snap_.pending.end(), j, fifo_less);
    snap_.pending.insert(pos, std::move(j));
  }

  void end_checkpoint(std::size_t idx) {
    RunningJob rj = take_running(idx);
    segment(idx, rj, now_, true);
    requeue(idx, std::move(rj.job));
  }

  bool do_checkpoint(std::size_t idx) {
    Rec& r = recs_[idx];
    Hot& h = hot_[idx];
    if (h.st != St::Running || r.checkpoints >= 1000) return false;  // bound pathological loops
    const SwfJob& s = tr_.jobs[idx];
    Time work = std::max<Time>(0, now_ - r.seg_start - r.seg_overhead);
    r.work_done = std::min(s.run - 1, r.work_done + work);  // a checkpoint never completes the job
    if (r.checkpoints == 0) ++jobs_checkpointed_;
    ++r.checkpoints;
    ++res_.checkpoints;
    RunningJob& rj = snap_.running[static_cast<std::size_t>(run_pos_[idx])];
    touch_running(run_pos_[idx]);
    pba::on_requeue(rj.job);  // requeues + 1, cycles_pending = 0
    ++r.requeues;
    res_.checkpoint_cost_total += opt_.checkpoint_cost * rj.slots;
    res_.checkpoint_seconds += opt_.checkpoint_cost;
    ++h.gen;
    if (opt_.checkpoint_cost > 0) {
      // It holds its resources while the checkpoint is written.
      h.st = St::Checkpointing;
      rj.stopping = true;  // PBA must not pick it as a victim: it is leaving already
      rj.expected_end = now_ + opt_.checkpoint_cost;
      rj.backfilled = false;  // its cores come back when the checkpoint is written
      heap_.push({rj.expected_end, static_cast<std::uint32_t>(idx), h.gen});
    } else {
      end_checkpoint(idx);
    }
    return true;
  }

  bool do_requeue(std::size_t idx, bool by_pba = false) {
    Rec& r = recs_[idx];
    Hot& h = hot_[idx];
    if (h.st != St::Running && h.st != St::Suspended) return false;
    if (h.st == St::Suspended) --suspended_;
    RunningJob rj = take_running(idx);
    if (h.st == St::Running) segment(idx, rj, now_, false);
    ++r.requeues;
    pba::on_requeue(rj.job);  // requeues + 1, cycles_pending = 0
    if (by_pba) pba::on_pba_preemption(rj.job);  // the count PBA's requeue bound reads
    ++res_.preemptions;
    requeue(idx, std::move(rj.job));  // work since the last checkpoint is lost
    return true;
  }

  bool do_suspend(std::size_t idx, bool by_pba = false) {
    Rec& r = recs_[idx];
    Hot& h = hot_[idx];
    if (h.st != St::Running) return false;
    RunningJob& rj = snap_.running[static_cast<std::size_t>(run_pos_[idx])];
    touch_running(run_pos_[idx]);
    if (by_pba) pba::on_pba_preemption(rj.job);
    segment(idx, rj, now_, false);
    charge(idx, rj);  // suspended time is not charged
    r.remaining = r.actual_end - now_;
    r.suspended_at = now_;
    h.st = St::Suspended;
    ++h.gen;
    rj.suspended = true;
    rj.suspended_since = now_;
    ++suspended_;
    release(rj.slots, rj.placement);
    ++res_.preemptions;
    return true;
  }

  void do_resume(std::size_t idx) {
    Rec& r = recs_[idx];
    Hot& h = hot_[idx];
    if (h.st != St::Suspended) return;
    RunningJob& rj = snap_.running[static_cast<std::size_t>(run_pos_[idx])];
    touch_running(run_pos_[idx]);
    if (!can_take(rj.slots, rj.placement)) {
      ++res_.deferred_starts;
      return;
    }
    take(rj.slots, rj.placement);
    if (ProjAcc* a = acc(idx)) a->used += rj.slots;
    --suspended_;
    rj.suspended = false;
    rj.suspended_for += now_ - r.suspended_at;
    res_.max_suspension = std::max(res_.max_suspension, now_ - r.suspended_at);
    rj.expected_end += now_ - r.suspended_at;
    r.seg_start = now_;
    r.seg_overhead = 0;
    r.actual_end = now_ + r.remaining;
    h.st = St::Running;
    ++h.gen;
    heap_.push({r.actual_end, static_cast<std::uint32_t>(idx), h.gen});
  }

  // EASY++: a job that outlives its prediction gets its expected end moved
  // to its requested time; it is never killed before that.
  void extend_predictions() {
    while (!extend_.empty() && extend_.top().t <= now_) {
      Ev e = extend_.top();
      extend_.pop();
      Rec& r = recs_[e.idx];
      Hot& h = hot_[e.idx];
      if (e.gen != h.gen || h.st != St::Running) continue;
      RunningJob& rj = snap_.running[static_cast<std::size_t>(run_pos_[e.idx])];
      touch_running(run_pos_[e.idx]);
      Time req_left = std::max<Time>(1, tr_.jobs[e.idx].estimate - r.work_done);
      rj.expected_end = std::max(rj.expected_end, r.seg_start + r.seg_overhead + req_left);
    }
  }

  // The pass's MONITOR lines to SimOptions::on_monitor, in the trace's ids
  // (kept out of line: pass() is the replay's hot path).
  [[gnu::noinline, gnu::cold]] void report_monitor() {
    monitor_trace_ids(plan_.monitor, tr_);
    opt_.on_monitor(plan_.monitor);
  }

  void pass() {
    extend_predictions();
    snap_.now = now_;
    if (ledger_ && cfg_.nci.enabled) cfg_.nci.grant_left = ledger_->grants_left(now_);
    if (opt_.checkpoint_budget > 0)
      cfg_.planner.checkpoint_fresh =
          static_cast<double>(jobs_checkpointed_) < opt_.checkpoint_budget * static_cast<double>(arrived_);
    if (opt_.scheduler) plan_ = opt_.scheduler(snap_, cfg_, opt_.seed + res_.passes);
    else schedule(snap_, cfg_, opt_.seed + res_.passes, planner_, plan_);  // plan_'s vectors reused
    if (opt_.on_monitor) [[unlikely]] report_monitor();
    // Changes from here on are relative to what this pass saw.
    snap_.running_since = snap_.running_version;
    snap_.running_touched.clear();
    Plan& plan = plan_;
    ++res_.passes;
    bool any_start = false;
    notes_n_ = 0;
    auto index_of = [&](JobId id) -> std::size_t {
      return (id >= 1 && id <= n_) ? static_cast<std::size_t>(id - 1) : n_;
    };
    if (!plan.updates.empty()) apply_updates(plan.updates);
    // An overdue window job left waiting behind one started this pass (it
    // holds its cores this pass: nci.hpp window_quantum) gets the next
    // cycle at once.
    if (cfg_.nci.enabled && cfg_.nci.window_wait > 0) {
      std::vector<JobId> started;
      for (const Decision& d : plan.decisions)
        if (d.action == Action::Start) started.push_back(d.job);
      std::size_t over = 0;
      bool started_over = false;
      for (const Job& j : snap_.pending)
        if (window_overdue(j, now_, cfg_.nci)) {
          ++over;
          started_over |= std::find(started.begin(), started.end(), j.id) != started.end();
        }
      if (started_over && over > 1) wake_.push(now_ + 1);
    }
    // Stops first, so the cores they free are there for this pass's starts.
    for (const Decision& d : plan.decisions) {
      std::size_t idx = index_of(d.job);
      if (idx == n_) continue;
      bool stopped = false;
      switch (d.action) {
        case Action::Checkpoint: stopped = do_checkpoint(idx); break;
        case Action::Requeue: stopped = do_requeue(idx, d.pba_preemption); break;
        case Action::Suspend: stopped = do_suspend(idx, d.pba_preemption); break;
        default: break;
      }
      if (stopped && !pacc_.empty()) count_preemption(idx, d.reason);
    }
    for (Decision& d : plan.decisions) {
      std::size_t idx = index_of(d.job);
      if (idx == n_) continue;
      Hot& h = hot_[idx];
      switch (d.action) {
        case Action::Resume: do_resume(idx); break;
        case Action::Start:
          if (StartNote* sn = accept_start(idx, d.slots, d.placement)) {
            sn->place = std::move(d.placement);  // the plan is ours: no copy
            sn->backfilled = d.backfilled;
            any_start = true;
          }
          break;
        case Action::Reject:
          if (h.st == St::Pending) {
            h.st = St::Rejected;
            any_start = true;  // removed from pending below
            leaving_.push_back(idx);
          }
          break;
        case Action::Demote:
          if (h.st == St::Pending)
            for (Job& j : snap_.pending)
              if (j.id == d.job) {
                j.queue = d.queue;
                set_odd(idx, j);
              }
          break;
        default: break;
      }
    }
    // PlannerConfig::compact_starts: the fast path's starts (the decisions
    // above hold none of them; Resume, Checkpoint, Requeue and Suspend never
    // come with them), in the order made.
    for (const StartRecord& sr : plan.starts) {
      const std::size_t idx = index_of(sr.job);
      if (idx == n_) continue;
      const std::span<const Placement> place(plan.start_placements.data() + sr.first, sr.count);
      StartNote* sn = accept_start(idx, sr.slots, place);
      if (sn == nullptr) continue;
      // A placement buffer of a finished job (no allocation per start).
      if (pool_n_ > 0) sn->place.swap(place_pool_[--pool_n_]);
      copy_place(sn->place, place);
      sn->backfilled = false;
      any_start = true;
    }
    if (!any_start) return;
    {
      const auto by_idx = [](const StartNote& a, const StartNote& b) { return a.idx < b.idx; };
      const auto e = notes_.begin() + static_cast<std::ptrdiff_t>(notes_n_);
      if (!std::is_sorted(notes_.begin(), e, by_idx)) std::sort(notes_.begin(), e, by_idx);  // FIFO starts come sorted
      note_at_ = 0;
    }
    if (swap_pending_) {
      leave_swapped();
      return;
    }
    auto& pend = snap_.pending;
    // Pending stays sorted by internal id (arrivals in trace order, requeues
    // at their submit-order place): the leaving jobs are found by binary
    // search, and only the jobs behind the first of them move.
    leave_pos_.clear();
    for (std::size_t idx : leaving_) {
      const JobId id = jid(idx);
      auto it = std::lower_bound(pend.begin(), pend.end(), id, [](const Job& a, JobId b) { return a.id < b; });
      if (it == pend.end() || it->id != id) {  // not sorted after all: one sweep over every job
        leave_pos_.clear();
        break;
      }
      leave_pos_.push_back(static_cast<std::size_t>(it - pend.begin()));
    }
    const bool by_pos = !leave_pos_.empty();
    leaving_.clear();
    std::sort(leave_pos_.begin(), leave_pos_.end());
    leave_pos_.erase(std::unique(leave_pos_.begin(), leave_pos_.end()), leave_pos_.end());
    // One sweep moves every started job from pending to running.
    std::size_t w = by_pos ? leave_pos_.front() : 0;
    std::size_t next_leave = 0;
    for (std::size_t i = w; i < pend.size(); ++i) {
      if (by_pos && (next_leave == leave_pos_.size() || i != leave_pos_[next_leave])) {
        shift_job(pend[w++], pend[i]);  // w < i here: a job ahead of it left
        continue;
      }
      ++next_leave;
      if (!leave(static_cast<std::size_t>(pend[i].id - 1), pend[i])) {
        if (w != i) shift_job(pend[w], pend[i]);
        ++w;
      }
    }
    pend.resize(w);
    if (pend.empty()) snap_.pending_fifo = true;
  }

  // A pending job the last pass started (moved into running: its cores were
  // already taken when the decision was checked) or rejected leaves the
  // queue's books; false: it stays pending. Both compactions use it.
  bool leave(std::size_t idx, Job& job) {
    Rec& r = recs_[idx];
    Hot& h = hot_[idx];
    if (!h.starting && h.st != St::Rejected) return false;
    clear_odd(idx);
    slots_add(job.slots_min, -1);
    count_pending(idx, -1);
    if (h.starting) {
      h.starting = false;
      StartNote& sn = note_of(idx);
      add_running(idx, job, sn.slots, sn.place, sn.backfilled);
      sn.place.clear();
    } else {
      ++res_.rejected;
      if (ProjAcc* a = acc(idx); a && within_[idx] && r.first_start < 0) a->pend_within -= job.slots_min;
    }
    return true;
  }

  // swap_pending_: the jobs that start or are rejected leave pending, in id
  // order (as the FIFO sweep of pass() takes them); the last job fills each
  // hole, and pending_order drops their places.
  void leave_swapped() {
    auto& pend = snap_.pending;
    auto& ord = snap_.pending_order;
    std::sort(leaving_.begin(), leaving_.end());
    leaving_.erase(std::unique(leaving_.begin(), leaving_.end()), leaving_.end());
    // The FIFO places that empty (the order list ahead of the first stays).
    gone_.clear();
    for (std::size_t idx : leaving_) {
      if (pend_pos_[idx] < 0) continue;
      const auto p = static_cast<std::size_t>(pend_pos_[idx]);
      if (!leave(idx, pend[p])) continue;  // stays pending
      gone_.push_back(fifo_at_[p]);
      const std::size_t last = pend.size() - 1;
      if (p != last) {
        shift_job(pend[p], pend[last]);
        pend_pos_[pend[p].id - 1] = static_cast<std::int32_t>(p);
        fifo_at_[p] = fifo_at_[last];
        ord[fifo_at_[p]] = static_cast<std::uint32_t>(p);
        put_need(p, pend[p]);
      }
      pend.pop_back();
      snap_.pending_slots_min.pop_back();
      snap_.pending_min_duration.pop_back();
      pend_pos_[idx] = -1;
    }
    leaving_.clear();
    if (gone_.empty()) return;
    // The places between two that emptied move up by the number emptied
    // ahead of them: one plain loop a stretch (no test per entry).
    std::sort(gone_.begin(), gone_.end());
    std::size_t w = gone_.front();
    std::uint32_t* const o = ord.data();
    std::int32_t* const on = snap_.pending_order_slots_min.data();
    std::int32_t* const od = snap_.pending_order_min_duration.data();
    std::uint32_t* const at = fifo_at_.data();
    for (std::size_t g = 0; g < gone_.size(); ++g) {
      const std::size_t end = g + 1 < gone_.size() ? gone_[g + 1] : ord.size();
      std::size_t m = gone_[g] + 1;
      // Four entries a step (16-byte loads and stores; w < m, so a step's
      // stores never reach entries not yet loaded), then one at a time.
      for (; m + 4 <= end; m += 4, w += 4) {
        std::uint32_t p4[4];
        std::int32_t n4[4], d4[4];
        std::memcpy(p4, o + m, sizeof p4);
        std::memcpy(n4, on + m, sizeof n4);
        std::memcpy(d4, od + m, sizeof d4);
        std::memcpy(o + w, p4, sizeof p4);
        std::memcpy(on + w, n4, sizeof n4);
        std::memcpy(od + w, d4, sizeof d4);
        at[p4[0]] = static_cast<std::uint32_t>(w);
        at[p4[1]] = static_cast<std::uint32_t>(w + 1);
        at[p4[2]] = static_cast<std::uint32_t>(w + 2);
        at[p4[3]] = static_cast<std::uint32_t>(w + 3);
      }
      for (; m < end; ++m, ++w) {
        const std::uint32_t pos = o[m];
        o[w] = pos;
        on[w] = on[m];
        od[w] = od[m];
        at[pos] = static_cast<std::uint32_t>(w);
      }
    }
    ord.resize(w);
    snap_.pending_order_slots_min.resize(w);
    snap_.pending_order_min_duration.resize(w);
  }

  void summarize() {
    SimResult& s = res_;
    s.jobs = n_;
    s.per_job.resize(n_);
    double wsum = 0, bsum = 0, work = 0;
    std::size_t started = 0;
    std::vector<Time> waits;
    waits.reserve(n_);
    Time first_submit = n_ ? tr_.jobs[0].submit : 0, last_end = first_submit;
    for (std::size_t i = 0; i < n_; ++i) {
      const SwfJob& j = tr_.jobs[i];
      const Rec& r = recs_[i];
      const Hot& h = hot_[i];
      JobResult& o = s.per_job[i];
      o = {j.id, j.submit, j.run, j.estimate, j.procs, r.first_start, r.end, r.checkpoints, r.requeues,
           h.st == St::Rejected, ckpt_mark_[i] != 0};
      s.jobs_checkpointable += ckpt_mark_[i];
      if (r.checkpoints > 0) ++s.jobs_checkpointed;
      if (h.st == St::Pending) ++s.unstarted;
      if (r.first_start >= 0) {
        Time w = r.first_start - j.submit;
        wsum += static_cast<double>(w);
        s.max_wait = std::max(s.max_wait, w);
        waits.push_back(w);
        ++started;
      }
      if (r.end >= 0) {
        ++s.finished;
        double b = std::max(1.0, static_cast<double>(r.end - j.submit) /
                                     static_cast<double>(std::max<Time>(j.run, 10)));
        bsum += b;
        s.max_bsld = std::max(s.max_bsld, b);
        work += static_cast<double>(j.run) * j.procs;
        last_end = std::max(last_end, r.end);
      }
    }
    s.mean_wait = started ? wsum / static_cast<double>(started) : 0;
    if (!waits.empty()) {
      // Nearest rank: the smallest wait at or above 99 % of the started jobs.
      const std::size_t k = (waits.size() * 99 + 99) / 100 - 1;
      std::nth_element(waits.begin(), waits.begin() + static_cast<std::ptrdiff_t>(k), waits.end());
      s.p99_wait = waits[k];
    }
    s.mean_bsld = s.finished ? bsum / static_cast<double>(s.finished) : 0;
    s.makespan = last_end - first_submit;
    s.utilization = s.makespan > 0 ? work / (static_cast<double>(total_) * static_cast<double>(s.makespan)) : 0;
    if (opt_.projects) summarize_projects(first_submit);
  }

  void summarize_projects(Time first_submit) {
    const pba::ProjectPlan& plan = cfg_.pba.plan;
    const Time t0 = first_submit, t1 = std::max(now_, t0);
    const double span = static_cast<double>(std::max<Time>(1, t1 - t0));
    const Time threshold = cfg_.pba.preempt_after;
    res_.has_projects = true;
    res_.pending_threshold = threshold;
    res_.projects.resize(pacc_.size());
    if (cfg_.nci.enabled && cfg_.nci.window_wait > 0) {
      // The start window's stated bound (nci.hpp): window + quantum.
      res_.start_window = cfg_.nci.window_wait;
      res_.window_bound = window_bound(cfg_.nci);
      for (std::size_t i = 0; i < n_; ++i)  // still suspended at the end
        if (hot_[i].st == St::Suspended) res_.max_suspension = std::max(res_.max_suspension, now_ - recs_[i].suspended_at);
      // Jobs that fit beside every project's allocation at once: PBA may
      // hand the allocated slots back to the projects within its threshold,
      // so only these have room that no allocation can claim.
      int peak_alloc = 0;
      for (Time w = pba::week_start(pba::iso_week(t0)); w < t1; w += pba::kWeek) {
        int sum = 0;
        for (const auto& pd : plan.projects) sum += plan.allocated_slots(pd.name, w);
        peak_alloc = std::max(peak_alloc, sum);
      }
      res_.window_narrow_procs = std::max<std::int64_t>(0, total_ - peak_alloc);
      for (std::size_t i = 0; i < n_; ++i) {
        if (hot_[i].st == St::Rejected) continue;
        const Time w = (recs_[i].first_start >= 0 ? recs_[i].first_start : t1) - tr_.jobs[i].submit;
        if (w > res_.window_bound) ++res_.jobs_past_window;
        res_.max_wait_past_window = std::max(res_.max_wait_past_window, w - res_.window_bound);
        if (tr_.jobs[i].procs <= res_.window_narrow_procs) {
          if (w > res_.window_bound) ++res_.narrow_jobs_past_window;
          res_.max_wait_past_window_narrow = std::max(res_.max_wait_past_window_narrow, w - res_.window_bound);
        }
      }
    }
    std::vector<double> wsum(pacc_.size(), 0);
    std::vector<std::size_t> waited(pacc_.size(), 0);
    for (std::size_t i = 0; i < n_; ++i) {
      const std::size_t p = static_cast<std::size_t>(proj_[i]);
      ProjectResult& o = res_.projects[p];
      const Rec& r = recs_[i];
      const Hot& h = hot_[i];
      if (h.st == St::Rejected) continue;
      ++o.jobs;
      const Time w = (r.first_start >= 0 ? r.first_start : t1) - tr_.jobs[i].submit;
      wsum[p] += static_cast<double>(w);
      ++waited[p];
      o.max_wait = std::max(o.max_wait, w);
      if (within_[i]) {
        ++o.allocated_jobs;
        o.max_wait_past_threshold = std::max(o.max_wait_past_threshold, w - threshold);
      }
    }
    for (std::size_t p = 0; p < pacc_.size(); ++p) {
      ProjectResult& o = res_.projects[p];
      o.name = p < plan.projects.size() ? plan.projects[p].name : "(none)";
      o.mean_wait = waited[p] ? wsum[p] / static_cast<double>(waited[p]) : 0;
      o.mean_slots_used = pacc_[p].used_int / span;
      o.su_charged = pacc_[p].su;
      o.preemptions_suffered = pacc_[p].suffered;
      o.preemptions_caused = pacc_[p].caused;
      if (p < plan.projects.size()) {
        if (ledger_ && ledger_->has_grant(o.name, t1)) {
          o.has_grant = true;
          o.grant_left = ledger_->grant_left(o.name, t1);
        }
        // The weekly allocations over [t0, t1), weighted by their overlap.
        double area = 0;
        for (Time w = pba::week_start(pba::iso_week(t0)); w < t1; w += pba::kWeek) {
          const Time a = std::max(w, t0), b = std::min(w + pba::kWeek, t1);
          const int slots = plan.allocated_slots(o.name, w);
          o.allocated_peak = std::max<Time>(o.allocated_peak, slots);
          if (b > a) area += static_cast<double>(slots) * static_cast<double>(b - a);
        }
        o.allocated_slots = area / span;
      }
    }
  }
};

std::string num(double v) {
  char b[64];
  std::snprintf(b, sizeof b, "%.6g", v);
  return b;
}

}  // namespace

std::vector<Queue> project_queues(const pba::ProjectPlan& plan, const SchedConfig& cfg) {
  std::vector<Queue> qs = plan.queues;
  if (qs.empty()) {
    // nci-pbs-policy.txt "Queue structure": express 3, normal 1, bonus 0 SU;
    // its bounds are site defaults, lifted for SWF jobs (any size/runtime).
    qs = nci_default_queues();
    for (Queue& q : qs) {
      q.max_walltime = 0;
      q.max_cpus = 0;
      q.max_mem_mb = 0;
      q.max_jobfs_mb = 0;
    }
  }
  // Free queues below every other one, unless the plan declares them: NCI
  // demotes a project with no grant left to its bonus queue; PBA's
  // pre-qualification demotes to its lowest queue (idle slots only).
  if (cfg.nci.enabled) add_lowest_queue(qs, cfg.nci.bonus_queue);
  if (cfg.pba.enabled) add_lowest_queue(qs, cfg.pba.lowest_queue);
  return qs;
}

void use_projects(SimOptions& opt, const pba::ProjectPlan& plan, bool nci) {
  opt.projects = true;
  SchedConfig& c = opt.sched;
  c.pba.enabled = true;
  c.pba.plan = plan;
  c.pba.require_project_tag = false;  // trace jobs of no project stay normal jobs
  if (nci) {
    c.nci.enabled = true;
    c.nci.require_vmem = c.nci.require_jobfs = false;  // SWF carries no memory
    c.pba.resume_suspended = false;                     // NCI resumes itself
    c.pba.suspended_hold_cores = c.nci.claim_suspended_cores;  // and holds their cores
  }
  c.nci.queues = project_queues(plan, c);
  if (!nci_find_queue(c.nci.queues, c.nci.default_queue)) c.nci.default_queue = c.nci.queues.front().name;
}

SimResult simulate(const SwfTrace& trace, const SimOptions& opt) {
  Simulator s(trace, opt);
  return s.run();
}

std::string json_string(const std::string& s) {
  std::string o = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    if (static_cast<unsigned char>(c) >= 0x20) o += c;
  }
  return o + "\"";
}

std::string to_json(const SimResult& r, const JsonFields& labels) {
  std::string o = "{";
  auto kv = [&](const std::string& k, const std::string& v) {
    if (o.size() > 1) o += ", ";
    o += json_string(k);
    o += ": ";
    o += v;
  };
  for (const auto& [k, v] : labels) kv(k, v);
  kv("jobs", std::to_string(r.jobs));
  kv("finished", std::to_string(r.finished));
  kv("rejected", std::to_string(r.rejected));
  kv("unstarted", std::to_string(r.unstarted));
  kv("utilization", num(r.utilization));
  kv("mean_wait", num(r.mean_wait));
  kv("max_wait", std::to_string(r.max_wait));
  kv("p99_wait", std::to_string(r.p99_wait));
  kv("mean_bsld", num(r.mean_bsld));
  kv("max_bsld", num(r.max_bsld));
  kv("makespan", std::to_string(r.makespan));
  kv("preemptions", std::to_string(r.preemptions));
  kv("checkpoints", std::to_string(r.checkpoints));
  kv("checkpoint_cost_total", std::to_string(r.checkpoint_cost_total));
  kv("idle_core_seconds_waiting", num(r.idle_while_waiting));
  kv("jobs_checkpointable", std::to_string(r.jobs_checkpointable));
  kv("jobs_checkpointed", std::to_string(r.jobs_checkpointed));
  kv("checkpoint_seconds", std::to_string(r.checkpoint_seconds));
  kv("restart_cost_total", std::to_string(r.restart_cost_total));
  kv("deferred_starts", std::to_string(r.deferred_starts));
  kv("passes", std::to_string(r.passes));
  kv("skipped_passes", std::to_string(r.skipped_passes));
  kv("machine_procs", std::to_string(r.machine_procs));
  kv("sim_seconds", num(r.sim_seconds));
  if (r.has_projects) {
    std::string p = "{";
    for (const ProjectResult& x : r.projects) {
      if (p.size() > 1) p += ", ";
      p += json_string(x.name) + ": {";
      p += "\"allocated_slots\": " + num(x.allocated_slots);
      p += ", \"allocated_peak\": " + std::to_string(x.allocated_peak);
      p += ", \"mean_slots_used\": " + num(x.mean_slots_used);
      p += ", \"jobs\": " + std::to_string(x.jobs);
      p += ", \"allocated_jobs\": " + std::to_string(x.allocated_jobs);
      p += ", \"mean_wait\": " + num(x.mean_wait);
      p += ", \"max_wait\": " + std::to_string(x.max_wait);
      p += ", \"max_wait_past_threshold\": " + std::to_string(std::max<Time>(0, x.max_wait_past_threshold));
      p += ", \"su_charged\": " + num(x.su_charged);
      p += ", \"grant_left\": " + (x.has_grant ? num(x.grant_left) : std::string("null"));
      p += ", \"preemptions_suffered\": " + std::to_string(x.preemptions_suffered);
      p += ", \"preemptions_caused\": " + std::to_string(x.preemptions_caused);
      p += "}";
    }
    kv("pending_threshold", std::to_string(r.pending_threshold));
    if (r.start_window > 0) {
      kv("start_window", std::to_string(r.start_window));
      kv("window_bound", std::to_string(r.window_bound));
      kv("jobs_past_window", std::to_string(r.jobs_past_window));
      kv("max_wait_past_window", std::to_string(r.max_wait_past_window));
      kv("window_narrow_procs", std::to_string(r.window_narrow_procs));
      kv("narrow_jobs_past_window", std::to_string(r.narrow_jobs_past_window));
      kv("max_wait_past_window_narrow", std::to_string(r.max_wait_past_window_narrow));
      kv("window_quantum", std::to_string(r.window_bound - r.start_window));
      kv("max_suspension", std::to_string(r.max_suspension));
    }
    kv("projects", p + "}");
  }
  o += "}";
  return o;
}

std::string starts_csv(const SimResult& r) {
  std::string o;
  o.reserve(r.per_job.size() * 16);
  for (const JobResult& j : r.per_job) {
    o += std::to_string(j.id);
    o += ',';
    o += std::to_string(j.first_start);
    o += '\n';
  }
  return o;
}

std::string gantt_svg(const SimResult& r, Time from, Time to) {
  if (to <= from) to = from + 1;
  const int rows = std::max(1, r.machine_procs);
  const double W = 1200, H = std::min(2400.0, std::max(200.0, rows * 2.0)), left = 60, top = 30;
  const double rowh = H / rows, sx = W / static_cast<double>(to - from);
  std::string o;
  char b[512];
  std::snprintf(b, sizeof b,
                "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" font-family=\"sans-serif\" "
                "font-size=\"11\">\n<rect x=\"%.0f\" y=\"%.0f\" width=\"%.0f\" height=\"%.0f\" fill=\"#f4f4f4\" stroke=\"#888\"/>\n"
                "<text x=\"%.0f\" y=\"18\">t = %lld .. %lld s, %d processors</text>\n",
                W + left + 20, H + top + 40, left, top, W, H, left, static_cast<long long>(from),
                static_cast<long long>(to), rows);
  o += b;
  // Rows are assigned by first fit in start order (the same packing the
  // simulator's capacity check guarantees), so concurrent jobs never overlap.
  std::vector<std::size_t> order(r.segments.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b2) { return r.segments[a].start < r.segments[b2].start; });
  std::set<int> free_rows;
  for (int i = 0; i < rows; ++i) free_rows.insert(i);
  using End = std::pair<Time, std::size_t>;
  std::priority_queue<End, std::vector<End>, std::greater<End>> ends;
  std::vector<std::vector<int>> held(r.segments.size());
  for (std::size_t k : order) {
    const Segment& sg = r.segments[k];
    if (sg.start >= to) break;
    while (!ends.empty() && ends.top().first <= sg.start) {
      for (int row : held[ends.top().second]) free_rows.insert(row);
      held[ends.top().second].clear();
      ends.pop();
    }
    for (int i = 0; i < sg.slots && !free_rows.empty(); ++i) {
      held[k].push_back(*free_rows.begin());
      free_rows.erase(free_rows.begin());
    }
    ends.push({sg.end, k});
    if (sg.end <= from) continue;
    double x0 = left + static_cast<double>(std::max(sg.start, from) - from) * sx;
    double x1 = left + static_cast<double>(std::min(sg.end, to) - from) * sx;
    unsigned hue = static_cast<unsigned>((sg.id * 2654435761u) % 360u);
    // One rectangle per run of consecutive rows.
    const std::vector<int>& hr = held[k];
    for (std::size_t a = 0; a < hr.size();) {
      std::size_t z = a;
      while (z + 1 < hr.size() && hr[z + 1] == hr[z] + 1) ++z;
      std::snprintf(b, sizeof b,
                    "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" fill=\"hsl(%u,60%%,60%%)\" "
                    "stroke=\"%s\" stroke-width=\"0.3\"><title>job %llu: %lld..%lld, %d procs%s</title></rect>\n",
                    x0, top + hr[a] * rowh, std::max(0.5, x1 - x0), (static_cast<double>(z - a + 1)) * rowh, hue,
                    sg.checkpointed ? "#c00" : "#333", static_cast<unsigned long long>(sg.id),
                    static_cast<long long>(sg.start), static_cast<long long>(sg.end), sg.slots,
                    sg.checkpointed ? " (checkpointed)" : "");
      o += b;
      a = z + 1;
    }
  }
  std::snprintf(b, sizeof b, "<text x=\"%.0f\" y=\"%.0f\">time (s)</text>\n</svg>\n", left + W / 2, H + top + 25);
  o += b;
  return o;
}

}  // namespace corral::sim
