// Priority-based allocation of job slots to projects (pba-synopsys-patent.txt).
// schedule() calls pba_stage().
//
// Contract with the caller (simulator / coordinator), who stores job state
// between passes:
//   - apply Plan::updates (priority, cycles_pending) before applying Starts, so
//     a started job carries the priority it was started with;
//   - on Start: set Job::last_start_priority = Job::priority (and first_start);
//   - on Requeue / Checkpoint: Job::requeues += 1 and cycles_pending = 0 (PBA's
//     own Requeue decisions also come with an update saying so);
//   - on a Requeue with Decision::pba_preemption: also Job::pba_preemptions
//     += 1 (on_pba_preemption), the count max_requeues bounds (not on a Suspend);
//   - on Demote: Job::queue = Decision::queue.
//   - for throughput SLAs: count finished jobs per project in
//     PbaConfig::jobs_done.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "coordinator/model.hpp"
#include "coordinator/pba/calendar.hpp"
#include "coordinator/pba/plan_file.hpp"

namespace corral {

struct PbaConfig {
  bool enabled = false;
  // The project plan (projects, members, flows, weekly allocations, SLAs). It
  // is plain data handed to every pass, so a change takes effect next pass.
  pba::ProjectPlan plan;
  // Jobs finished so far per project (throughput SLA progress, caller-kept).
  std::map<std::string, int> jobs_done;

  // Priority arithmetic (patent: default 20, +100 PBA, +1 per cycle, +10 on requeue).
  double default_priority = 20;
  double allocation_increment = 100;
  double cycle_increment = 1;
  double requeue_increment = 10;
  // Patent: "ensure that a job that has already been re-queued a certain
  // number of times is not re-queued again" (the re-queues that free a slot
  // for an allocated job). Bounds Job::pba_preemptions, PBA's own requeues of
  // the job only: not its suspensions (a job that chose suspend keeps its
  // work and is never bounded), nor other stages' requeues and checkpoints
  // (checkpoint backfilling, selective preemption, NCI, an admin's requeue).
  int max_requeues = 3;            // a job PBA requeued this often is not preempted again

  // Preemption ("pending for more than a predetermined period").
  bool preempt = true;
  Time preempt_after = 300;        // an allocated job pending MORE than this may preempt
  Time victim_start_bucket = 60;   // starts this close count as "started at the same time"
  // Resume suspended jobs (PBA's suspended victims) once their cores are free
  // and no allocated job waits for them. Turn off when nci_stage runs too: it
  // has its own resume step.
  bool resume_suspended = true;
  // Count the free cores of suspended jobs as busy (NCI holds them for the
  // job's resume: NciConfig::claim_suspended_cores). Set with nci_stage.
  bool suspended_hold_cores = false;

  // Pre-qualification: a job failing it is demoted to this queue (runs only on
  // idle slots, first to be preempted).
  bool require_project_tag = true;
  std::string lowest_queue = "lowest";

  // Service levels: extra (non-persisted) ordering priority for a throughput
  // SLA project, scaled by how far behind its deadline it is (0..1).
  double sla_boost = 50;
};

// Pre-qualification, priority arithmetic, ordering and preemption for one pass:
// may reorder st.order, add to st.freed, and append decisions/updates to plan.
void pba_stage(const Snapshot& snap, const PbaConfig& cfg, PassState& st, Plan& plan);

namespace pba {

// ------------------------------------------------------- pre-qualification --
enum class Qualify : std::uint8_t { Ok, NoProjectTag, UnknownProject, NotMember, NoAllocation };
struct Verdict {
  Qualify code = Qualify::Ok;
  std::string reason;  // empty when ok; otherwise says exactly why
  bool ok() const { return code == Qualify::Ok; }
};
// The submit-time checks (patent: "pre-qualification step"): project tag set,
// project valid, submitter (user or UNIX group) a member, slots allocated to
// the project for the week containing `now`.
Verdict prequalify(const Job& job, const ProjectPlan& plan, Time now, bool require_tag = true);

// Does allocation `a` cover this job (project, and user/group/step narrowing)?
bool covers(const Allocation& a, const Job& job);

// ------------------------------------------------------------ priorities --
// For callers keeping job state between passes (see the contract at the top):
void apply_update(Job& job, const JobUpdate& u);  // priority, cycles_pending
void on_start(Job& job, Time now);                // last_start_priority, first_start
void on_requeue(Job& job);                        // requeues + 1, cycles_pending = 0
void on_pba_preemption(Job& job);                 // pba_preemptions + 1 (a Requeue with Decision::pba_preemption)

// The job's priority after one more pending cycle. `allocated`: the job
// matches an allocation this week (gets the +100 once, then +1 per cycle).
double next_priority(const Job& job, bool allocated, const PbaConfig& cfg);

// Ordering classes, best first: allocated (within the allocation) > requeued >
// normal > demoted (failed pre-qualification).
enum class JobClass : std::uint8_t { Lowest = 0, Normal = 1, Requeued = 2, Allocated = 3 };

// ----------------------------------------------------------------- report --
// Where each project stands this week (patent: "automated reports ... to
// users, project leads, resource managers"): its allocation, the slots its
// running jobs hold, and how over- (> 0) or under- (< 0) subscribed it is.
struct ProjectStatus {
  std::string project;
  int allocated = 0;     // slots for the current ISO week
  int running = 0;       // slots held by its running (not suspended) jobs
  int pending = 0;       // pending jobs
  int suspended = 0;     // suspended jobs
  int oversubscribed() const { return running - allocated; }
};
// Every project of the plan, then any other project seen in the snapshot
// (no allocation: zero slots), in that order.
std::vector<ProjectStatus> project_status(const Snapshot& snap, const ProjectPlan& plan);
// A fixed-width text table of the above, one line per project, for people.
std::string format_status(const std::vector<ProjectStatus>& rows, Time now);

// --------------------------------------------------- placeholder slots --
// A host's standard slot is one core with an equal share of its memory.
std::int64_t standard_share_mb(const Node& node);  // 0: memory not tracked
// Placeholder ("dummy") slots a job using `mem_mb` on `slots` cores of this
// node must hold so that no other heavy job lands there: ceil(mem/share) - slots.
int placeholders_for(const Node& node, int slots, std::int64_t mem_mb);
bool is_light(const Node& node, int slots, std::int64_t mem_mb);  // below the standard share

// Slot occupancy of one node as the placeholder rule sees it.
struct NodeLoad {
  int heavy_or_standard = 0;  // cores held by jobs at or above the standard share
  int light = 0;              // cores held by light jobs (may sit in placeholder slots)
  int placeholders = 0;       // placeholder slots held for heavy jobs
};
// Loads of every node from the running jobs (suspended jobs keep their
// placeholders, since their memory stays held, but not their cores; jobs in
// `freed` count as gone).
std::vector<NodeLoad> node_loads(const Snapshot& snap, const std::vector<JobId>& freed = {});
// The memory a job uses on one node: its memory in proportion to its slots there.
std::int64_t mem_on_node(const Job& job, int total_slots, int slots_here);
// May `slots` cores of a job using `mem_mb` there be placed on this node?
// Light jobs may use placeholder slots; others need real free slots, plus
// room for their own placeholders.
bool may_place(const Node& node, const NodeLoad& load, int slots, std::int64_t mem_mb);
// Records such a placement in `load`.
void add_placement(const Node& node, NodeLoad& load, int slots, std::int64_t mem_mb);
// The whole rule for a planner mid-pass: may `job` get `slots` cores on node
// `node`, given the running jobs (minus st.freed) and the Start decisions
// already in `plan`? The job's memory is split over job.slots_min slots (or
// `slots` if larger). Signature of PlannerConfig's placement hook.
bool may_place_now(const Snapshot& snap, const PassState& st, const Plan& plan, const Job& job,
                   std::uint32_t node, int slots);

}  // namespace pba
}  // namespace corral
