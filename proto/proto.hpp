// Every message Corral puts on a wire, defined once, in MessagePack.
//
// A message is an envelope: the array ["corral", version, type, body], where
// body is a map (field names as keys, so a peer may add fields without breaking
// older readers; missing fields keep their defaults). A reader refuses a
// different protocol version or bytes that are not such an envelope with a
// ProtoError whose text says what is wrong; it never crashes on bad input.
//
// Used by: the local UNIX socket of corrald (requests and replies, framed by
// a 4-byte big-endian length), the ZeroMQ PUB events (topic frame + envelope),
// and the daemon's journal (JobRecord).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "proto/msgpack_map.hpp"

namespace corral::proto {

inline constexpr std::uint32_t kVersion = 1;
inline constexpr std::string_view kMagic = "corral";
// Largest frame accepted on the local socket (scripts and environments are
// copied at submit, as qsub does; 16 MiB is far beyond any sane one).
inline constexpr std::uint32_t kMaxFrame = 16u << 20;
// JobSpec::slots_max of an open range ("-pe NAME n-"): as many as the node has.
inline constexpr std::int32_t kSlotsUnbounded = 0x7fffffff;

class ProtoError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// ------------------------------------------------------------------ jobs --

// One dependency of a job (qsub -W depend=TYPE:ID, Grid Engine -hold_jid ID): the job is not
// eligible to start until job `job` has ended as `type` asks. type: one of kDependTypes.
struct Dependency {
  std::string type;
  std::uint64_t job = 0;
  CORRAL_MSGPACK_MAP(type, job)
  bool operator==(const Dependency&) const = default;
};
// afterok: the other job completed (exit 0); afternotok: it ended any other way; afterany: it
// ended at all.
inline constexpr std::string_view kDependTypes[] = {"afterok", "afterany", "afternotok"};
// At most this many dependencies a job.
inline constexpr std::size_t kMaxDepends = 1000;

// A job array (qsub -J first-last[:step][%max_running], Grid Engine -t first-last[:step] and -tc
// max_running): one job of many tasks, task i running the script with its index i. step 0: not
// an array. max_running 0: no limit of its own on how many tasks run at once.
struct ArraySpec {
  std::int64_t first = 0;
  std::int64_t last = 0;
  std::int64_t step = 0;
  std::int32_t max_running = 0;
  CORRAL_MSGPACK_MAP(first, last, step, max_running)
  bool operator==(const ArraySpec&) const = default;
  bool on() const { return step > 0; }
  std::int64_t tasks() const { return on() && last >= first ? (last - first) / step + 1 : 0; }
};
// Most tasks an array may have, and its largest index.
inline constexpr std::int64_t kMaxArrayTasks = 1000000;
inline constexpr std::int64_t kMaxArrayIndex = 2147483647;

// What a user asks for (qsub options); filled by `corral submit`. Identity
// (uid/gid/user) is NOT here: corrald takes it from SO_PEERCRED.
struct JobSpec {
  std::string name;
  std::string queue;
  std::string project;
  std::int64_t walltime = 0;     // seconds; 0: none
  std::int32_t ncpus = 1;
  std::int64_t mem_mb = 0;       // 0: not limited
  std::int64_t jobfs_mb = 0;
  bool reserve = false;          // -R y
  std::string script;            // script text, copied at submit
  std::string script_name;       // path given, or "--wrap"
  std::string stdout_path;       // -o; empty: <cwd>/<name>.o<id>
  std::string stderr_path;       // -e; empty: <cwd>/<name>.e<id>
  std::string cwd;               // submitter's working directory
  std::vector<std::string> env;  // submitter's environment, KEY=VALUE
  // Parallel environment slot range (qsub -pe NAME n-m; sge6-reservation-
  // backfill.txt section 3): the job runs on the largest count in
  // [slots_min, slots_max] it can get at its earliest start. pe empty: no
  // range, ncpus is the count. Added after version 1 shipped: an older peer
  // omits these keys (defaults: no range) or ignores them (map keys).
  std::string pe;
  std::int32_t slots_min = 0;    // 0: no range (ncpus)
  std::int32_t slots_max = 0;    // kSlotsUnbounded: "n-" (the node's cores)
  // The submitter's umask, which the job runs with (as qsub and sbatch do); -1: not sent (an
  // older client), the job gets 022. Added after version 1.
  std::int32_t umask = -1;
  // Added after version 1 (older peers omit or ignore them). The step of the project's flow
  // (-P PROJECT:STEP, pba-synopsys-patent.txt); how a policy that preempts the job stops it, the
  // job's own choice ("requeue", "suspend"; "": the node's preempt_mode); -now y (Grid Engine's
  // immediate job: it starts at once or is refused, and is never reserved).
  std::string flow_step;
  std::string preempt;
  bool immediate = false;
  // corral submit -c: the job may be checkpointed by the scheduler (checkpoint backfilling,
  // selective preemption); no other job ever is. Added after version 1.
  bool checkpointable = false;
  // Added after version 1. -j oe (PBS) / -j y (Grid Engine): stderr goes to the stdout file;
  // the jobs this one waits for (-W depend=, -hold_jid).
  bool join = false;
  std::vector<Dependency> depend;
  // Added after version 1: a job array (-J, -t, -tc).
  ArraySpec array;
  // Added after version 1. -l select=K:ncpus=M: the job is K chunks of M cpus (ncpus = K * M),
  // each chunk whole on one node; 0: no chunks (the cpus may spread over nodes as they fit).
  std::int32_t chunk_ncpus = 0;
  // Added after version 1. Memory per slot (Grid Engine's h_vmem): the job holds this times the
  // slots it starts with (a -pe range's count is known only then); 0: mem_mb is the job's total.
  std::int64_t mem_per_slot_mb = 0;
  CORRAL_MSGPACK_MAP(name, queue, project, walltime, ncpus, mem_mb, jobfs_mb, reserve, script,
                     script_name, stdout_path, stderr_path, cwd, env, pe, slots_min, slots_max, umask,
                     flow_step, preempt, immediate, checkpointable, join, depend, array, chunk_ncpus,
                     mem_per_slot_mb)
};

// One run of a job: from a start to the end of its processes. A job runs more than once when a
// requeue, a checkpoint or a preemption stops a run (its end_reason is then "preempted") and puts
// the job back in the queue.
struct RunInfo {
  double start = 0;              // epoch seconds
  double end = 0;                // 0: still running
  std::string end_reason;        // empty while running; completed | failed | ... | preempted
  std::int32_t exit_code = -1;   // the run's exit status when known
  std::string comment;           // why it ended (e.g. "checkpointed: exited after the checkpoint signal")
  CORRAL_MSGPACK_MAP(start, end, end_reason, exit_code, comment)
};

// How many tasks of an array are in each state (queued: not yet handed to the scheduler).
struct ArrayCounts {
  std::int64_t queued = 0;
  std::int64_t pending = 0;
  std::int64_t running = 0;
  std::int64_t ended = 0;
  std::int64_t failed = 0;       // of the ended: every end but completed
  CORRAL_MSGPACK_MAP(queued, pending, running, ended, failed)
};

// A job as shown to users (stat, wait, node) and carried in events.
struct JobInfo {
  std::uint64_t id = 0;
  std::string name;
  std::string user;
  std::uint32_t uid = 0;
  std::string queue;
  std::string project;
  std::string state;             // pending | running | suspended | ended
  std::int32_t exit_code = -1;   // -1 until ended; 128+N when killed by signal N
  std::string end_reason;        // exited | cancelled | walltime | mem | killed | ...
  double submit_time = 0;        // epoch seconds
  double start_time = 0;         // 0: never started
  double end_time = 0;
  std::int64_t walltime = 0;
  std::int32_t ncpus = 1;
  std::int64_t mem_mb = 0;
  std::int64_t jobfs_mb = 0;
  std::vector<int> cores;        // cores granted on this node
  double cpu_seconds = 0;        // usage (last sample)
  std::int64_t rss_mb = 0;
  std::int32_t requeues = 0;
  std::string stdout_path;
  std::string stderr_path;
  std::string comment;           // why it waits / what happened (scheduler reason)
  // Added after version 1 (older peers omit or ignore them): the parallel
  // environment request and the slots granted at the last start (0: never
  // started; equals cores.size() on this node), and the seconds it spent
  // suspended (not counted against its walltime).
  std::string pe;
  std::int32_t slots_min = 0;
  std::int32_t slots_max = 0;
  std::int32_t slots = 0;
  double suspended_seconds = 0;
  // Every run, oldest first, the current one last (end 0). Added after version 1 (older peers
  // omit or ignore it). The job's own exit_code / end_reason are its last run's once it ended.
  std::vector<RunInfo> runs;
  // Added after version 1: the flow step (-P PROJECT:STEP; "" none), how a preemption stops it
  // (its own choice, else the node's: "requeue" or "suspend"), and whether it was started as a
  // backfilled job under the checkpoint policy (stopped at its window's end if the reserved job
  // still lacks cores).
  std::string flow_step;
  std::string preempt;
  bool backfilled = false;
  // NCI charging (added after version 1; 0 without it): service units charged over every run
  // (running wall time x cpus x the queue's charge), and the units an hour of running costs
  // now (its cpus x its queue's charge; 0 in a free queue).
  double su_charged = 0;
  double su_rate = 0;
  // A pending job (added after version 1; older peers omit or ignore them): when the last
  // scheduling pass planned it to start (epoch seconds; 0: no plan, as squeue's N/A), why it
  // waits (a proto::wait name; "" once it no longer waits) and what exactly it waits for. The
  // jobs it depends on (-W depend, -hold_jid), met or not.
  double planned_start = 0;
  std::string wait_reason;
  std::string wait_detail;
  std::vector<Dependency> depend;
  // Job arrays (added after version 1). A task: its array's id and its index (array_id 0: not a
  // task). The array itself: its range, and how many of its tasks are in each state (queued:
  // not yet handed to the scheduler).
  std::uint64_t array_id = 0;
  std::int64_t array_index = -1;
  ArraySpec array;
  ArrayCounts array_counts;
  CORRAL_MSGPACK_MAP(id, name, user, uid, queue, project, state, exit_code, end_reason,
                     submit_time, start_time, end_time, walltime, ncpus, mem_mb, jobfs_mb, cores,
                     cpu_seconds, rss_mb, requeues, stdout_path, stderr_path, comment, pe,
                     slots_min, slots_max, slots, suspended_seconds, runs, flow_step, preempt,
                     backfilled, su_charged, su_rate, planned_start, wait_reason, wait_detail, depend,
                     array_id, array_index, array, array_counts)
};

// Node-local status: works without any mesh.
struct NodeStatus {
  std::string node;              // host name
  std::string mode;              // "standalone" (later: mesh role)
  std::string topology;          // one-line summary (packages, NUMA, cores)
  std::int32_t cores = 0;
  std::int32_t numa_nodes = 0;
  std::int64_t mem_mb = 0;
  std::int32_t slots_total = 0;
  std::int32_t slots_used = 0;
  std::int32_t pending = 0;
  std::vector<JobInfo> running;  // running and suspended, with usage
  std::vector<JobInfo> recent;   // recent ends, newest first, with reasons
  std::uint32_t agent_pid = 0;
  double agent_uptime = 0;       // seconds
  std::string version;
  // `criu check` at agent start (added after version 1): whether it passed, and what was found.
  // Checkpoints are cooperative either way (checkpoint_signal); CRIU is never used.
  bool criu_available = false;
  std::string criu_why;
  // Added after version 1: the node's administrative state (up | drained, corral drain) and why.
  std::string state = "up";
  std::string drain_reason;
  CORRAL_MSGPACK_MAP(node, mode, topology, cores, numa_nodes, mem_mb, slots_total, slots_used,
                     pending, running, recent, agent_pid, agent_uptime, version, criu_available,
                     criu_why, state, drain_reason)
};

// The mesh as one member sees it (`corral mesh`). Added after version 1: an
// older corrald answers "unknown message type".
struct MeshMember {
  std::uint64_t id = 0;
  std::string name;              // its node_name ("" until heard from)
  std::string address;           // host:port
  std::string role;              // voter | standby | spare
  std::string state;             // as it last said: leader | follower | candidate | unavailable | stopping
  std::uint64_t term = 0;        // as it last said
  std::uint64_t commit_index = 0;
  std::int64_t last_contact_ms = -1;  // since this node last heard from it; -1 never, 0 itself
  std::uint64_t snapshots_asked = 0;  // of it by this node: a first hearing, a restart, each gap seen
  CORRAL_MSGPACK_MAP(id, name, address, role, state, term, commit_index, last_contact_ms, snapshots_asked)
};
struct MeshStatus {
  std::string mesh;              // the mesh's name; "" when standalone (a mesh of one)
  std::string node;              // this node's name
  std::uint64_t id = 0;          // this member's raft id (a first voter's place in voters, from 1)
  std::string address;           // host:port it listens on
  std::string state;             // leader | follower | candidate | unavailable | standalone
  std::string coordinator;       // the leader's name ("" while none is known)
  std::uint64_t coordinator_id = 0;
  std::uint64_t term = 0;
  std::uint64_t commit_index = 0;
  std::uint64_t last_applied = 0;
  std::vector<std::string> voters;    // host:port: the raft configuration's (as configured until one is known)
  std::vector<MeshMember> members;    // every member of the raft configuration
  std::uint64_t jobs = 0;        // jobs in the replicated state
  CORRAL_MSGPACK_MAP(mesh, node, id, address, state, coordinator, coordinator_id, term, commit_index,
                     last_applied, voters, members, jobs)
};

// ------------------------------------------------------ socket requests --

struct SubmitReq {
  JobSpec spec;
  CORRAL_MSGPACK_MAP(spec)
};
struct SubmitRep {
  std::uint64_t id = 0;
  CORRAL_MSGPACK_MAP(id)
};
struct StatReq {
  std::uint64_t id = 0;          // 0: every job the caller may see
  // Filters of the list (added after version 1: an older corrald ignores them), each "" for
  // any: the owner's name or uid (-u), the project (-P), the states (-s: names of
  // proto::state, comma-separated); mine: only the caller's own jobs (--mine).
  std::string user{};
  std::string project{};
  std::string states{};
  bool mine = false;
  // Job arrays (added after version 1): with id, task `index` of array `id` (-1: the job
  // itself); tasks: list each task handed to the scheduler as well as its array (stat -t).
  std::int64_t index = -1;
  bool tasks = false;
  CORRAL_MSGPACK_MAP(id, user, project, states, mine, index, tasks)
};
struct StatRep {
  std::vector<JobInfo> jobs;
  CORRAL_MSGPACK_MAP(jobs)
};
struct CancelReq {
  std::uint64_t id = 0;
  std::int64_t index = -1;       // task `index` of array `id` (-1: the job or the whole array)
  CORRAL_MSGPACK_MAP(id, index)
};
struct CancelRep {
  std::uint64_t id = 0;
  std::string state;             // state after the cancel was applied
  CORRAL_MSGPACK_MAP(id, state)
};
struct WaitReq {
  std::uint64_t id = 0;
  std::int64_t index = -1;       // task `index` of array `id` (-1: the job or the whole array)
  CORRAL_MSGPACK_MAP(id, index)
};
struct WaitRep {                 // sent when the job has ended
  JobInfo job;
  CORRAL_MSGPACK_MAP(job)
};
struct NodeReq {
  std::int32_t recent = 20;      // how many recent ends to include
  CORRAL_MSGPACK_MAP(recent)
};
struct NodeRep {
  NodeStatus node;
  CORRAL_MSGPACK_MAP(node)
};
// Administrative control of one job (qsig/qhold/qrls/qmove/qrerun-like; added after
// version 1: an older corrald answers "unknown message type"). action:
// suspend | resume (root or an operator) | requeue | checkpoint | hold | release (owner,
// root or an operator) | qmove (to `queue`; owner, root or an operator).
struct ControlReq {
  std::uint64_t id = 0;
  std::string action;
  std::string queue{};           // qmove: the queue the pending job moves to
  std::int64_t index = -1;       // task `index` of array `id` (-1: the job or the whole array)
  CORRAL_MSGPACK_MAP(id, action, queue, index)
};
struct ControlRep {
  std::uint64_t id = 0;
  std::string state;             // state after the action was applied
  std::string message;           // what was done (e.g. "requeue requested")
  CORRAL_MSGPACK_MAP(id, state, message)
};
// The weekly per-project report of NCI charging (`corral report`; added after version 1: an
// older corrald answers "unknown message type"). week: "" (the current week), a week number
// as the report prints it, or an ISO week (2026-W48); project: "" for every project.
struct ReportReq {
  std::string week;
  std::string project;
  bool json = false;
  CORRAL_MSGPACK_MAP(week, project, json)
};
struct ReportRep {
  std::string text;              // the report as `corral sim --report` writes a week (or its JSON)
  CORRAL_MSGPACK_MAP(text)
};
// `corral drain NODE --reason TEXT` / `corral undrain NODE` (root or an operator; added after
// version 1). action: drain | undrain | remove | promote | handover (corral mesh; handover's
// node may be empty: the coordinator chooses).
struct NodeAdminReq {
  std::string node;
  std::string action;
  std::string reason;
  CORRAL_MSGPACK_MAP(node, action, reason)
};
struct NodeAdminRep {
  std::string node;
  std::string state;             // up | drained | removed | voter | coordinator, after the request
  std::string reason;
  CORRAL_MSGPACK_MAP(node, state, reason)
};
// NodeAdminReq's actions, spelled once.
namespace node_action {
inline constexpr std::string_view kDrain = "drain";
inline constexpr std::string_view kUndrain = "undrain";
inline constexpr std::string_view kRemove = "remove";      // mesh only
inline constexpr std::string_view kPromote = "promote";    // mesh only
inline constexpr std::string_view kHandover = "handover";  // mesh only; its node may be empty
}  // namespace node_action
// A node's state as `corral nodes` lists it, spelled once.
namespace node_state {
inline constexpr std::string_view kUp = "up";
inline constexpr std::string_view kDrained = "drained";
inline constexpr std::string_view kUnreachable = "unreachable";  // mesh only: not heard from for 3 s
inline constexpr std::string_view kStopped = "stopped";          // mesh only: its corrald said it stops
}  // namespace node_state
// One node as `corral nodes` lists it (added after version 1).
struct NodeLine {
  std::string name;
  std::string state;             // node_state: up | drained | unreachable | stopped
  std::string reason;            // why it is drained ("" otherwise)
  std::int32_t cores = 0;
  std::int32_t cores_used = 0;
  std::int64_t mem_mb = 0;       // 0: not known
  std::int64_t mem_used_mb = 0;  // requested by the jobs running there
  std::int32_t jobs = 0;         // jobs running or suspended there
  std::int64_t last_contact_ms = 0;  // since this node last heard from it (0: itself)
  CORRAL_MSGPACK_MAP(name, state, reason, cores, cores_used, mem_mb, mem_used_mb, jobs, last_contact_ms)
};
struct NodesReq {
  bool all = true;
  CORRAL_MSGPACK_MAP(all)
};
struct NodesRep {
  std::vector<NodeLine> nodes;
  CORRAL_MSGPACK_MAP(nodes)
};
// `corral acct [--user U] [--project P] [--since T]` (added after version 1): every ended
// job, as sacct. `since` is as the user gave it (a duration back from now, or an ISO week);
// corrald judges it against its own clock.
struct AcctReq {
  std::string user;
  std::string project;
  std::string since;
  CORRAL_MSGPACK_MAP(user, project, since)
};
struct AcctRun {
  std::int32_t run = 0;          // 1-based
  std::vector<std::string> nodes;
  double start = 0;
  double end = 0;
  std::string end_reason;        // "preempted" for a run stopped to requeue the job
  std::int32_t exit_code = -1;
  CORRAL_MSGPACK_MAP(run, nodes, start, end, end_reason, exit_code)
};
struct AcctJob {
  std::uint64_t id = 0;
  std::string name;
  std::string user;
  std::string project;
  std::string queue;
  std::vector<std::string> nodes;  // every node any run used
  double submit = 0;
  double start = 0;              // of the first run (0: never started)
  double end = 0;
  std::string end_reason;
  std::int32_t exit_code = -1;
  std::int32_t cpus = 0;
  double su_charged = 0;         // service units over every run (0 where nothing is charged)
  std::vector<AcctRun> runs;
  CORRAL_MSGPACK_MAP(id, name, user, project, queue, nodes, submit, start, end, end_reason, exit_code,
                     cpus, su_charged, runs)
};
struct AcctRep {
  double since = 0;              // the start of the window as corrald read --since (0: all)
  std::vector<AcctJob> jobs;     // by id
  CORRAL_MSGPACK_MAP(since, jobs)
};
// `corral alloc` and `corral alloc set PROJECT WEEK SLOTS [WEEK SLOTS...]` (added after version
// 1). set: root or an operator; each change as AllocSetting (slots 0 removes the allocation).
struct AllocSetting {
  std::string project;
  std::string week;              // ISO week, 2026-W48
  std::int32_t slots = 0;
  CORRAL_MSGPACK_MAP(project, week, slots)
};
struct AllocReq {
  std::vector<AllocSetting> set; // empty: only show the calendar
  CORRAL_MSGPACK_MAP(set)
};
// One project in one week: its allocated slots and what it used (slot-hours held by its runs,
// and their average over the part of the week gone).
struct AllocLine {
  std::string week;
  std::string project;
  std::int32_t allocated = 0;
  double used_slot_hours = 0;
  double used_slots = 0;
  CORRAL_MSGPACK_MAP(week, project, allocated, used_slot_hours, used_slots)
};
struct AllocRep {
  std::string current_week;
  std::int32_t horizon_weeks = 0;
  std::vector<AllocLine> weeks;  // by week, then project
  CORRAL_MSGPACK_MAP(current_week, horizon_weeks, weeks)
};
struct MeshReq {
  bool members = true;           // include the member list
  CORRAL_MSGPACK_MAP(members)
};
struct MeshRep {
  MeshStatus mesh;
  CORRAL_MSGPACK_MAP(mesh)
};
// `corral exec NODE COMMAND` from a process of running job `job` (added after version 1): the
// agent answers with the command's output as it comes (ExecOut, any number) and then its end
// (ExecRep), or an ErrorRep when it refuses. With `input`, the caller sends its stdin after the
// request (ExecIn, any number, the last with eof); without, the command reads /dev/null.
struct ExecReq {
  std::uint64_t job = 0;         // the caller's CORRAL_JOBID
  std::string node;
  std::string command;           // run by /bin/sh -c on the node
  bool input = false;
  CORRAL_MSGPACK_MAP(job, node, command, input)
};
struct ExecIn {
  std::string data;
  bool eof = false;              // the caller's stdin ended: the command's stdin closes
  CORRAL_MSGPACK_MAP(data, eof)
};
struct ExecOut {
  std::int32_t stream = 1;       // 1 stdout, 2 stderr
  std::string data;
  CORRAL_MSGPACK_MAP(stream, data)
};
struct ExecRep {
  std::int32_t exit_code = 0;    // the command's exit status; 128+N when signal N killed it
  CORRAL_MSGPACK_MAP(exit_code)
};
struct ErrorRep {
  std::string code;              // invalid | not_found | permission | busy | internal | proto | disk_full
  std::string message;
  CORRAL_MSGPACK_MAP(code, message)
};

// ------------------------------------------------------------ PUB events --

// One published event. `seq` counts up by one per event from one agent
// (`node`, `boot` identifies the agent's run) so a subscriber sees gaps.
struct Event {
  std::uint64_t seq = 0;
  double time = 0;               // epoch seconds
  std::string node;
  double boot = 0;               // epoch seconds the agent started (seq restarts at 1)
  std::string kind;              // heartbeat | submitted | started | ended | suspended |
                                 // resumed | requeued | usage
  std::uint64_t job = 0;         // 0 for heartbeat
  std::string user;
  std::string reason;
  std::int32_t exit_code = -1;
  std::vector<int> cores;
  double cpu_seconds = 0;        // usage
  std::int64_t rss_mb = 0;
  double submit_time = 0;        // started: lets subscribers measure latency
  // heartbeat summary
  std::int32_t running = 0;
  std::int32_t suspended = 0;
  std::int32_t pending = 0;
  std::int32_t slots_used = 0;
  std::int32_t slots_total = 0;
  // ended and requeued (added after version 1): the end of run number `run` (1-based) and its
  // reason: "preempted" for a requeued event (the run was stopped, the job waits again), the
  // job's end reason for an ended one; `start_time` is when that run started.
  std::string end_reason;
  std::int32_t run = 0;
  double start_time = 0;
  CORRAL_MSGPACK_MAP(seq, time, node, boot, kind, job, user, reason, exit_code, cores, cpu_seconds,
                     rss_mb, submit_time, running, suspended, pending, slots_used, slots_total,
                     end_reason, run, start_time)
};

// ------------------------------------------------------------ envelope --

using Message = std::variant<SubmitReq, SubmitRep, StatReq, StatRep, CancelReq, CancelRep, WaitReq,
                             WaitRep, NodeReq, NodeRep, ErrorRep, Event, ControlReq, ControlRep,
                             ReportReq, ReportRep, MeshReq, MeshRep, NodeAdminReq, NodeAdminRep,
                             NodesReq, NodesRep, AcctReq, AcctRep, AllocReq, AllocRep, ExecReq, ExecOut,
                             ExecRep, ExecIn>;

// Wire name of each alternative, in variant order.
std::string_view type_name(const Message& m);

// Envelope bytes for a message.
std::string encode(const Message& m);
// Parses envelope bytes. Throws ProtoError (clear text) on garbage, truncated
// data, a wrong magic, another protocol version, an unknown type or a body
// of the wrong shape.
Message decode(std::string_view bytes);
// Same, with a tighter cap on array/map/string element counts (the daemon
// uses a small cap for requests from unprivileged users).
Message decode(std::string_view bytes, std::size_t max_elems);

// 4-byte big-endian length + payload, for stream sockets.
std::string frame(std::string_view payload);

// Accumulates stream bytes and yields complete frames.
class FrameReader {
 public:
  // Buffers grow as bytes arrive, never ahead of them (an announced length is not allocated) and
  // never past the end of the frame being read.
  void feed(const char* data, std::size_t n);
  // True and `out` set when a whole frame is buffered. Throws ProtoError on a
  // length above kMaxFrame.
  bool next(std::string& out);
  std::size_t buffered() const { return buf_.size() - pos_; }

 private:
  std::string buf_;
  std::size_t pos_ = 0;
};

// Job states and end reasons, spelled once.
namespace state {
inline constexpr std::string_view kPending = "pending";
inline constexpr std::string_view kRunning = "running";
inline constexpr std::string_view kSuspended = "suspended";
inline constexpr std::string_view kEnded = "ended";
inline constexpr std::string_view kAll[] = {kPending, kRunning, kSuspended, kEnded};
}  // namespace state

// Why a pending job waits (JobInfo::wait_reason), as squeue's reasons: the jobs it depends on;
// cores, memory or jobfs that running jobs hold; a reservation of a job ahead of it; its
// project's allocation; jobs ahead of it in the queue's order; its array's %max_running (as
// Slurm's JobArrayTaskLimit).
namespace wait {
inline constexpr std::string_view kDependency = "dependency";
inline constexpr std::string_view kResources = "resources";
inline constexpr std::string_view kReservation = "reservation";
inline constexpr std::string_view kAllocation = "allocation";
inline constexpr std::string_view kPriority = "priority";
inline constexpr std::string_view kHeld = "held";
inline constexpr std::string_view kArrayLimit = "array_limit";
}  // namespace wait

// Holds of a pending job (corral hold): a user's own, or an operator's (only root or an
// operator releases that one), as PBS's u and o holds.
namespace hold {
inline constexpr std::string_view kUser = "user";
inline constexpr std::string_view kOperator = "operator";
}  // namespace hold

// The JSON field names of a pending job's plan in `corral stat --json`.
namespace field {
inline constexpr std::string_view kPlannedStart = "planned_start";
inline constexpr std::string_view kWaitReason = "wait_reason";
inline constexpr std::string_view kWaitDetail = "wait_detail";
inline constexpr std::string_view kDepend = "depend";
}  // namespace field

}  // namespace corral::proto
