// Jobs through the mesh, the daemon's side: in a mesh, `corral submit` is
// checked here as standalone, then proposed to the mesh (agent/mesh_link.hpp
// forwards it to the coordinator and follows coordinator changes); the id is
// answered only once a majority holds the job. `corral stat` lists the mesh's
// jobs from the replicated state this member applied. The connection waits
// meanwhile (Client::mesh_ticket); its later requests are held back.
#include <string>

#include "agent/daemon.hpp"
#include "agent/local_socket.hpp"
#include "agent/mesh_link.hpp"
#include "proto/spec_check.hpp"

namespace corral::agent {

namespace {

std::string default_output(const proto::JobSpec& s, const char* kind, std::uint64_t id) {
  return s.cwd + "/" + s.name + kind + std::to_string(id);
}

// A replicated job as users see it (as info() shows a local one).
proto::JobInfo mesh_info(const service::MeshJob& j) {
  proto::JobInfo i;
  const proto::JobSpec& s = j.spec;
  i.id = j.id;
  i.name = s.name;
  i.user = j.user;
  i.uid = j.uid;
  i.queue = s.queue;
  i.project = s.project;
  i.state = j.state;
  i.exit_code = j.exit_code;
  i.end_reason = j.end_reason;
  i.submit_time = j.submit_time;
  i.walltime = s.walltime;
  i.ncpus = s.ncpus;
  i.mem_mb = s.mem_mb;
  i.jobfs_mb = s.jobfs_mb;
  i.stdout_path = s.stdout_path.empty() ? default_output(s, ".o", j.id) : s.stdout_path;
  i.stderr_path = s.stderr_path.empty() ? default_output(s, ".e", j.id) : s.stderr_path;
  i.pe = s.pe;
  i.slots_min = s.slots_min;
  i.slots_max = s.slots_max;
  i.flow_step = s.flow_step;
  i.preempt = s.preempt;
  for (const service::MeshRun& r : j.runs) {
    std::string on;
    for (const auto& n : r.nodes) on += (on.empty() ? "on " : ",") + n;
    i.runs.push_back(proto::RunInfo{r.start, r.end, r.end_reason, r.exit_code, on});
    if (r.end_reason == "preempted") ++i.requeues;
  }
  if (!j.runs.empty()) {
    i.start_time = j.runs.back().start;
    i.end_time = j.runs.back().end;
    i.comment = i.runs.back().comment;
  } else if (j.state == proto::state::kPending) {
    i.comment = "accepted by the mesh";
  }
  return i;
}

}  // namespace

void Daemon::mesh_submit(Client& c, proto::SubmitReq& r) {
  proto::JobSpec& s = r.spec;
  if (auto refused = check_submit(c.peer, s)) {
    send(c, *refused);
    return;
  }
  // Output paths made absolute here (the submitter's cwd); the defaults name the id, which
  // only the mesh gives.
  if (s.name.empty()) s.name = "job";
  for (std::string* path : {&s.stdout_path, &s.stderr_path})
    if (!path->empty() && (*path)[0] != '/') *path = s.cwd + "/" + *path;
  proto::mesh::JobAccepted job;
  job.user = user_name(c.peer.uid);
  if (job.user.empty()) job.user = std::to_string(c.peer.uid);
  job.uid = c.peer.uid;
  job.gid = c.peer.gid;
  job.submit_time = now();
  std::string what = job.user + ": " + proto::printable(s.name) + " ncpus=" + std::to_string(s.ncpus);
  job.spec = std::move(s);
  std::uint64_t ticket = c.mesh_ticket = ++mesh_tickets_;
  mesh_->submit(std::move(job), [this, fd = c.fd, ticket, what](const SubmitResult& res) {
    if (res.ok) {
      log_line("job " + std::to_string(res.job) + " accepted by the mesh, submitted by " + what);
      mesh_answer(fd, ticket, proto::SubmitRep{res.job});
    } else {
      log_line("submit by " + what + " not accepted: " + res.message);
      mesh_answer(fd, ticket, proto::ErrorRep{res.code, res.message});
    }
  });
}

void Daemon::mesh_stat(Client& c, const proto::StatReq& r) {
  std::uint64_t ticket = c.mesh_ticket = ++mesh_tickets_;
  mesh_->jobs(r.id, [this, fd = c.fd, ticket, id = r.id](std::vector<service::MeshJob> jobs) {
    if (id != 0 && jobs.empty()) {
      mesh_answer(fd, ticket, proto::ErrorRep{"not_found", "unknown job id " + std::to_string(id)});
      return;
    }
    proto::StatRep rep;
    rep.jobs.reserve(jobs.size());
    for (const auto& j : jobs) rep.jobs.push_back(mesh_info(j));
    mesh_answer(fd, ticket, rep);
  });
}

void Daemon::mesh_answer(int fd, std::uint64_t ticket, const proto::Message& m) {
  auto it = clients_.find(fd);
  if (it == clients_.end() || it->second->mesh_ticket != ticket) return;  // gone meanwhile
  Client& c = *it->second;
  send(c, m);
  c.mesh_ticket = 0;
  serve_buffered(c);  // requests queued behind this one
}

}  // namespace corral::agent
