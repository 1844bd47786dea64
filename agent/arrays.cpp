// Job arrays (qsub -J FIRST-LAST[:STEP][%MAX], Grid Engine -t and -tc): one record stands for
// the whole array and never runs. Its tasks become records of their own (a job each: started,
// ended and journaled as any job) only when the scheduler is about to need them: at most
// kArrayWindow of an array's tasks wait in the queue at once, and never more tasks live than
// its limit of running ones. The array's record keeps the next index to hand out, so an array
// of 100,000 tasks is one journal entry at submit, and a restart hands out exactly the tasks
// not handed out before. Users name a task ID[INDEX], as PBS does.
#include <algorithm>

#include "agent/daemon.hpp"
#include "agent/local_socket.hpp"
#include "agent/node/launcher.hpp"
#include "proto/spec_check.hpp"

namespace corral::agent {
namespace {

// Pending tasks of one array the scheduler sees at once: enough to fill a node's cores with
// small tasks between two passes, few enough that a pass never walks a huge array.
constexpr std::int64_t kArrayWindow = 64;

std::string array_caller(const Peer& p) {
  std::string who = user_name(p.uid);
  return who.empty() ? std::to_string(p.uid) : who;
}

std::string task_name(std::uint64_t id, std::int64_t index) {
  return std::to_string(id) + "[" + std::to_string(index) + "]";
}

bool array_ahead_has(const JobRecord& arr, std::int64_t index) {
  return std::find(arr.array_ahead.begin(), arr.array_ahead.end(), index) != arr.array_ahead.end();
}

// Tasks not handed to the scheduler yet (none once the array is cancelled or ended).
std::int64_t array_queued(const JobRecord& arr) {
  const proto::ArraySpec& a = arr.spec.array;
  if (arr.ended() || arr.cancel_requested || arr.array_next > a.last) return 0;
  return (a.last - arr.array_next) / a.step + 1 - static_cast<std::int64_t>(arr.array_ahead.size());
}

void replace_all(std::string& s, const std::string& from, const std::string& to) {
  for (std::size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
    s.replace(at, from.size(), to);
}

}  // namespace

std::string task_path(const std::string& path, std::int64_t index) {
  if (path == "/dev/null") return path;
  std::string out = path;
  const std::string i = std::to_string(index);
  replace_all(out, "^array_index^", i);
  replace_all(out, "$TASK_ID", i);
  replace_all(out, "${TASK_ID}", i);
  return out == path ? path + "." + i : out;
}

void array_env(const JobRecord& t, std::map<std::string, std::string>& env) {
  const proto::ArraySpec& a = t.spec.array;
  const std::string index = std::to_string(t.array_index), array = std::to_string(t.array_id);
  env["CORRAL_ARRAY_INDEX"] = env["PBS_ARRAY_INDEX"] = env["SGE_TASK_ID"] = index;
  env["CORRAL_ARRAY_ID"] = array;
  env["PBS_ARRAY_ID"] = array + "[]";
  env["PBS_JOBID"] = task_name(t.array_id, t.array_index);
  env["JOB_ID"] = array;  // Grid Engine: every task has the array's job id
  env["SGE_TASK_FIRST"] = std::to_string(a.first);
  env["SGE_TASK_LAST"] = std::to_string(a.last);
  env["SGE_TASK_STEPSIZE"] = std::to_string(a.step);
}

JobRecord& Daemon::hand_out(JobRecord& arr, std::int64_t index) {
  JobRecord t;
  t.id = store_->next_id();  // throws StoreFull
  t.spec = arr.spec;
  t.spec.stdout_path = task_path(arr.spec.stdout_path, index);
  t.spec.stderr_path = arr.spec.join ? t.spec.stdout_path : task_path(arr.spec.stderr_path, index);
  t.env_blob = arr.env_blob;
  t.uid = arr.uid;
  t.gid = arr.gid;
  t.user = arr.user;
  t.group = arr.group;
  t.submit_time = arr.submit_time;
  t.array_id = arr.id;
  t.array_index = index;
  t.hold = arr.hold;
  t.hold_by = arr.hold_by;
  if (!t.hold.empty()) t.comment = "held by " + t.hold_by;
  t.waits_on = arr.spec.depend;
  store_->put(t);
  JobRecord& rec = *store_->find(t.id);
  if (!rec.hold.empty()) held_.insert(rec.id);
  if (!rec.waits_on.empty()) hold_for_dependencies(rec);
  else if (rec.hold.empty()) pending_.insert(rec.id);
  array_live_[arr.id].insert(rec.id);
  array_tasks_[{arr.id, index}] = rec.id;
  dirty_ = true;
  return rec;
}

void Daemon::feed_arrays() {
  for (auto it = array_live_.begin(); it != array_live_.end();) {
    JobRecord* arr = store_->find(it->first);
    if (!arr || !arr->is_array() || arr->ended()) {  // its last tasks may still be ending
      it = it->second.empty() ? array_live_.erase(it) : std::next(it);
      continue;
    }
    const proto::ArraySpec& a = arr->spec.array;
    std::set<std::uint64_t>& live = it->second;
    std::int64_t waiting = 0;
    for (std::uint64_t id : live) waiting += store_->jobs().at(id).state == proto::state::kPending;
    bool moved = false;
    try {
      while (!arr->cancel_requested && arr->array_next <= a.last && waiting < kArrayWindow &&
             (a.max_running == 0 || live.size() < static_cast<std::size_t>(a.max_running))) {
        const std::int64_t index = arr->array_next;
        arr->array_next += a.step;
        moved = true;
        if (auto ahead = std::find(arr->array_ahead.begin(), arr->array_ahead.end(), index); ahead != arr->array_ahead.end()) {
          arr->array_ahead.erase(ahead);  // handed out before its turn
          continue;
        }
        hand_out(*arr, index);
        ++waiting;
      }
    } catch (const StoreFull& e) {
      arr->array_next -= a.step;  // that task was not handed out: again at the next pass
      log_line("job " + std::to_string(arr->id) + ": cannot hand out array tasks: " + e.what());
    }
    if (moved) store_->put(*arr);
    settle_array(*arr);
    ++it;
  }
}

void Daemon::settle_array(JobRecord& arr) {
  if (arr.ended() || array_queued(arr) > 0 || !array_live_[arr.id].empty()) return;
  if (arr.cancel_requested) {
    finish(arr, EndReason::Cancelled, -1, arr.comment);
  } else if (arr.array_failed > 0) {
    finish(arr, EndReason::Failed, 1,
           std::to_string(arr.array_failed) + " of " + std::to_string(arr.spec.array.tasks()) + " tasks did not complete");
  } else {
    finish(arr, EndReason::Completed, 0, "all " + std::to_string(arr.spec.array.tasks()) + " tasks completed");
  }
}

void Daemon::array_task_ended(const JobRecord& task) {
  auto it = array_live_.find(task.array_id);
  if (it == array_live_.end()) return;
  it->second.erase(task.id);
  JobRecord* arr = store_->find(task.array_id);
  if (!arr || arr->ended()) return;
  if (!arr->cancel_requested && task.end_reason != name(EndReason::Completed)) {
    ++arr->array_failed;
    store_->put(*arr);
  }
  settle_array(*arr);
}

std::optional<proto::ErrorRep> Daemon::find_task(const Peer& p, std::uint64_t& id, std::int64_t index, bool hand) {
  JobRecord* arr = store_->find(id);
  const std::string named = task_name(id, index);
  if (!arr) return proto::ErrorRep{"not_found", "unknown job id " + std::to_string(id)};
  if (!arr->is_array()) return proto::ErrorRep{"invalid", "job " + std::to_string(id) + " is not a job array (no " + named + ")"};
  if (std::string why = proto::check_task_index(id, arr->spec.array, index); !why.empty())
    return proto::ErrorRep{"not_found", why};
  if (auto t = array_tasks_.find({id, index}); t != array_tasks_.end() && store_->find(t->second)) {
    id = t->second;
    return std::nullopt;
  }
  if (index < arr->array_next || array_ahead_has(*arr, index))
    return proto::ErrorRep{"not_found", "task " + named + " has ended; its record is no longer kept (keep_ended)"};
  if (arr->ended() || arr->cancel_requested)
    return proto::ErrorRep{"invalid", "task " + named + " never ran: its array was " +
                                          (arr->ended() ? "ended (" + arr->end_reason + ")" : "cancelled")};
  if (!hand) {
    id = 0;
    return std::nullopt;
  }
  if (!p.admin && p.uid != arr->uid)
    return proto::ErrorRep{"permission", "job " + std::to_string(arr->id) + " belongs to " + arr->user +
                                             "; only its owner or " + admins() + " may act on its tasks"};
  try {
    id = hand_out(*arr, index).id;
  } catch (const StoreFull& e) {
    log_line(std::string("state disk full: ") + e.what());
    return proto::ErrorRep{"disk_full", "state disk full: task " + named + " not handed out"};
  }
  arr->array_ahead.push_back(index);
  store_->put(*arr);
  return std::nullopt;
}

bool Daemon::array_room(const JobRecord& task) const {
  const JobRecord* arr = store_->find(task.array_id);
  auto it = array_live_.find(task.array_id);
  if (!arr || arr->spec.array.max_running == 0 || it == array_live_.end()) return true;
  std::int32_t running = 0;
  for (std::uint64_t id : it->second) running += store_->jobs().at(id).state != proto::state::kPending;
  return running < arr->spec.array.max_running;
}

bool Daemon::name_task(Client& c, proto::Message& m) {
  std::uint64_t* id = nullptr;
  std::int64_t* index = nullptr;
  bool hand = true;
  if (auto* s = std::get_if<proto::StatReq>(&m)) id = &s->id, index = &s->index, hand = false;
  else if (auto* x = std::get_if<proto::CancelReq>(&m)) id = &x->id, index = &x->index;
  else if (auto* w = std::get_if<proto::WaitReq>(&m)) id = &w->id, index = &w->index;
  else if (auto* ct = std::get_if<proto::ControlReq>(&m)) id = &ct->id, index = &ct->index;
  if (!index || *index < 0) return true;
  if (mesh_) {
    mesh_name_task(c, m, *id, *index);
    return false;
  }
  const std::uint64_t array = *id;
  if (auto refused = find_task(c.peer, *id, *index, hand)) {
    send(c, *refused);
    return false;
  }
  if (*id == 0) {  // stat of a task not handed out yet
    send(c, proto::StatRep{{queued_task_info(store_->jobs().at(array), *index)}});
    return false;
  }
  *index = -1;
  return true;
}

proto::Message Daemon::cancel_array(const Peer& p, JobRecord& arr) {
  const std::string who = array_caller(p);
  arr.cancel_requested = true;
  arr.comment = "cancelled by " + who;
  store_->put(arr);
  const std::set<std::uint64_t> live = array_live_[arr.id];
  for (std::uint64_t id : live) {
    JobRecord* t = store_->find(id);
    if (!t || t->ended() || t->cancel_requested) continue;
    if (t->state == proto::state::kPending) {
      finish(*t, EndReason::Cancelled, -1, "cancelled with its array by " + who);
      continue;
    }
    stop_for_cancel(*t, "cancel requested with its array by " + who);
  }
  poll_launcher();  // the ends are usually there at once
  settle_array(arr);
  log_line("job array " + std::to_string(arr.id) + " cancel requested by " + who);
  return proto::CancelRep{arr.id, arr.state};
}

proto::Message Daemon::hold_array(const Peer& p, JobRecord& arr, bool hold) {
  const std::string id = std::to_string(arr.id), who = array_caller(p);
  if (hold && !arr.hold.empty()) return proto::ControlRep{arr.id, arr.state, "already held by " + arr.hold_by};
  if (!hold && arr.hold.empty()) return proto::ErrorRep{"invalid", "job array " + id + " is not held"};
  if (!hold && arr.hold == proto::hold::kOperator && !p.admin)
    return proto::ErrorRep{"permission", "job array " + id + " was held by " + arr.hold_by + " (an operator); only " +
                                             admins() + " may release it"};
  arr.hold = hold ? std::string(p.admin ? proto::hold::kOperator : proto::hold::kUser) : "";
  arr.hold_by = hold ? who : "";
  store_->put(arr);
  int changed = 0;
  for (std::uint64_t tid : array_live_[arr.id]) {
    JobRecord& t = store_->jobs_mut().at(tid);
    if (t.state != proto::state::kPending || t.hold.empty() != hold) continue;
    changed += std::holds_alternative<proto::ControlRep>(on_hold(p, t, hold));
  }
  log_line("job array " + id + (hold ? " held by " : " released by ") + who);
  return proto::ControlRep{arr.id, arr.state, std::string(hold ? "held" : "released") + " (the array and " +
                                                  std::to_string(changed) + " waiting tasks)"};
}

void Daemon::array_info(const JobRecord& r, proto::JobInfo& j) const {
  j.array = r.spec.array;
  if (r.array_id) {
    j.array_id = r.array_id;
    j.array_index = r.array_index;
    return;
  }
  proto::ArrayCounts& n = j.array_counts;
  if (auto it = array_live_.find(r.id); it != array_live_.end())
    for (std::uint64_t id : it->second) {
      const std::string& st = store_->jobs().at(id).state;
      (st == proto::state::kPending ? n.pending : n.running) += 1;
    }
  n.queued = array_queued(r);
  n.ended = r.spec.array.tasks() - n.queued - n.pending - n.running;
  n.failed = r.array_failed;
  if (!r.ended()) j.state = n.running > 0 ? proto::state::kRunning : proto::state::kPending;
  j.wait_reason.clear();  // its tasks wait, each for its own reason
  j.wait_detail.clear();
  j.planned_start = 0;
}

proto::JobInfo Daemon::queued_task_info(const JobRecord& arr, std::int64_t index) const {
  proto::JobInfo j = info(arr);
  j.array_id = arr.id;
  j.array_index = index;
  j.array_counts = {};
  j.state = proto::state::kPending;
  j.stdout_path = task_path(arr.spec.stdout_path, index);
  j.stderr_path = arr.spec.join ? j.stdout_path : task_path(arr.spec.stderr_path, index);
  j.comment = "queued: not yet handed to the scheduler";
  return j;
}

void Daemon::stat_array(const Peer& p, const proto::StatReq& r, const JobRecord& arr, proto::StatRep& rep) const {
  rep.jobs.push_back(info(arr));
  if (!r.tasks) return;
  for (auto it = array_tasks_.lower_bound({arr.id, 0}); it != array_tasks_.end() && it->first.first == arr.id; ++it) {
    auto t = store_->jobs().find(it->second);
    if (t != store_->jobs().end() && (r.id != 0 || stat_match(p, r, t->second))) rep.jobs.push_back(info(t->second));
  }
}

}  // namespace corral::agent
