// The replay engine (private to coordinator/sim): the Simulator class and
// the per-job records its parts share. Each part is defined in the file
// named for it: replay.cpp (setup and the event loop), arrivals.cpp,
// pass.cpp, pending.cpp, job_ends.cpp, preemption.cpp, projects.cpp and
// summary.cpp.
#pragma once

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <queue>
#include <span>
#include <stdexcept>
#include <type_traits>
#include <unordered_map>

#include "coordinator/nci/ledger.hpp"
#include "coordinator/sim/checkpointable.hpp"
#include "coordinator/planner/order.hpp"
#include "coordinator/sim/events.hpp"
#include "coordinator/sim/job_moves.hpp"
#include "coordinator/sim/sim.hpp"

namespace corral::sim::detail {

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

using MinHeap = std::priority_queue<Ev, std::vector<Ev>, std::greater<Ev>>;

class Simulator {
 public:
  Simulator(const SwfTrace& tr, const SimOptions& o);

  SimResult run();

 private:
  const SwfTrace& tr_;
  const SimOptions& opt_;
  SchedConfig cfg_;
  std::size_t n_ = 0;
  int cpn_ = 1;
  std::int64_t total_ = 0, used_ = 0;
  std::vector<int> node_used_;
  Snapshot snap_;
  PassHints hints_;  // what the planner may take as given about snap_ (pass_hints.hpp)
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
  // record_segments: every pass's time; each job's latest reservation (its
  // start) and the pass that made it.
  std::vector<Time> pass_times_, resv_at_, resv_made_;
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
  bool swap_pending_ = false;           // pending unordered, FIFO order in hints_.pending.order
  // Pending jobs that are not cores_only_job(); at 0 the snapshot promises
  // PendingHints::cores_only. Jobs put in pending by on_setup have no
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
    hints_.pending.cores_only = cores_only_ok_ && odd_pending_ == 0;
    // Every change of a queued job passes here: its entry of
    // PendingHints::slots_min follows (arrivals and requeues get theirs
    // in fifo_insert()).
    if (swap_pending_ && pend_pos_[idx] >= 0) {
      const auto pos = static_cast<std::size_t>(pend_pos_[idx]);
      put_need(pos, j);
      put_order_need(fifo_at_[pos], j);
    }
  }
  // Pending position pos's entries of PendingHints::slots_min and
  // min_duration, from its job j.
  void put_need(std::size_t pos, const Job& j) {
    hints_.pending.slots_min[pos] = j.slots_min;
    hints_.pending.min_duration[pos] = duration_floor(j);
  }
  // The same at FIFO place m: PendingHints::order_slots_min and
  // order_min_duration follow PendingHints::order.
  static std::int32_t min_duration32(const Job& j) {
    return static_cast<std::int32_t>(std::min<Time>(duration_floor(j), INT32_MAX));
  }
  void put_order_need(std::size_t m, const Job& j) {
    hints_.pending.order_slots_min[m] = j.slots_min;
    hints_.pending.order_min_duration[m] = min_duration32(j);
  }
  void clear_odd(std::size_t idx) {  // job idx leaves pending
    if (!hot_[idx].odd) return;
    hot_[idx].odd = false;
    --odd_pending_;
    hints_.pending.cores_only = cores_only_ok_ && odd_pending_ == 0;
  }
  std::vector<std::int32_t> pend_pos_;  // swap_pending_: per job, its position in pending (-1: none)
  std::vector<std::uint32_t> fifo_at_;  // swap_pending_: per pending position, its place in pending_order
  std::vector<std::uint32_t> gone_;     // scratch (leave_swapped): FIFO places that empty this pass

  // swap_pending_: pending position `pos` (just added) takes its FIFO place.
  void fifo_insert(std::size_t pos);

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

  void setup_projects();

  // Weekly reports: every week that ended by `t` (the snapshot as it stands at
  // the week's end, since nothing changes between events).
  std::int64_t report_week_ = 0;
  std::map<std::string, double> allocations_of(std::int64_t week) const;
  void report_weeks_until(Time t);

  std::int32_t none_project() const { return static_cast<std::int32_t>(pacc_.size()) - 1; }

  ProjAcc* acc(std::size_t idx) { return pacc_.empty() ? nullptr : &pacc_[static_cast<std::size_t>(proj_[idx])]; }

  void integrate(Time t) {
    if (pacc_.empty() || t <= last_t_) return;
    for (ProjAcc& a : pacc_) a.used_int += static_cast<double>(a.used) * static_cast<double>(t - last_t_);
    last_t_ = t;
  }

  // Service units for the running stretch that ends now (nci-pbs-policy.txt
  // "Charging": walltime in the running state x cpus x queue charge factor).
  void charge(std::size_t idx, const RunningJob& rj);

  // A preemption (requeue, suspension, checkpoint) was applied to job idx;
  // the decision's reason names the job it was made for ("... job N ...").
  void count_preemption(std::size_t idx, const std::string& reason);

  // Plan::updates (priority, cycles_pending) go into the jobs before any
  // decision is applied (pba.hpp contract), so PBA priorities and NCI's start
  // window advance from pass to pass.
  void apply_updates(const std::vector<JobUpdate>& ups);

  static JobId jid(std::size_t idx) { return static_cast<JobId>(idx + 1); }

  // Every change of snap_.running: a new RunningHints::version, and the position
  // in RunningHints::touched, so a kept Planner compares only these.
  void touch_running(std::int32_t pos) {
    ++hints_.running.version;
    hints_.running.touched.push_back(static_cast<std::uint32_t>(pos));
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

  Time predict(const SwfJob& s) const;

  // The prediction plans the job, or with predict_order_only only orders it
  // (the planner then plans with the request: no reservation slips when a
  // job outlives its prediction).
  void set_prediction(Job& j, const SwfJob& s) const {
    if (opt_.predict_order_only) j.predicted = predict(s);
    else j.estimate = predict(s);
  }

  void arrive(std::size_t idx);
  // Seconds the machine would need to run what is running and queued at
  // `now` (SimOptions::aging_backlog), the arriving job (last queued) aside.
  double backlog_seconds(Time now) const;

  // The job's project (the plan's members: ProjectPlan::project_of) and
  // whether it is within the project's allocation as it arrives.
  void arrive_project(std::size_t idx, Job& j);

  // Job j (a pending entry, moved from) starts on `place` (moved from).
  void add_running(std::size_t idx, Job& j, int slots, std::vector<Placement>& place, bool backfilled);

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
  void erase_running(std::size_t idx);

  // Placements name nodes p.node .. p.node + p.count - 1 (model.hpp).
  // Single-core nodes (cpn_ == 1) hold 0 or 1 slot each, so the nodes in use
  // are a bitset (busy_) and a range is checked, taken and released a word
  // at a time, not node by node. Other machines count slots per node (node_used_), and
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

  // How a segment ends: completion, checkpoint, requeue or suspension.
  enum class SegEnd { Done, Checkpoint, Requeue, Suspend };
  void segment(std::size_t idx, const RunningJob& rj, Time end, SegEnd how);

  // record_segments: this pass's time and each job's reservation in it.
  [[gnu::noinline, gnu::cold]] void note_reservations();

  void finish(std::size_t idx);

  // The user's queued jobs take the prediction of the new history (a burst
  // of identical jobs is judged by the first of them that ends).
  void repredict(long user);
  void count_pending(std::size_t idx, int d) {
    if (opt_.repredict && tr_.jobs[idx].user >= 0) pend_of_user_[tr_.jobs[idx].user] += d;
  }

  // Puts a stopped job back in the pending queue at its submit-order place.
  void requeue(std::size_t idx, Job&& j);

  void end_checkpoint(std::size_t idx);

  bool do_checkpoint(std::size_t idx);

  bool do_requeue(std::size_t idx, bool by_pba = false);

  bool do_suspend(std::size_t idx, bool by_pba = false);

  void do_resume(std::size_t idx);

  // EASY++: a job that outlives its prediction gets its expected end moved
  // to its requested time; it is never killed before that.
  void extend_predictions();

  // The pass's MONITOR lines to SimOptions::on_monitor, in the trace's ids
  // (kept out of line: pass() is the replay's hot path).
  [[gnu::noinline, gnu::cold]] void report_monitor();

  void pass();

  // A pending job the last pass started (moved into running: its cores were
  // already taken when the decision was checked) or rejected leaves the
  // queue's books; false: it stays pending. Both compactions use it.
  bool leave(std::size_t idx, Job& job);

  // swap_pending_: the jobs that start or are rejected leave pending, in id
  // order (as the FIFO sweep of pass() takes them); the last job fills each
  // hole, and pending_order drops their places.
  void leave_swapped();

  void summarize();

  void summarize_projects(Time first_submit);
};

}  // namespace corral::sim::detail
