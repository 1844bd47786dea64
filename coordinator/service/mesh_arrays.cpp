// Job arrays in the replicated state (proto/mesh.hpp TasksHanded): the array is one job that
// never runs; its tasks become jobs of their own only as the coordinator hands them out, each
// then started, ended and charged as any job (a second start of a task is refused as a second
// start of a job is). Which indices were handed out is the array's array_next and array_ahead,
// so a task is handed out once whatever the order of the entries. The array ends when its last
// task ends, in the same apply: every replica sees the same end. A cancelled array's end is
// committed at once, but it is ending() (live, handing out nothing) until its running tasks end.
#include <algorithm>
#include <limits>

#include "coordinator/names.hpp"
#include "coordinator/service/mesh_state.hpp"
#include "proto/spec_check.hpp"

namespace corral::service {
namespace {

namespace st = proto::state;

Outcome no_tasks(std::uint64_t job, std::string why) { return Outcome{false, std::move(why), job}; }
Outcome tasks_done(std::uint64_t job) { return Outcome{true, {}, job}; }

}  // namespace

Outcome MeshState::on(const proto::mesh::TasksHanded& e) {
  auto it = d_.jobs.find(e.array);
  if (it == d_.jobs.end()) return no_tasks(e.array, "no job " + std::to_string(e.array));
  MeshJob& arr = it->second;
  const std::string id = std::to_string(arr.id);
  if (!arr.is_array()) return no_tasks(e.array, "job " + id + " is not a job array");
  if (e.index >= 0) {
    if (std::uint64_t t = task(arr.id, e.index)) return tasks_done(t);  // handed out already: that task
    if (std::string why = proto::check_task_index(arr.id, arr.spec.array, e.index); !why.empty())
      return no_tasks(e.array, why);
  }
  if (arr.state == st::kEnded || arr.ending())
    return no_tasks(e.array, "job array " + id + (arr.ending() ? " is ending (" : " has ended (") + arr.end_reason +
                                 "): no task of it runs any more");
  if (e.index >= 0) {
    if (e.index >= arr.array_next) arr.array_ahead.push_back(e.index);
    return tasks_done(hand_out(arr, e.index));
  }
  if (e.count <= 0) return no_tasks(e.array, "no tasks to hand out");
  const proto::ArraySpec& a = arr.spec.array;
  for (std::int32_t n = 0; n < e.count && arr.array_next <= a.last;) {
    const std::int64_t index = arr.array_next;
    arr.array_next += a.step;
    if (auto ahead = std::find(arr.array_ahead.begin(), arr.array_ahead.end(), index); ahead != arr.array_ahead.end()) {
      arr.array_ahead.erase(ahead);  // handed out before its turn
      continue;
    }
    track(hand_out(arr, index));
    ++n;
  }
  return tasks_done(arr.id);
}

std::uint64_t MeshState::hand_out(MeshJob& arr, std::int64_t index) {
  MeshJob& t = add_job(proto::mesh::JobAccepted{arr.spec, arr.user, arr.uid, arr.gid, arr.submit_time, ""});
  t.hold = arr.hold;
  t.hold_by = arr.hold_by;
  t.array_id = arr.id;
  t.array_index = index;
  arr.array_handed += 1;
  tasks_[{arr.id, index}] = t.id;
  return t.id;
}

Outcome MeshState::end_array(MeshJob& arr, const proto::mesh::JobEnded& e) {
  const std::string id = std::to_string(arr.id);
  if (e.run != 0) return no_tasks(arr.id, "job array " + id + " never runs: its end names no run");
  if (arr.state == st::kEnded) return no_tasks(arr.id, "job array " + id + " has ended (" + arr.end_reason + ")");
  if (arr.ending())
    return no_tasks(arr.id, "job array " + id + " is ending (" + arr.end_reason + "): its running tasks are being stopped");
  arr.end_reason = e.reason;
  arr.exit_code = e.exit_code;
  arr.end_message = e.message;
  end_array_tasks(arr, e.time);
  settle_array(arr, e.time);
  return tasks_done(arr.id);
}

void MeshState::settle_array(MeshJob& arr, double at) {
  if (arr.state == st::kEnded || !live_tasks(arr.id).empty()) return;
  if (arr.ending()) {  // its last running task ended: the end committed before is now the array's
    arr.state = std::string(st::kEnded);
    arr.end_time = at;
    track(arr.id);
    return;
  }
  if (arr.array_handed < arr.spec.array.tasks()) return;
  const std::string n = std::to_string(arr.spec.array.tasks());
  arr.state = std::string(st::kEnded);
  arr.end_time = at;
  const bool failed = arr.array_failed > 0;
  arr.end_reason = std::string(name(failed ? EndReason::Failed : EndReason::Completed));
  arr.exit_code = failed ? 1 : 0;
  arr.end_message = failed ? std::to_string(arr.array_failed) + " of " + n + " tasks did not complete"
                           : "all " + n + " tasks completed";
  track(arr.id);
}

// The array ended before its tasks (cancelled, or its dependency never met): those waiting end
// with it; those running end as their nodes stop them (the coordinator cancels them).
void MeshState::end_array_tasks(const MeshJob& arr, double at) {
  const std::set<std::uint64_t> live = live_tasks(arr.id);
  for (std::uint64_t id : live) {
    MeshJob& t = d_.jobs.at(id);
    if (t.state != st::kPending) continue;
    t.state = std::string(st::kEnded);
    t.end_reason = arr.end_reason;
    t.end_time = at;
    t.end_message = "ended with its array " + std::to_string(arr.id) +
                    (arr.end_message.empty() ? "" : ": " + arr.end_message);
    track(id);
  }
}

std::uint64_t MeshState::task(std::uint64_t array, std::int64_t index) const {
  auto it = tasks_.find({array, index});
  return it == tasks_.end() ? 0 : it->second;
}

std::vector<std::uint64_t> MeshState::tasks(std::uint64_t array) const {
  std::vector<std::uint64_t> out;
  for (auto it = tasks_.lower_bound({array, std::numeric_limits<std::int64_t>::min()});
       it != tasks_.end() && it->first.first == array; ++it)
    out.push_back(it->second);
  return out;
}

const std::set<std::uint64_t>& MeshState::live_tasks(std::uint64_t array) const {
  static const std::set<std::uint64_t> kNone;
  auto it = live_tasks_.find(array);
  return it == live_tasks_.end() ? kNone : it->second;
}

}  // namespace corral::service
