// The mesh's replicated state machine: what must not be lost when the
// coordinator dies. Every replica applies the same committed entries
// (proto/mesh.hpp) in the same order and so holds the same MeshState.
//
// apply() is deterministic (no clock, no randomness, ordered containers) and
// total: an entry that would break an invariant (a second start of a running
// job, a decision of an older coordinator term, the end of a run that is not
// the current one) changes nothing and comes back refused with the reason.
// It never throws on a well-formed entry, so the consensus layer never sees a
// failing apply (libraft wedges a replica whose apply fails).
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "proto/mesh.hpp"
#include "proto/spec_check.hpp"

namespace corral::service {

// One run of a replicated job.
struct MeshRun {
  std::vector<std::string> nodes;  // first node runs the script
  std::uint64_t term = 0;          // coordinator term of the start decision
  std::uint64_t decision = 0;
  double start = 0;
  double end = 0;                  // 0: still running
  std::string end_reason;          // empty while running; "preempted" when requeued
  std::int32_t exit_code = -1;
  bool backfilled = false;         // started backfilled (checkpoint policy)
  double backfill_estimate = 0;    // its window (s from its start)
  double suspended_since = 0;      // while suspended: since when
  double suspended_s = 0;          // suspended time before that
  bool held = false;               // suspended by a user: only a user's resume thaws it
  std::string stopping;            // order::kRequeue or kCheckpoint once ordered; "" else
  // Its last order (JobOrdered), sent again to its node by a new coordinator.
  std::string order;
  std::string order_reason;
  std::uint64_t order_term = 0;
  std::uint64_t order_decision = 0;
  bool order_pba = false;
  std::vector<std::int32_t> slots;   // each node's share, in the order of `nodes`; empty: one node, the whole job
  std::vector<std::int64_t> mem_mb;
  // NCI charging (mesh_charges.hpp): the charge factor of its start, and once its end (or
  // requeue) applied, the running seconds and service units it was charged (-1: not yet).
  double charge = 0;
  std::int64_t charged_s = -1;
  double su = 0;
  // Whose cancel of it is committed (CancelAsked; "" none): sent to its nodes until it ends.
  std::string cancel_by;
  // Its last suspend or resume order (JobSuspended): the nodes that carried it out, and whether
  // one failed it (the run was put back as before; the order is not sent again).
  std::vector<std::string> order_acked;
  bool order_failed = false;
  CORRAL_MSGPACK_MAP(nodes, term, decision, start, end, end_reason, exit_code, backfilled, backfill_estimate,
                     suspended_since, suspended_s, held, stopping, order, order_reason, order_term,
                     order_decision, order_pba, slots, mem_mb, charge, charged_s, su, cancel_by, order_acked,
                     order_failed)
};

struct MeshJob {
  std::uint64_t id = 0;
  proto::JobSpec spec;
  std::string user;
  std::uint32_t uid = 0;
  std::uint32_t gid = 0;
  double submit_time = 0;
  std::string state;               // proto::state: pending | running | suspended | ended
  std::vector<MeshRun> runs;       // oldest first; runs.size() is the current run number
  std::string end_reason;          // the job's, once ended (an array's as soon as it is ending())
  std::int32_t exit_code = -1;
  std::string hold;                // proto::hold (user, operator) while held; "" not held
  std::string hold_by;             // who held it
  double end_time = 0;             // when it ended (the JobEnded entry's time)
  std::string end_message;         // the JobEnded entry's words
  std::int64_t work_done = 0;      // work kept by its checkpoints (s)
  std::int32_t checkpoints = 0;
  std::int32_t pba_preemptions = 0;  // PBA's requeues of it (its requeue bound)
  // Job arrays. A task: its array and its index (array_id 0: not a task). The array itself
  // (is_array()) never runs and stays pending until it ends: its tasks are handed out
  // (TasksHanded) in index order from array_next, or one ahead of its turn (array_ahead, indices
  // array_next has not reached); array_handed counts them, array_failed those that ended but
  // completed. It ends when its last task does (completed, or failed when any did not complete).
  // Ended (cancelled) while tasks of it run, it is ending(): its end_reason and end_message are
  // set, it hands out no more tasks, and it ends when its last running task does, as a
  // standalone node's array does.
  std::uint64_t array_id = 0;
  std::int64_t array_index = -1;
  std::int64_t array_next = 0;
  std::vector<std::int64_t> array_ahead;
  std::int64_t array_handed = 0;
  std::int64_t array_failed = 0;
  CORRAL_MSGPACK_MAP(id, spec, user, uid, gid, submit_time, state, runs, end_reason, exit_code, hold,
                     hold_by, end_time, work_done, checkpoints, pba_preemptions, end_message, array_id,
                     array_index, array_next, array_ahead, array_handed, array_failed)
  bool is_array() const { return spec.array.on() && array_id == 0; }
  bool ending() const { return is_array() && state != proto::state::kEnded && !end_reason.empty(); }
};

// The cores and memory the current run of job j holds on its i-th node: that node's share, or
// the whole request (an entry of version 1 names one node without shares).
inline std::int32_t share_slots(const MeshJob& j, std::size_t i) {
  const MeshRun& run = j.runs.back();
  if (run.slots.size() == run.nodes.size() && i < run.slots.size()) return run.slots[i];
  return proto::least_slots(j.spec);
}
inline std::int64_t share_mem_mb(const MeshJob& j, std::size_t i) {
  const MeshRun& run = j.runs.back();
  if (run.mem_mb.size() == run.nodes.size() && i < run.mem_mb.size()) return run.mem_mb[i];
  return proto::mem_for_slots(j.spec, share_slots(j, i));
}

struct MeshNode {
  std::string state = std::string(proto::mesh::admin::kUp);
  std::string reason;
  CORRAL_MSGPACK_MAP(state, reason)
};

struct MeshGrant {
  double su = 0;                   // granted each period
  std::int64_t every = 0;          // the period (s); 0: one grant for all time
  CORRAL_MSGPACK_MAP(su, every)
  bool operator==(const MeshGrant&) const = default;
};

// The whole replicated state; also the snapshot's content.
struct MeshData {
  std::uint64_t next_id = 1;
  std::uint64_t term = 0;          // highest coordinator term that decided a start
  std::map<std::uint64_t, MeshJob> jobs;
  std::map<std::string, std::uint64_t> tokens;             // submission token -> job id
  std::set<std::uint64_t> decisions;                       // applied decision ids of `term`
  std::map<std::string, MeshNode> nodes;
  std::map<std::string, MeshGrant> grants;                 // by project
  std::map<std::string, std::int32_t> allocations;         // "project/week" -> slots
  std::uint64_t applied = 0;       // entries applied (refused ones included)
  // Week 0 of charging and of the grants' periods: Monday 00:00 UTC of the first start's week.
  std::int64_t charge_origin = 0;
  CORRAL_MSGPACK_MAP(next_id, term, jobs, tokens, decisions, nodes, grants, allocations, applied,
                     charge_origin)
};

// What applying one entry did.
struct Outcome {
  bool ok = false;
  std::string reason;              // why it was refused (empty when ok)
  std::uint64_t job = 0;           // the job concerned (the new id for an accepted job)
};

class MeshState {
 public:
  // Applies one entry. Never throws for a decoded entry.
  Outcome apply(const proto::mesh::Entry& e);
  // Decodes and applies; bytes that are not an entry are refused (not thrown).
  Outcome apply_bytes(std::string_view bytes);

  // The whole state as bytes, and back. restore() throws proto::ProtoError on
  // bytes that are not a snapshot and then leaves the state unchanged.
  std::string snapshot() const;
  void restore(std::string_view bytes);

  const MeshData& data() const { return d_; }
  const MeshJob* job(std::uint64_t id) const;
  // The jobs not ended (pending, held, running, suspended), by id: what a
  // pass looks at, however many ended jobs the state keeps for accounting.
  const std::set<std::uint64_t>& live() const { return live_; }
  // Jobs currently running or suspended with `node` among their nodes.
  std::vector<std::uint64_t> jobs_on(const std::string& node) const;
  // Job arrays: the id of task `index` of `array` (0: not handed out), the ids of every task of
  // `array` handed out (by index), and those of them not ended.
  std::uint64_t task(std::uint64_t array, std::int64_t index) const;
  std::vector<std::uint64_t> tasks(std::uint64_t array) const;
  const std::set<std::uint64_t>& live_tasks(std::uint64_t array) const;

 private:
  Outcome on(const proto::mesh::JobAccepted& e);
  Outcome on(const proto::mesh::JobStarted& e);
  Outcome on(const proto::mesh::JobEnded& e);
  Outcome on(const proto::mesh::JobRequeued& e);
  Outcome on(const proto::mesh::JobSuspended& e);
  Outcome acknowledged(MeshJob& j, const proto::mesh::JobSuspended& e);  // a node's, of an order
  Outcome on(const proto::mesh::NodeAdmin& e);
  Outcome on(const proto::mesh::GrantSet& e);
  Outcome on(const proto::mesh::Charge& e);
  Outcome on(const proto::mesh::AllocationSet& e);
  Outcome on(const proto::mesh::JobHeld& e);
  Outcome on(const proto::mesh::JobMoved& e);
  Outcome on(const proto::mesh::JobOrdered& e);
  Outcome on(const proto::mesh::CancelAsked& e);
  Outcome on(const proto::mesh::TasksHanded& e);
  // A new pending job of `e` (its token aside): its id from the counter.
  MeshJob& add_job(const proto::mesh::JobAccepted& e);
  // Task `index` of `arr`, a new pending job; its id.
  std::uint64_t hand_out(MeshJob& arr, std::int64_t index);
  // An array's end (JobEnded of run 0: cancelled, dependency never met): its pending tasks end
  // with it, and it ends at once, or once its running tasks ended (ending()).
  Outcome end_array(MeshJob& arr, const proto::mesh::JobEnded& e);
  // An array's end once its last task ended; a cancelled array's pending tasks ended with it.
  void settle_array(MeshJob& arr, double at);
  void end_array_tasks(const MeshJob& arr, double at);
  // Why a decision (term, decision) is refused (empty: it is not), and taking it.
  std::string stale(std::uint64_t term, std::uint64_t decision) const;
  void take(std::uint64_t term, std::uint64_t decision);
  // Keeps `live_` in step with job `id` after an entry concerned it.
  void track(std::uint64_t id);
  // Charges the current run of `j` as it ends at `at`: once (a run charged already is left).
  void charge_run(MeshJob& j, double at);

  MeshData d_;
  std::set<std::uint64_t> live_;  // derived from d_.jobs: not in the snapshot
  std::map<std::pair<std::uint64_t, std::int64_t>, std::uint64_t> tasks_;  // (array, index) -> task: derived
  std::map<std::uint64_t, std::set<std::uint64_t>> live_tasks_;             // by array: derived
};

}  // namespace corral::service
