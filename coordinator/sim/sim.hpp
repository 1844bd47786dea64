// Trace-driven simulation: replays an SWF trace through the core's schedule()
// in simulated time. This is a driver, not the core: it may do I/O and read the
// clock (for its own speed figure), the core it calls may not.
//
// Event rules (SWF convention, so results compare with other simulators): at
// one instant, completions first, then arrivals, then ONE scheduling pass.
// The simulator keeps one Snapshot and mutates it between passes (started jobs
// move from pending to running, finished ones are erased); it never rebuilds it.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "coordinator/nci/report.hpp"
#include "coordinator/schedule.hpp"
#include "coordinator/sim/predict.hpp"
#include "coordinator/sim/swf.hpp"

namespace corral::sim {

struct SimOptions {
  SchedConfig sched;           // policy, order, planner settings (its duration offset is
                               // replaced by duration_offset below)
  // Grid Engine's DURATION_OFFSET (`corral sim --duration-offset`): added to
  // every planned duration, pending and running. 0 by default: SWF run times
  // are exact, and the published comparisons (bench/sim) use 0.
  Time duration_offset = 0;
  int nodes = 0;               // 0: the trace's machine size, as single-core nodes
  int cores = 1;               // cores per node
  bool predict = false;        // run-time prediction from users' history (predict.hpp)
  Predictor predictor = Predictor::Mean2;  // with `predict`: which (default EASY++)
  // With `predict`: the prediction orders the queue (OrderConfig, Job::predicted)
  // but plans nothing: reservations and backfills use the requested times.
  bool predict_order_only = false;
  // With `predict`: when a user's job ends, that user's queued jobs are
  // predicted again from the new history (EASY++ predicts only at submit).
  bool repredict = false;
  // With `predict`: RunPredictor::set_burst_gap (0: off) and set_scout_min.
  Time burst_gap = 0;
  std::uint32_t scout_min = 2;
  // > 0: a wide job (OrderConfig::wide_fraction) also ages (Job::age_at) once
  // it has waited this many times the backlog ahead of it as it arrived: the
  // core-seconds the running and queued jobs still have to run (predicted,
  // else requested) over the machine's cores, about what FIFO would make it
  // wait. 0: off.
  double aging_backlog = 0;
  Time checkpoint_cost = 60;   // s a checkpointed job holds its resources longer
  Time restart_cost = 60;      // s more a restarted job needs
  std::uint64_t seed = 1;
  // Fraction of the jobs marked checkpointable (Job::checkpointable), drawn
  // with `seed` (checkpointable.hpp): only those are ever checkpointed or
  // preempted by checkpoint. 1: every job (the default), 0: none.
  double checkpointable = 1.0;
  // > 0: at most about this fraction of the jobs arrived so far are ever
  // checkpointed; once reached, only jobs checkpointed before may be again
  // (PlannerConfig::checkpoint_fresh). 0: no budget.
  double checkpoint_budget = 0;
  std::size_t max_jobs = 0;    // 0: all; else only the first N usable jobs
  bool record_segments = false;  // keep every run segment and its reservation (for pictures)
  // Called every ~1% of events with the fraction done (progress bar).
  std::function<void(double)> progress;
  // Set: MONITOR on (PlannerConfig::monitor, sge6-reservation-backfill.txt
  // section 2d), called after every scheduling pass with that pass's lines,
  // job ids the trace's, the "::::::::" that begins the interval first. The
  // caller writes the schedule file (`corral sim --monitor FILE`). The
  // replay's cores-only fast paths are off with it (the lines need hosts).
  std::function<void(const std::vector<std::string>&)> on_monitor;
  // Hook for later parts (e.g. `--projects FILE` of PBA/NCI): called once with
  // the initial snapshot and config, then for every job as it arrives, so a
  // part can set projects, queues and allocations. Empty: nothing.
  std::function<void(Snapshot&, SchedConfig&)> on_setup;
  std::function<void(Job&, const SwfJob&)> on_arrival;
  // The pass to run; empty: corral::schedule (tests script their own). It
  // gets the snapshot alone, as any caller of schedule() has it.
  std::function<Plan(const Snapshot&, const SchedConfig&, std::uint64_t)> scheduler;
  // Called before every pass with the snapshot and the promises the replay
  // makes about it (planner/pass_hints.hpp), so tests can check them.
  std::function<void(const Snapshot&, const PassHints&)> on_pass;
  // Project allocations (`corral sim --projects FILE`, set by use_projects):
  // jobs get their project from sched.pba.plan (ProjectPlan::project_of),
  // service units are charged with the NCI ledger (the plan's queues and
  // grants) and SimResult::projects is filled.
  bool projects = false;
  // With `projects`: build the per-project and per-user report of every week
  // (nci-pbs-policy.txt "Charging"; weeks counted from the trace start) into
  // SimResult::weekly. Service units land in the week a running stretch ends.
  bool weekly_reports = false;
};

// Configures `opt` for a project plan: PBA on (untagged trace jobs stay
// normal jobs), the plan's queues (NCI's three by default, unbounded for SWF
// jobs, plus PBA's lowest queue), and with `nci` the NCI stage too (PBA then
// leaves resuming to NCI: pba.hpp resume_suspended).
void use_projects(SimOptions& opt, const pba::ProjectPlan& plan, bool nci);
// The queue table use_projects installs (what the ledger charges by).
std::vector<Queue> project_queues(const pba::ProjectPlan& plan, const SchedConfig& cfg);

// Per-project figures of a run with SimOptions::projects.
struct ProjectResult {
  std::string name;                 // "(none)": jobs of no project
  double allocated_slots = 0;       // weekly allocation, time-weighted mean over the run
  Time allocated_peak = 0;          // largest weekly allocation during the run
  double mean_slots_used = 0;       // slots its running jobs held, time-weighted mean
  std::size_t jobs = 0;
  std::size_t allocated_jobs = 0;   // jobs within the allocation when submitted
  double mean_wait = 0;             // first start - submit (unstarted: end of run)
  Time max_wait = 0;
  // Longest (wait - pending threshold - 1 s: PBA preempts for a job pending
  // more than the threshold, the next second at the earliest) of a job submitted within the
  // allocation (its slots + the project's running and allocated pending
  // slots <= the allocation of that week); 0 if none waited longer.
  Time max_wait_past_threshold = 0;
  double su_charged = 0;
  bool has_grant = false;
  double grant_left = 0;            // at the end of the run, current period
  std::size_t preemptions_suffered = 0;  // its jobs requeued, suspended or checkpointed
  std::size_t preemptions_caused = 0;    // preemptions whose reason names one of its jobs
};

// One contiguous stretch of a job on the machine.
struct Segment {
  JobId id = 0;          // trace id
  Time start = 0, end = 0;
  int slots = 0;
  std::vector<Placement> placement;  // as granted (may be empty; node ranges: Placement::count)
  bool checkpointed = false;         // ended by a checkpoint (not completion)
  bool requeued = false;             // ended by a requeue (queued again, work lost)
  bool suspended = false;            // ended by a suspension (resumed later)
  // The start the job's reservation promised at the last pass before this
  // segment began (-1: it held none then, e.g. backfilled or resumed).
  Time reserved_at = -1;
};

struct JobResult {
  JobId id = 0;          // trace id
  Time submit = 0, run = 0, estimate = 0;
  int procs = 0;
  Time first_start = -1;  // -1: never started
  Time end = -1;          // final completion (-1: never finished)
  int checkpoints = 0;
  int requeues = 0;
  bool rejected = false;
  bool checkpointable = false;
  long user = -1;        // the trace's user id (-1: unknown)
};

struct SimResult {
  std::size_t jobs = 0;         // jobs in the replay
  std::size_t finished = 0;
  std::size_t rejected = 0;     // the core said they can never run
  std::size_t unstarted = 0;    // left pending when no event remained
  double utilization = 0;       // useful proc-seconds / (procs * makespan)
  double mean_wait = 0;         // first start - submit
  Time max_wait = 0;
  double mean_bsld = 0;         // max(1, (end-submit)/max(run,10)) over finished jobs
  double max_bsld = 0;
  Time makespan = 0;            // last end - first submit
  std::size_t preemptions = 0;  // requeues and suspensions (not checkpoints)
  std::size_t checkpoints = 0;
  Time checkpoint_cost_total = 0;   // s x slots held by checkpoints
  Time restart_cost_total = 0;      // s x slots spent restarting
  // Idle core-seconds while some job was queued: the integral over time of
  // the cores held by no job (running, or writing a checkpoint), counted only
  // while at least one job waits in the queue.
  double idle_while_waiting = 0;
  std::size_t jobs_checkpointable = 0;  // jobs marked checkpointable
  std::size_t jobs_checkpointed = 0;    // jobs checkpointed at least once
  Time checkpoint_seconds = 0;          // s spent writing checkpoints, summed over them
  Time p99_wait = 0;                    // 99th percentile of first start - submit (nearest rank)
  std::size_t deferred_starts = 0;  // starts the machine could not honour at once
  std::size_t passes = 0;
  std::size_t skipped_passes = 0;   // passes known to be no-ops (no pending job fits)
  int machine_procs = 0;
  double sim_seconds = 0;       // wall-clock time of the replay (not parsing)
  std::vector<JobResult> per_job;   // in trace order (submit, id)
  std::vector<Segment> segments;    // if record_segments
  bool has_projects = false;        // SimOptions::projects: `projects` is in the JSON
  Time pending_threshold = 0;       // PbaConfig::preempt_after used for the figures
  std::vector<ProjectResult> projects;  // the plan's projects in file order, then "(none)"
  // NCI's start window as a time bound (projects with nci.window_wait > 0):
  // every job should first start within window_bound = start_window + the
  // window quantum (nci.hpp window_bound()) of its submit; jobs_past_window
  // counts those that did not, max_wait_past_window is the longest
  // (wait - window_bound), >= 0.
  Time start_window = 0;            // 0: no time window (nothing reported)
  Time window_bound = 0;
  std::size_t jobs_past_window = 0;
  Time max_wait_past_window = 0;
  // The same for the jobs of at most window_narrow_procs processors (the
  // machine minus the largest total of the weekly allocations): they fit
  // beside the allocations, which PBA may reclaim for the projects at any time.
  std::int64_t window_narrow_procs = 0;
  std::size_t narrow_jobs_past_window = 0;
  Time max_wait_past_window_narrow = 0;
  Time max_suspension = 0;              // longest single suspension (s), reported with the window
  std::vector<NciReport> weekly;        // SimOptions::weekly_reports: one per week
};

// Replays `trace` (its jobs must be sorted by submit, id; read_swf does that).
// Throws std::invalid_argument for impossible options (no machine size, ...).
SimResult simulate(const SwfTrace& trace, const SimOptions& opt);

// The result as one JSON object (no trailing newline), the caller's
// `labels` (an object) first.
std::string to_json(const SimResult& r, const nlohmann::ordered_json& labels = {});

// MONITOR lines of a replay name jobs by the simulator's ids (trace index +
// 1): rewrites them to the trace's ids (the on_monitor lines).
void monitor_trace_ids(std::vector<std::string>& lines, const SwfTrace& trace);

// Writes `id,start` lines, one per job in trace order (start -1 if never).
std::string starts_csv(const SimResult& r);

}  // namespace corral::sim
