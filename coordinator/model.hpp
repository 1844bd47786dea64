// The data model of Corral's scheduling core.
//
// The core is a pure function: a Snapshot of the cluster and its queue goes in,
// a Plan of decisions comes out (see schedule.hpp). No I/O, no clock, no
// sockets, no global state: time (`Snapshot::now`) and randomness (a seed) are
// passed in, so the live coordinator and the trace simulator drive the very
// same code and tests are deterministic.
//
// Units everywhere: time in whole seconds (the caller's epoch; the simulator
// uses trace time), memory and disk in MiB, cpus as cores ("slots").
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <vector>

namespace corral {

using Time = std::int64_t;
using JobId = std::uint64_t;

inline constexpr Time kForever = std::numeric_limits<Time>::max() / 4;

// Named amounts: consumable capacities or requests ("license" -> 4).
using Amounts = std::map<std::string, std::int64_t>;

// ---------------------------------------------------------------- cluster --

struct Node {
  std::string name;
  int cores = 1;                 // schedulable cores (slots)
  std::int64_t mem_mb = 0;       // 0: memory not tracked on this node
  std::int64_t jobfs_mb = 0;     // local scratch; 0: not tracked
  Amounts consumables;           // host-level consumables (SGE complex_values)
  std::vector<int> core_numa;    // optional: NUMA node of each core, for placement
  bool up = true;                // down nodes receive nothing
};

// A queue: a class of service. Grid Engine queue-level consumables and slot
// limits; NCI bounds and charge factor (nci-pbs-policy.txt "Queue structure").
struct Queue {
  std::string name;
  int priority = 0;              // higher runs first (express > normal > bonus)
  int slots = 0;                 // cluster-wide slot limit of the queue; 0: none
  Amounts consumables;           // queue-level consumables
  std::vector<std::string> hosts;  // empty: every node
  double charge_factor = 1.0;    // service units per cpu-hour of walltime
  // Upper bounds on requests (0: unbounded).
  Time max_walltime = 0;
  int max_cpus = 0;
  std::int64_t max_mem_mb = 0;
  std::int64_t max_jobfs_mb = 0;
};

// --------------------------------------------------------------------- jobs --

enum class PreemptMode : std::uint8_t { Requeue, Suspend };

struct Job {
  JobId id = 0;
  std::string name;
  std::string user;
  std::string group;
  std::string project;
  std::string queue;             // empty: the default queue
  std::string flow_step;         // PBA flow step (synthesis, verification, ...)
  std::string pe;                // parallel environment (qsub -pe NAME); empty: none

  Time submit = 0;
  Time walltime = 0;             // requested limit; 0: none (default_duration applies)
  Time estimate = 0;             // planning estimate if set (prediction, split
                                 // factor); 0: walltime is the estimate
  Time predicted = 0;            // predicted run time, read by the queue order
                                 // only (0: the estimate); plans keep estimate
  int slots_min = 1;             // cpus, or a parallel-environment slot range
  int slots_max = 1;
  std::int64_t mem_mb = 0;       // whole job
  std::int64_t jobfs_mb = 0;     // whole job
  Amounts consumables;           // per slot, as in Grid Engine

  bool reserve = false;          // qsub -R y
  bool immediate = false;        // qsub -now y: starts in this pass or is rejected,
                                 // never reserved (sge6-reservation-backfill.txt, -R)
  bool checkpointable = false;   // may be checkpointed and requeued
  PreemptMode preempt = PreemptMode::Requeue;

  // Policy state carried across cycles (updated through Plan::updates).
  double priority = 0;           // higher first
  int cycles_pending = 0;
  int requeues = 0;              // every requeue and checkpoint (any stage)
  int pba_preemptions = 0;       // times PBA's preemption requeued it (its suspensions
                                 // do not count; PbaConfig::max_requeues bounds these only)
  double last_start_priority = 0;
  Time work_done = 0;            // seconds of work saved by checkpoints; a restart
                                 // only has (run time - work_done) left
  Time first_start = -1;         // first time it ever started (-1: never)
  Time age_at = 0;               // aged from this time on if before its aging bound
                                 // (OrderConfig::aging; 0: none)

  bool operator==(const Job&) const = default;
};

// Where (part of) a job runs: a node, a number of slots there, and the
// concrete cores chosen on that node.
struct Placement {
  std::uint32_t node = 0;        // index into Snapshot::nodes
  std::uint32_t slots = 0;
  std::vector<int> cores;        // core indices on that node (may be empty when
                                 // the caller does not track cores)
  // Consecutive nodes this entry stands for: node, node + 1, ...,
  // node + count - 1, each with `slots` slots. Above 1 only in plans of a
  // planner configured with PlannerConfig::node_ranges (cores then empty),
  // and in running entries made from them; 1 everywhere else.
  std::uint32_t count = 1;
};

struct RunningJob {
  Job job;
  Time start = 0;
  Time expected_end = 0;         // start + estimate + PlannerConfig::duration_offset
                                 // (planning, may be extended; the caller adds the offset,
                                 // as the planner does to pending jobs)
  int slots = 0;                 // slots actually granted (within the job's range)
  std::vector<Placement> placement;
  bool suspended = false;        // frozen: cores free, memory/jobfs still held
  bool backfilled = false;       // started ahead of a reservation (checkpoint policy)
  Time suspended_for = 0;        // total seconds spent suspended so far
  Time suspended_since = -1;     // start of the current suspension (-1: unknown)
  bool stopping = false;         // being checkpointed: holds its cores until
                                 // expected_end, then leaves (no preemption victim)
  Time backfill_estimate = 0;    // with backfilled: its split estimate when it started
                                 // (its window ends at start + this); 0: backfill_duration()
};

// Everything the core may look at for one pass.
struct Snapshot {
  Time now = 0;
  std::vector<Node> nodes;
  std::vector<Queue> queues;
  Amounts global;                // cluster-wide consumables (licences)
  std::vector<RunningJob> running;   // running and suspended
  std::vector<Job> pending;          // usually in submit order (the order stage sorts)
};

// ----------------------------------------------------------------- output --

enum class Action : std::uint8_t {
  Start,        // start `job` now on `placement` with `slots`
  Reserve,      // resources held for `job` from `at` (informational)
  Checkpoint,   // checkpoint and stop `job`, then requeue it (work kept)
  Requeue,      // stop `job` and put it back in the queue (work lost)
  Suspend,      // freeze `job` (cores released, memory held)
  Resume,       // thaw `job`
  Reject,       // `job` can never run as asked; `reason` says why
  Demote,       // move `job` to another queue (`queue`), e.g. PBA pre-qualification
};

struct Decision {
  Action action = Action::Start;
  JobId job = 0;
  Time at = 0;                   // when (now for Start; future for Reserve)
  int slots = 0;
  std::vector<Placement> placement;
  std::string queue;             // for Demote
  std::string reason;            // human-readable why (shown to users/admins)
  bool backfilled = false;       // Start: backfilled past a reservation under the
                                 // checkpoint policy (caller sets RunningJob::backfilled)
  bool pba_preemption = false;   // Suspend/Requeue by PBA's one-for-one preemption
                                 // (on a Requeue the caller adds 1 to Job::pba_preemptions)
};

// Per-job policy state changes the caller must store before the next pass.
struct JobUpdate {
  JobId job = 0;
  double priority = 0;
  int cycles_pending = 0;
};

// A Start decision in compact form (PlannerConfig::compact_starts): start
// `job` now on `slots` slots, placed on Plan::start_placements[first ..
// first + count). Never backfilled past a checkpoint reservation.
struct StartRecord {
  JobId job = 0;
  int slots = 0;
  std::uint32_t first = 0, count = 0;
};

// A Reserve decision in compact form (PlannerConfig::compact_reserves):
// `slots` slots held for `job` from `at` (no placement: nodes are chosen at
// start).
struct ReserveRecord {
  JobId job = 0;
  Time at = 0;
  int slots = 0;
};

struct Plan {
  Time now = 0;
  std::vector<Decision> decisions;
  std::vector<JobUpdate> updates;
  std::vector<std::string> monitor;  // MONITOR schedule-file lines for this pass
                                     // (empty unless enabled); caller writes them
  // Only for a caller that sets PlannerConfig::compact_starts (the
  // simulator): the planner's cores-only fast path gives its starts here, in
  // the order it made them, instead of as Start decisions (no Decision and no
  // heap block per start; schedule() keeps both buffers across passes).
  // Every other decision, and every start of the general path, stays in
  // `decisions`. Empty for every other caller.
  std::vector<StartRecord> starts;
  std::vector<Placement> start_placements;
  // The same for PlannerConfig::compact_reserves: the fast path's Reserve
  // decisions, in the order made. Empty for every other caller.
  std::vector<ReserveRecord> reserves;
};

// What the ordering and policy stages of a pass hand to the planner.
struct PassState {
  std::vector<std::uint32_t> order;  // indices into Snapshot::pending, best first;
                                     // a pending job missing here is not started
  std::vector<JobId> freed;          // running jobs stopped/suspended this pass:
                                     // the planner treats their cores as free
                                     // (a suspended job's memory stays held)
  std::size_t pinned = 0;            // the first `pinned` jobs of order keep their
                                     // place and order in later policy stages
                                     // (PBA's allocated class; NCI's suspenders)
  // Set by order_pending when `order` is exactly the caller's
  // PassHints::pending.order (fifo, nothing moved by aging); schedule()
  // clears it when a later stage may reorder. The planner then takes it for
  // the check it would make (one memcmp). A caller that changes `order`
  // afterwards must clear it.
  bool order_is_pending_order = false;
};

}  // namespace corral
