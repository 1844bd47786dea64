// The entries of the mesh's replicated log, defined once, in MessagePack.
//
// Each entry is what the coordinator proposes and every replica's state
// machine (coordinator/service/mesh_state.hpp) applies in log order. An entry
// is the array ["corral-mesh", version, kind, body], body a map (field names
// as keys: a newer writer may add fields, an older reader keeps defaults).
// decode_entry() refuses anything else with a ProtoError that says what is
// wrong; it never crashes on bad bytes.
//
// Times inside entries are the proposer's clock: applying an entry never reads
// a clock, so every replica computes the same state.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "proto/proto.hpp"

namespace corral::proto::mesh {

inline constexpr std::uint32_t kVersion = 1;
inline constexpr std::string_view kMagic = "corral-mesh";

// A job a majority accepted. The state machine assigns its id (one counter,
// never reused). `token` names the submission (node and request number): a
// client that retries after a leader change gets the id of its first accepted
// copy instead of a second job.
struct JobAccepted {
  JobSpec spec;
  std::string user;
  std::uint32_t uid = 0;
  std::uint32_t gid = 0;
  double submit_time = 0;
  std::string token;
  CORRAL_MSGPACK_MAP(spec, user, uid, gid, submit_time, token)
};

// The coordinator decided to start a pending job: run `run` (1-based, one
// more than the job's runs so far) on `nodes` (the first runs the script).
// A decision is (term, decision): refused from an older coordinator term or
// when already applied. `slots` and `mem_mb` are each node's share, in the
// order of `nodes` (added after version 1: empty in older entries, which
// name one node holding the whole job).
struct JobStarted {
  std::uint64_t job = 0;
  std::int32_t run = 0;
  std::vector<std::string> nodes;
  std::uint64_t decision = 0;
  std::uint64_t term = 0;
  double time = 0;
  // Started as a backfilled job (checkpoint policy): the pass checkpoints it at the end of its
  // window, `backfill_estimate` s after its start.
  bool backfilled = false;
  double backfill_estimate = 0;
  std::vector<std::int32_t> slots{};
  std::vector<std::int64_t> mem_mb{};
  // Service units an hour on one cpu of this run costs (its queue's charge factor at the start,
  // NCI); 0 in entries of a coordinator without charging: the run is charged nothing.
  double charge = 0;
  CORRAL_MSGPACK_MAP(job, run, nodes, decision, term, time, backfilled, backfill_estimate, slots, mem_mb, charge)
};

// Run `run` of a job ended for good (completed, failed, walltime, mem, jobfs,
// cancelled, ...). A pending job cancelled before any start ends with run 0.
struct JobEnded {
  std::uint64_t job = 0;
  std::int32_t run = 0;
  std::string reason;
  std::int32_t exit_code = -1;
  double time = 0;
  std::string message{};         // why, in words (e.g. which dependency can never be met)
  CORRAL_MSGPACK_MAP(job, run, reason, exit_code, time, message)
};

// Run `run` was stopped and the job waits again (requeue, checkpoint,
// preemption): the run ends "preempted", the job is pending. A checkpointed
// run keeps its work: `checkpoints` and `work_done` (seconds) are the job's
// totals as its node counted them (never lowered).
struct JobRequeued {
  std::uint64_t job = 0;
  std::int32_t run = 0;
  std::string reason;
  double time = 0;
  std::int32_t checkpoints = 0;
  std::int64_t work_done = 0;
  CORRAL_MSGPACK_MAP(job, run, reason, time, checkpoints, work_done)
};

// Run `run` frozen (suspended true) or thawed (false) on `node`: that node's acknowledgement of
// the run's suspend or resume order (order_term, order_decision; added after version 1, as
// node). The log follows the node: a node that carried the order out confirms the state the
// order set; one that failed (`reason` says why) puts the run back as it was, and later
// acknowledgements of that order change nothing. An entry of another order than the run's last
// is refused.
struct JobSuspended {
  std::uint64_t job = 0;
  std::int32_t run = 0;
  bool suspended = true;
  std::string reason;
  double time = 0;
  std::string node{};
  std::uint64_t order_term = 0;
  std::uint64_t order_decision = 0;
  CORRAL_MSGPACK_MAP(job, run, suspended, reason, time, node, order_term, order_decision)
};

// A node's administrative state: "up", "drain" (no new starts; running jobs
// go on) or "removed". Nodes never named are up.
struct NodeAdmin {
  std::string node;
  std::string state;
  std::string reason;
  CORRAL_MSGPACK_MAP(node, state, reason)
};

// A project's grant in service units (NCI), renewed every `every` seconds from week 0 of the
// mesh's charging (0: one grant for all time), as a plan file's `grant` line; it replaces the
// project's earlier one. `period` is not read (older entries).
struct GrantSet {
  std::string project;
  std::string period;
  double su = 0;
  std::int64_t every = 0;
  CORRAL_MSGPACK_MAP(project, period, su, every)
};

// Service units charged for one run of a job. Not applied: a run is charged when its end (or
// requeue) is applied, once (kept in the variant so that older entries still decode).
struct Charge {
  std::uint64_t job = 0;
  std::int32_t run = 0;
  std::string project;
  std::string period;
  double su = 0;
  CORRAL_MSGPACK_MAP(job, run, project, period, su)
};

// A project's allocation of slots for an ISO week (PBA), replacing any earlier
// one for that project and week. `changes` (added after version 1; empty in older entries):
// every change of one `corral alloc set`, applied all or none; project, week and slots are then
// not read.
struct AllocationSet {
  std::string project;
  std::string week;
  std::int32_t slots = 0;
  std::vector<AllocSetting> changes{};
  CORRAL_MSGPACK_MAP(project, week, slots, changes)
};

// A pending job held (`hold`: proto::hold::kUser or kOperator; no start while held) or
// released (`hold` empty), by `who`.
struct JobHeld {
  std::uint64_t job = 0;
  std::string hold;
  std::string who;
  CORRAL_MSGPACK_MAP(job, hold, who)
};

// A pending job moved to another queue (corral qmove), by `who`.
struct JobMoved {
  std::uint64_t job = 0;
  std::string queue;
  std::string who;
  CORRAL_MSGPACK_MAP(job, queue, who)
};

// The coordinator ordered run `run` of a job suspended, resumed, requeued or
// checkpointed (`action`, spelled in mesh::order), for its pass (a policy's
// preemption) or for a user (`held`: a suspension only a user's resume ends).
// A decision as a start is: (term, decision), refused from an older term or
// when applied already. Suspend and resume change the job's state at once
// (its node freezes or thaws it when the order reaches it); a requeue or
// checkpoint marks the run as stopping: the job waits again only once its
// node reports the run's end (JobRequeued), so it never runs on two nodes.
struct JobOrdered {
  std::uint64_t job = 0;
  std::int32_t run = 0;
  std::string action;
  std::string reason;
  std::uint64_t decision = 0;
  std::uint64_t term = 0;
  double time = 0;
  bool pba_preemption = false;   // a requeue of PBA's: counts toward its requeue bound
  bool held = false;
  CORRAL_MSGPACK_MAP(job, run, action, reason, decision, term, time, pba_preemption, held)
};

// A user's cancel of run `run` of a running or suspended job, by `who` (added after version
// 1). Replicated so that a new coordinator goes on sending it to the run's nodes until the
// run's end is committed; a run being requeued meanwhile ends the job "cancelled".
struct CancelAsked {
  std::uint64_t job = 0;
  std::int32_t run = 0;
  std::string who;
  double time = 0;
  CORRAL_MSGPACK_MAP(job, run, who, time)
};

// Tasks of job array `array` handed to the pass (a JobAccepted whose spec.array is on: the array
// itself never runs). Each task becomes a job of its own, its id from the state machine's
// counter: the `count` next ones in index order (index -1), or the one task `index`, ahead of its
// turn (a user named it). A task is handed out once: naming one handed out already changes
// nothing (the outcome is its id). The coordinator hands out a few at a time, so that an array of
// 100,000 tasks is one entry at submit.
struct TasksHanded {
  std::uint64_t array = 0;
  std::int64_t index = -1;
  std::int32_t count = 0;
  CORRAL_MSGPACK_MAP(array, index, count)
};

using Entry = std::variant<JobAccepted, JobStarted, JobEnded, JobRequeued, JobSuspended, NodeAdmin,
                           GrantSet, Charge, AllocationSet, JobHeld, JobMoved, JobOrdered, CancelAsked,
                           TasksHanded>;

// Wire name of each alternative, in variant order.
std::string_view kind_name(const Entry& e);

std::string encode_entry(const Entry& e);
// Throws ProtoError (clear text) on anything but a well-formed entry of this
// version.
Entry decode_entry(std::string_view bytes);

// Node administrative states, spelled once.
namespace admin {
inline constexpr std::string_view kUp = "up";
inline constexpr std::string_view kDrain = "drain";
// Removed from the mesh (corral mesh remove): out of the raft configuration, never added back
// while so; an undrain (state up) lets it in again.
inline constexpr std::string_view kRemoved = "removed";
}  // namespace admin

// JobOrdered's actions, spelled once.
namespace order {
inline constexpr std::string_view kSuspend = "suspend";
inline constexpr std::string_view kResume = "resume";
inline constexpr std::string_view kRequeue = "requeue";
inline constexpr std::string_view kCheckpoint = "checkpoint";
}  // namespace order

}  // namespace corral::proto::mesh
