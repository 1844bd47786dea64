// Job arrays in a mesh, the coordinator's side. An array is one replicated job that never runs;
// the coordinator hands its tasks to the pass a few at a time (one TasksHanded entry for several),
// as a standalone node does (agent/arrays.cpp): at most kArrayWindow of an array's tasks wait at
// once, and never more tasks live than its %max_running, which the pass also holds to when a user
// handed one out ahead of its turn. From then on a task is a job: started, ended, cancelled,
// held and charged through the log as any job. An array's cancel ends it and its waiting tasks
// in one entry; its running tasks are stopped by their nodes (a new coordinator stops them too),
// and the array stays live until they ended.
#include <algorithm>

#include "coordinator/names.hpp"
#include "coordinator/service/coordinator_loop.hpp"
#include "proto/spec_check.hpp"

namespace corral::service {
namespace {

// Pending tasks of one array the pass sees at once: enough to fill the mesh's free cores with
// small tasks between two passes, few enough that a pass never walks a huge array.
constexpr std::int64_t kArrayWindow = 64;

DeskAnswer task_refused(std::uint64_t job, std::string why, std::string code) {
  return DeskAnswer{"refused", job, 0, std::move(why), std::move(code)};
}

DeskAnswer proposal_failed(const Proposed& p) {
  return DeskAnswer{"error", 0, 0, p.status == Status::ok ? p.applied.reason : std::string(status_name(p.status)), ""};
}

}  // namespace

void CoordinatorLoop::feed_arrays() {
  for (std::uint64_t id : state_.live()) {
    const MeshJob& arr = *state_.job(id);
    if (!arr.is_array() || arr.ending() || !arr.hold.empty() || blocked_.count(id) || feeding_.count(id)) continue;
    const proto::ArraySpec& a = arr.spec.array;
    const std::set<std::uint64_t>& live = state_.live_tasks(id);
    std::int64_t waiting = 0;
    for (std::uint64_t t : live) waiting += state_.job(t)->state == proto::state::kPending;
    std::int64_t n = std::min(a.tasks() - arr.array_handed, kArrayWindow - waiting);
    if (a.max_running > 0) n = std::min(n, a.max_running - static_cast<std::int64_t>(live.size()));
    if (n <= 0) continue;
    feeding_.insert(id);
    proto::mesh::TasksHanded e{id, -1, static_cast<std::int32_t>(n)};
    c_.propose(proto::mesh::encode_entry(e), [this, alive = alive_, id](const Proposed&) {
      if (!*alive) return;
      feeding_.erase(id);
      dirty_ = true;
    });
  }
}

bool CoordinatorLoop::task_room(const MeshJob& j, std::map<std::uint64_t, std::int64_t>& room) const {
  if (j.array_id == 0 || j.spec.array.max_running <= 0) return true;
  auto [it, fresh] = room.try_emplace(j.array_id, j.spec.array.max_running);
  if (fresh)
    for (std::uint64_t t : state_.live_tasks(j.array_id))
      if (state_.job(t)->state != proto::state::kPending || proposing_.count(t)) --it->second;
  if (it->second <= 0) return false;
  --it->second;
  return true;
}

// The array ends in the log at once, but stays live, ending(), while its running tasks are being
// stopped; the answer says which (ended, or running as `corral stat` shows it then).
void CoordinatorLoop::cancel_array(const MeshJob& arr, const proto::jobs::CancelAsk& ask, const JobDesk::Done& done) {
  auto answer = [this, done](std::uint64_t id) {
    const MeshJob* now = state_.job(id);
    const bool ended = !now || now->state == proto::state::kEnded;
    for (std::uint64_t t : state_.live_tasks(id)) stop_cancelled_task(*state_.job(t));
    done(DeskAnswer{"ok", id, 0, std::string(ended ? proto::state::kEnded : proto::state::kRunning), ""});
  };
  if (arr.ending()) return answer(arr.id);  // asked again: its tasks' cancels are committed or sent
  proto::mesh::JobEnded e{arr.id, 0, std::string(name(EndReason::Cancelled)), -1, env_.wall_s(), "cancelled by " + ask.who};
  c_.propose(proto::mesh::encode_entry(e), [alive = alive_, done, answer, id = arr.id](const Proposed& p) {
    if (p.status != Status::ok || !p.applied.ok) return done(proposal_failed(p));
    if (!*alive) return done(DeskAnswer{"ok", id, 0, std::string(proto::state::kEnded), ""});
    answer(id);
  });
}

// A running task of a cancelled array: its cancel committed (CancelAsked) as a user's cancel of a
// running job is, so that this coordinator and any after it send it until the task ends.
void CoordinatorLoop::stop_cancelled_task(const MeshJob& t) {
  if (t.array_id == 0 || !t.runs.back().cancel_by.empty()) return;  // committed: resend_cancels()
  if (t.state != proto::state::kRunning && t.state != proto::state::kSuspended) return;
  const MeshJob* arr = state_.job(t.array_id);
  if (!arr || arr->end_reason != name(EndReason::Cancelled)) return;  // ending() or ended cancelled
  commit_cancel(t, "the cancel of array " + std::to_string(arr->id), {});
}

void CoordinatorLoop::task_ask(const proto::jobs::CancelAsk& ask, const JobDesk::Done& done) {
  const std::string id = std::to_string(ask.job), named = id + "[" + std::to_string(ask.index) + "]";
  const MeshJob* arr = state_.job(ask.job);
  if (!arr) return done(task_refused(ask.job, "unknown job id " + id, "not_found"));
  if (!arr->is_array()) return done(task_refused(ask.job, "job " + id + " is not a job array (no " + named + ")", "invalid"));
  if (std::string why = proto::check_task_index(ask.job, arr->spec.array, ask.index); !why.empty())
    return done(task_refused(ask.job, why, "not_found"));
  if (std::uint64_t t = state_.task(ask.job, ask.index)) return done(DeskAnswer{"ok", t, 0, "", ""});
  if (arr->state == proto::state::kEnded || arr->ending())
    return done(task_refused(ask.job, "task " + named + " never ran: its array was ended (" + arr->end_reason + ")", "invalid"));
  if (!ask.admin && ask.uid != arr->uid)
    return done(task_refused(ask.job, "job " + id + " belongs to " + arr->user +
                                          "; only its owner, root or an operator may act on its tasks", "permission"));
  proto::mesh::TasksHanded e{ask.job, ask.index, 0};
  c_.propose(proto::mesh::encode_entry(e), [this, alive = alive_, done](const Proposed& p) {
    if (*alive) dirty_ = true;
    if (p.status == Status::ok && p.applied.ok) done(DeskAnswer{"ok", p.applied.value, 0, "", ""});
    else if (p.status == Status::ok) done(task_refused(0, p.applied.reason, "invalid"));
    else done(proposal_failed(p));
  });
}

}  // namespace corral::service
