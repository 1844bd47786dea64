// NCI National Facility policy (nci-pbs-policy.txt). Owned by the nci part;
// the planner part calls nci_stage() from schedule().
//
// What lives here (all pure: no I/O, no clock; time is Snapshot::now):
//   - validate_request(): the mandatory walltime/ncpus/vmem/jobfs requests and
//     the queue bounds ("Resource limits"), called at submit and in the pass;
//   - equal-access shuffling of each queue ("Queue shuffling");
//   - the suspension score and expansion factor ("Scoring factors");
//   - nci_stage(): one NCI scheduling cycle ("Job selection"): resume first,
//     then per queue in priority order, per shuffled job a priority-run, else
//     a parallel-run, with the start "window" so that no job starves.
// Charging and grants: ledger.hpp. Per-project reports: report.hpp.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "coordinator/model.hpp"

namespace corral {

// The three queues of "Queue structure": express 3 SU, normal 1 SU, bonus 0 SU
// per cpu-hour. The bounds are the initial defaults the document says are
// varied per site/project; callers pass their own table in Snapshot::queues.
std::vector<Queue> nci_default_queues();

// Weights of the suspension score ("Scoring factors"). Each factor enters
// non-linearly so that it only matters in extreme cases (the document's own
// remark about factor 3).
struct SuspendWeights {
  double xfactor = 1.5;     // penalty per ((XF-1)/(limit-1))^2 of the victim
  double cpus = 1.0;        // bonus per log2(suspender cpus / victim cpus)
  double running = 1.0;     // per doubling of victim-owner/suspender-owner running
                            // jobs beyond a dead zone of one doubling
  double done = 1.0;        // penalty per (victim fraction done)^2
  double wait = 1.0;        // bonus per (suspender's pending XF - 1)
};

struct NciConfig {
  bool enabled = false;

  // Queue table used when Snapshot::queues is empty.
  std::vector<Queue> queues = nci_default_queues();
  std::string default_queue = "normal";  // Job::queue empty
  std::string bonus_queue = "bonus";     // where a project with no grant left runs

  // Mandatory requests (a site without local disk may turn jobfs off; the SWF
  // simulator, whose traces carry no memory, turns vmem off).
  bool require_walltime = true;
  bool require_vmem = true;
  bool require_jobfs = true;

  // Grants: SUs left per project this period (the caller copies them from its
  // Ledger before each pass). A project listed with <= 0 left has its jobs
  // in non-bonus queues demoted to the bonus queue. Unlisted: not checked.
  std::map<std::string, double> grant_left;

  // Suspension ("Scoring factors").
  double xfactor_limit = 1.25;  // keep victims' expansion factor below this
  SuspendWeights weights;
  // Parallel-run: a job of at least this many cpus may suspend smaller jobs at
  // the same or lower runpriority when every victim scores >= this threshold.
  int parallel_min_cpus = 16;
  double parallel_min_score = 0.0;
  bool priority_run = true;
  bool parallel_run = true;
  // "Even if the scheduler decides to start a job in a given scheduling cycle,
  // that decision may be reversed later in that cycle after consideration of
  // (larger) jobs further down the queue": a parallel-run may take the cpus
  // of smaller jobs tentatively started on idle cpus earlier in the cycle
  // (they stay queued, nothing is suspended for them).
  bool reverse_starts = true;
  // A suspended job resumes on its own cores ("attempt to resume suspended
  // jobs" first in every cycle), so the planner must not hand its free cores
  // to other jobs meanwhile, or it never resumes and its XFactor grows
  // without bound: see nci_claims.
  bool claim_suspended_cores = true;

  // Start window ("Job start time window": every job starts "within a
  // reasonable window around the time when they become eligible to run"): a
  // job whose window has closed must start: it is tried before every other
  // job, may suspend any running job that is not itself protected, and holds
  // back later jobs that would delay it (the planner reserves for it).
  // Closed after `window_cycles` pending cycles (<= 0: never by cycles) or,
  // if `window_wait` > 0, `window_wait` seconds after it became eligible
  // (its submit time; a requeued job keeps it). The time form is a stated
  // bound (window_bound()): see window_quantum.
  int window_cycles = 48;
  Time window_wait = 0;
  // Minimum run quantum of the time window (window_wait > 0): a job that
  // started through its window (at least window_wait after its submit) is
  // not suspended by a later window job for window_quantum after its start,
  // so two wide window jobs do not take turns every cycle. A job that never
  // started and whose window closed window_quantum ago is OVERDUE: it is
  // served first among the window jobs (by window close) and may suspend any
  // running job not started or resumed in this very pass (protected, shielded
  // and allocated jobs included) and take the free cores suspended jobs hold.
  // So every job first starts within window_bound() = window_wait +
  // window_quantum of its submit, plus one cycle for each overdue job ahead
  // of it in the same cycle that cannot run beside it, provided the memory
  // and jobfs of suspended jobs leave it room (they stay held) and it fits
  // the up nodes. Suspensions it causes last until the cores are free again
  // (resume_window bounds them; measured: bench/projects/RESULTS.md,
  // max_suspension).
  Time window_quantum = -1;  // < 0: window_wait
  // Resume window (window_wait > 0): a job suspended this long (or longer)
  // resumes in the next cycle, first of all: the jobs on its cores are
  // suspended in turn and the free cores other suspended jobs hold are taken
  // (not if a core is unknown or was started/resumed on in this pass). So
  // suspension is bounded too: by resume_window, plus a cycle when its cores
  // were just taken. < 0: 3 x window_wait; 0: off.
  Time resume_window = -1;
  // Each pending cycle lowers a job's shuffle score by this many cpus, so a
  // bypassed job climbs its queue before its window closes.
  double age_cpus_per_cycle = 2.0;
};

// ---------------------------------------------------------------- checks --

struct NciVerdict {
  bool ok = true;
  std::string reason;  // empty when ok, else e.g. "walltime missing",
                       // "ncpus 64 above queue normal's bound of 32"
};

// The queue a job is in, after defaulting (nullptr if unknown).
const Queue* nci_find_queue(const std::vector<Queue>& queues, const std::string& name);

// Adds a free queue `name` below every queue of `qs` (priority one under the
// lowest, charge factor 0) unless `qs` has it: NCI's bonus queue (bonus jobs
// are free and run below every other queue, "Queue structure") and PBA's
// pre-qualification queue (idle slots only).
void add_lowest_queue(std::vector<Queue>& qs, const std::string& name);

// Mandatory requests and queue bounds: call at submit; nci_stage rejects the
// jobs that fail it. `queues` empty: cfg.queues.
NciVerdict validate_request(const Job& job, const std::vector<Queue>& queues,
                            const NciConfig& cfg = {});

// ---------------------------------------------------------------- scores --

// Equal-access score of each job in one queue ("Queue shuffling"): the cpus
// of all jobs ahead of it (running ones first, then pending ones in the given
// order) that belong to the same user or the same project.
// `pending` are the queued jobs of that queue in their current order.
std::vector<double> equal_access_scores(const std::vector<const Job*>& pending,
                                        const std::vector<const RunningJob*>& running);

// XFactor = (requested_walltime + projected_suspend_time) / requested_walltime,
// where the suspend time counts what it was already suspended plus what it is
// projected to be suspended now (the suspender's walltime).
double expansion_factor(const RunningJob& victim, Time projected_suspend);

// Suspension score of suspending `victim` so that `suspender` can start;
// higher means more favoured. `*_running` are the running-job counts of the
// owners (user or project, whichever is larger).
double suspension_score(const Job& suspender, const RunningJob& victim, Time now,
                        int suspender_owner_running, int victim_owner_running,
                        const NciConfig& cfg);

// Cpus a running job holds: its granted slots, else (none recorded) its
// request's minimum.
int held_cpus(const RunningJob& rj);

// The time a running job reaches its walltime: suspended time does not count
// ("walltime ... If a job is suspended, its wall clock time will also be suspended").
Time walltime_deadline(const RunningJob& rj);

// Has this job's start window closed (NciConfig::window_cycles / window_wait)?
bool window_closed(const Job& job, Time now, const NciConfig& cfg);
// Never started and its time window closed window_quantum ago: it may
// suspend any running job not started or resumed this pass (NciConfig).
bool window_overdue(const Job& job, Time now, const NciConfig& cfg);
// Started through its time window less than window_quantum ago: not a victim
// of a window job that is not overdue.
bool window_protected(const RunningJob& rj, Time now, const NciConfig& cfg);
// The effective window_quantum and resume_window (defaults resolved).
Time window_quantum(const NciConfig& cfg);
Time resume_window(const NciConfig& cfg);
// The stated bound on submit-to-first-start with a time window
// (window_wait + window_quantum; 0 when window_wait <= 0).
Time window_bound(const NciConfig& cfg);

// ----------------------------------------------------------------- cycle --

// One NCI scheduling cycle, before the planner. Emits Reject (bad requests),
// Demote (no grant left), Resume and Suspend decisions; decides the ORDER in
// which the planner starts jobs, and leaves the starts (placement,
// backfilling with the configured policy, reservations) to the planner:
//   - st.order becomes: jobs NCI started by suspending others (or by
//     reversing smaller starts) first, since they must start in this pass on
//     the cores freed for them; then jobs pinned by an earlier stage
//     (st.pinned: PBA's allocated class); then start-window jobs, longest
//     waiting first; then each queue in priority order, shuffled (equal
//     access). A start-window job that cannot start is thus the planner's
//     head: it reserves for it and backfills only around it, and NCI
//     suspends nothing more in that cycle.
//   - victims go into st.freed (their memory and jobfs stay held); jobs
//     already in st.freed on entry (PBA) count as freed.
//   - st.pinned becomes the number of jobs at the head of st.order that NCI
//     decided on (suspenders, then pinned).
// `seed` is unused (ties keep the order handed in, which is repeatable).
void nci_stage(const Snapshot& snap, const NciConfig& cfg, std::uint64_t seed,
               PassState& st, Plan& plan);

// After the planner: every job of st.order (as nci_stage left it) that was
// not started was bypassed, so its start window advances: a JobUpdate with
// cycles_pending + 1 (an update from PBA is amended instead).
// The snapshot the planner should plan on after nci_stage: the free cores of
// every job still suspended (not resumed this pass) are shown as held by it
// (a running entry with no memory, ending when its other cores are free plus
// its remaining run): the cores nci_stage kept for it (one claim rule, claim_order.hpp
// walk_claims: the earlier in claim order first when two claim a core).
// It also carries NCI's queue table when the snapshot has none (the planner
// finds queues in the snapshot only). Returns false (view untouched) when the
// snapshot can be planned as it is.
bool nci_claims(const Snapshot& snap, const NciConfig& cfg, const PassState& st, const Plan& plan,
                Snapshot& view);

void nci_settle(const Snapshot& snap, const NciConfig& cfg, const PassState& st, Plan& plan);

}  // namespace corral
