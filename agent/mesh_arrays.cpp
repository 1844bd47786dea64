// Job arrays through the mesh, the daemon's side. `corral stat` shows an array as one job with
// its tasks' counts (queued: not yet handed to the pass), its tasks under it with -t, and one
// task named ID[INDEX] from this member's replica (a task not handed out yet as queued; one
// handed out as any job, with why it waits). Any
// other request naming ID[INDEX] (cancel, hold, release, wait, suspend, ...) first asks the
// coordinator for the task's id (it hands the task out ahead of its turn when needed, as a
// standalone node does), then goes on as a request for that job.
#include <map>

#include "agent/daemon.hpp"
#include "agent/local_socket.hpp"
#include "agent/mesh_link.hpp"
#include "proto/spec_check.hpp"

namespace corral::agent {
namespace {

using service::MeshJob;

// Array `arr` as users see it, from its tasks handed out so far.
proto::JobInfo mesh_array_info(const MeshJob& arr, const std::vector<const MeshJob*>& tasks) {
  proto::JobInfo i = mesh_info(arr);
  proto::ArrayCounts& n = i.array_counts;
  for (const MeshJob* t : tasks) {
    if (t->state == proto::state::kPending) ++n.pending;
    else if (t->state != proto::state::kEnded) ++n.running;
  }
  n.queued = arr.state == proto::state::kEnded || arr.ending() ? 0 : arr.spec.array.tasks() - arr.array_handed;
  n.ended = arr.spec.array.tasks() - n.queued - n.pending - n.running;
  n.failed = arr.array_failed;
  if (arr.state != proto::state::kEnded) i.state = n.running > 0 ? proto::state::kRunning : proto::state::kPending;
  i.wait_reason.clear();  // its tasks wait, each for its own reason
  i.wait_detail.clear();
  if (arr.state == proto::state::kEnded) i.comment = arr.end_message, i.end_time = arr.end_time;
  if (arr.ending()) i.comment = arr.end_message, i.end_reason.clear();  // ends once its running tasks end
  return i;
}

// Task `index` of array `id`, from the array and its tasks (jobs: mesh_->jobs(id)).
proto::Message mesh_task_stat(std::uint64_t id, std::int64_t index, const std::vector<MeshJob>& jobs) {
  const std::string named = std::to_string(id) + "[" + std::to_string(index) + "]";
  if (jobs.empty()) return proto::ErrorRep{"not_found", "unknown job id " + std::to_string(id)};
  const MeshJob& arr = jobs.front();
  if (!arr.is_array())
    return proto::ErrorRep{"invalid", "job " + std::to_string(id) + " is not a job array (no " + named + ")"};
  if (std::string why = proto::check_task_index(id, arr.spec.array, index); !why.empty())
    return proto::ErrorRep{"not_found", why};
  for (const MeshJob& t : jobs)
    if (t.array_id == id && t.array_index == index) return proto::StatRep{{mesh_info(t)}};
  if (arr.state == proto::state::kEnded || arr.ending())
    return proto::ErrorRep{"invalid", "task " + named + " never ran: its array was ended (" + arr.end_reason + ")"};
  proto::JobInfo j = mesh_info(arr);
  j.array_id = id;
  j.array_index = index;
  j.state = proto::state::kPending;
  j.stdout_path = mesh_output(arr.spec, false, id, id, index);
  j.stderr_path = mesh_output(arr.spec, true, id, id, index);
  j.comment = "queued: not yet handed to the scheduler";
  j.wait_reason.clear();
  j.wait_detail.clear();
  return proto::StatRep{{j}};
}

}  // namespace

proto::StatRep mesh_stat_list(const proto::StatReq& r, const std::vector<MeshJob>& jobs) {
  std::map<std::uint64_t, std::vector<const MeshJob*>> tasks;  // by array
  std::map<std::uint64_t, bool> arrays;
  for (const MeshJob& j : jobs) {
    if (j.array_id) tasks[j.array_id].push_back(&j);
    if (j.is_array()) arrays[j.id] = true;
  }
  proto::StatRep rep;
  rep.jobs.reserve(jobs.size());
  for (const MeshJob& j : jobs) {
    if (j.array_id && arrays.count(j.array_id)) continue;  // listed under its array (-t)
    if (!j.is_array()) {
      rep.jobs.push_back(mesh_info(j));
      continue;
    }
    const std::vector<const MeshJob*>& of = tasks[j.id];
    rep.jobs.push_back(mesh_array_info(j, of));
    if (r.tasks)
      for (const MeshJob* t : of) rep.jobs.push_back(mesh_info(*t));
  }
  return rep;
}

void Daemon::mesh_name_task(Client& c, proto::Message m, std::uint64_t array, std::int64_t index) {
  std::uint64_t ticket = c.mesh_ticket = ++mesh_tickets_;
  if (auto* s = std::get_if<proto::StatReq>(&m)) {
    mesh_->jobs(array, [this, fd = c.fd, ticket, array, index, r = *s](std::vector<MeshJob> jobs) mutable {
      proto::Message rep = mesh_task_stat(array, index, jobs);
      auto* one = std::get_if<proto::StatRep>(&rep);
      auto it = clients_.find(fd);
      if (!one || one->jobs.front().id == array || it == clients_.end() || it->second->mesh_ticket != ticket)
        return mesh_answer(fd, ticket, rep);  // refused, not handed out yet, or gone
      // A task handed out: listed as any job, with why it waits from the coordinator's pass.
      it->second->mesh_ticket = 0;
      r.id = one->jobs.front().id;
      r.index = -1;
      mesh_stat(*it->second, r);
    });
    return;
  }
  proto::jobs::CancelAsk ask = mesh_ask(c.peer, "task");
  ask.job = array;
  ask.index = index;
  mesh_->cancel(std::move(ask), [this, fd = c.fd, ticket, m](const SubmitResult& res) mutable {
    auto it = clients_.find(fd);
    if (it == clients_.end() || it->second->mesh_ticket != ticket) return;  // gone meanwhile
    if (!res.ok) return mesh_answer(fd, ticket, proto::ErrorRep{res.code, res.message});
    Client& cl = *it->second;
    cl.mesh_ticket = 0;
    if (auto* x = std::get_if<proto::CancelReq>(&m)) x->id = res.job, x->index = -1, mesh_cancel(cl, *x);
    else if (auto* w = std::get_if<proto::WaitReq>(&m)) w->id = res.job, w->index = -1, mesh_wait(cl, *w);
    else if (auto* ct = std::get_if<proto::ControlReq>(&m)) ct->id = res.job, ct->index = -1, mesh_job_admin(cl, *ct);
  });
}

}  // namespace corral::agent
