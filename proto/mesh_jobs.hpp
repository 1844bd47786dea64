// Messages that carry jobs between mesh members, beside raft's own and the
// link's hellos, on the same ZeroMQ sockets: ["corral-jobs", version, kind,
// body], body a map (field names as keys: a newer writer may add fields, an
// older reader keeps defaults).
//
// A member that is not the coordinator forwards the entries it wants in the
// log (a submission, a job's end) to it (Forward); the coordinator proposes
// the entry and answers (ForwardAck) once it is committed, or says it does
// not lead. The forwarder resends until it has an answer; a submission keeps
// its token, so one that reached a coordinator which then died gets its first
// id. The coordinator pushes its start decisions to the nodes (StartJob), and
// each node acknowledges (StartAck). `corral exec` travels as ExecStart,
// ExecOutput, ExecEnd, ExecAlive, ExecCancel and ExecInput (mesh_exec.hpp); a pending
// job's plan as WaitAsk and WaitAnswer (mesh_waits.hpp).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "proto/mesh.hpp"
#include "proto/mesh_exec.hpp"
#include "proto/mesh_waits.hpp"

namespace corral::proto::jobs {

inline constexpr std::uint32_t kVersion = 1;
inline constexpr std::string_view kMagic = "corral-jobs";

// A user's request about a mesh job or node, as the node's local socket saw
// the user: the coordinator decides with the same rules as a standalone node.
// action: "" (cancel), hold, release, qmove (to `queue`), drain (`node`,
// `reason`), undrain (`node`) or alloc_set (`allocs`).
struct CancelAsk {
  std::uint64_t job = 0;
  std::uint32_t uid = 0;
  std::uint32_t gid = 0;
  bool admin = false;            // root, or a member of the node's operators group
  std::string who;               // the user's name, for the record
  std::string action{};
  std::string queue{};
  std::string node{};
  std::string reason{};
  std::vector<mesh::AllocationSet> allocs{};  // action alloc_set: the changes, all or none
  // Action "task": the id of task `index` of array `job` (handed out ahead of its turn if not yet).
  std::int64_t index = -1;
  CORRAL_MSGPACK_MAP(job, uid, gid, admin, who, action, queue, node, reason, allocs, index)
  // Whether this is a request at all (a Forward without one carries an entry).
  bool asked() const { return job != 0 || !action.empty(); }
};

// What a member wants from the coordinator it knows: an entry in the log (a
// submission, a job's end, ...), or a cancel (cancel.job set; entry empty).
struct Forward {
  std::string mesh;              // a message of another mesh is ignored
  std::uint64_t from = 0;        // the forwarding member's id (the answer goes there)
  std::uint64_t request = 0;     // the forwarder's number for this attempt
  std::string entry;             // proto::mesh::encode_entry(); a JobAccepted has its token set
  CancelAsk cancel;
  CORRAL_MSGPACK_MAP(mesh, from, request, entry, cancel)
};

struct ForwardAck {
  std::string mesh;
  std::uint64_t from = 0;        // the answering member
  std::uint64_t request = 0;     // Forward::request
  // "ok": committed, `job` is the job concerned (a new job's id; for a
  // cancel `message` is the job's state); "refused": committed as a refusal
  // or a cancel refused (`code`: not_found, permission, invalid; `message`
  // says why); "not_leader": resend to `leader` (0: none known); "error": try
  // again.
  std::string status;
  std::uint64_t job = 0;
  std::uint64_t leader = 0;
  std::string message;
  std::string code;
  CORRAL_MSGPACK_MAP(mesh, from, request, status, job, leader, message, code)
};

// The coordinator's decision to start run `run` of `job` on the receiving
// node, sent once the JobStarted entry (decision `decision` of term
// `decided_term`) is committed, and again until the node acknowledges; a new
// coordinator sends the committed starts again (`term` is then its own). A
// node refuses a `term` older than one it has seen and starts each (job, run),
// which names one committed decision, at most once. The job travels with it,
// so the node needs nothing else to start it.
struct StartJob {
  std::string mesh;
  std::uint64_t from = 0;        // the coordinator's member id
  std::uint64_t term = 0;        // the sender's term
  std::uint64_t decided_term = 0;
  std::uint64_t decision = 0;
  std::uint64_t job = 0;
  std::int32_t run = 0;
  std::vector<std::string> nodes;  // the first runs the script; the others hold a share
  mesh::JobAccepted spec;        // the job as accepted (spec, user, uid, gid, submit_time)
  std::int64_t work_done = 0;    // its work kept by earlier checkpoints (s)
  std::int32_t checkpoints = 0;  // how many: a restart when any
  // Each node's share, in the order of `nodes` (JobStarted's); empty: one node, the whole job.
  std::vector<std::int32_t> slots{};
  std::vector<std::int64_t> mem_mb{};
  // A task of a job array: the array's id and the task's index (array_id 0: not a task).
  std::uint64_t array_id = 0;
  std::int64_t array_index = -1;
  CORRAL_MSGPACK_MAP(mesh, from, term, decided_term, decision, job, run, nodes, spec, work_done, checkpoints,
                     slots, mem_mb, array_id, array_index)
};

struct StartAck {
  std::string mesh;
  std::uint64_t from = 0;        // the node's member id
  std::uint64_t term = 0;        // StartJob::term
  std::uint64_t decision = 0;
  std::uint64_t job = 0;
  std::int32_t run = 0;
  // "started" (also for a decision already applied), "refused" (an older
  // term), "failed" (the node could not start it: it asks for a requeue).
  // The acknowledgement of a JobOrder: "done" (also when applied already or
  // when the run is over), "refused" (an older term), "failed".
  std::string status;
  std::string message;
  std::string order{};           // the JobOrder's action; empty for a start
  std::uint64_t decided_term = 0;  // the JobOrder's decision is (decided_term, decision)
  CORRAL_MSGPACK_MAP(mesh, from, term, decision, job, run, status, message, order, decided_term)
};

// The coordinator's order to stop run `run` of `job` (a user cancelled it,
// or the run of a job across nodes ended or was requeued while this node
// still holds a share of it): the node stops it as a standalone cancel does;
// the end of the node that runs the script goes to the mesh as any end.
struct CancelJob {
  std::string mesh;
  std::uint64_t from = 0;
  std::uint64_t term = 0;
  std::uint64_t job = 0;
  std::int32_t run = 0;
  std::string who;
  CORRAL_MSGPACK_MAP(mesh, from, term, job, run, who)
};

// The coordinator's order to suspend, resume, requeue or checkpoint run `run`
// of `job` (a committed JobOrdered, decision `decision` of term
// `decided_term`), sent until the node acknowledges (StartAck with `order`
// set); a new coordinator sends the last order of each run again. A node
// refuses a `term` older than one it has seen and carries out each decision
// at most once, and none older than one it carried out for that job.
struct JobOrder {
  std::string mesh;
  std::uint64_t from = 0;
  std::uint64_t term = 0;
  std::uint64_t decided_term = 0;
  std::uint64_t decision = 0;
  std::uint64_t job = 0;
  std::int32_t run = 0;
  std::string action;            // mesh::order
  std::string reason;
  bool pba_preemption = false;
  bool held = false;             // a user's suspension: the pass never resumes it
  CORRAL_MSGPACK_MAP(mesh, from, term, decided_term, decision, job, run, action, reason, pba_preemption, held)
};

using Message = std::variant<Forward, ForwardAck, StartJob, StartAck, CancelJob, JobOrder, ExecStart, ExecOutput,
                             ExecEnd, WaitAsk, WaitAnswer, ExecAlive, ExecCancel, ExecInput>;

// Whether `bytes` are a jobs message (by their first bytes).
bool is_jobs(std::string_view bytes);
std::string encode(const Message& m);
// Throws ProtoError (clear text) on anything but a well-formed message of
// this version.
Message decode(std::string_view bytes);

}  // namespace corral::proto::jobs
