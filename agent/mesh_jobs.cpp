// Jobs through the mesh, the daemon's side: in a mesh, `corral submit` is
// checked here as standalone, then proposed to the mesh (agent/mesh_link.hpp
// forwards it to the coordinator and follows coordinator changes); the id is
// answered only once a majority holds the job. `corral stat` lists the mesh's
// jobs from the replicated state this member applied. The connection waits
// meanwhile (Client::mesh_ticket); its later requests are held back.
//
// The coordinator's starts for this node arrive as StartJob: each (job, run)
// is started at most once, through the launcher as any job (cgroups, as its
// user), and acknowledged; a start from an older coordinator term is refused.
// The run number is kept in the job's record (requeues = run - 1, the runs
// before it), so a start sent again after a restart is recognised. Every end
// is proposed to the mesh as JobEnded, sent until the mesh has it. The node's
// own pass does not run in a mesh.
#include <ctime>
#include <map>
#include <string>

#include "agent/daemon.hpp"
#include "agent/local_socket.hpp"
#include "agent/mesh_link.hpp"
#include "agent/node/launcher.hpp"
#include "agent/node/topology.hpp"
#include "coordinator/service/mesh_charges.hpp"
#include "coordinator/wait_text.hpp"
#include "proto/spec_check.hpp"

namespace corral::agent {

namespace {

// A run this node gave back to the mesh (its start did not fit, or its processes were gone
// after a restart): kept, ended, so that a resend of its start asks for the requeue again
// and never starts it.
constexpr std::string_view kGivenBack = "given_back";

}  // namespace

std::string mesh_output(const proto::JobSpec& s, bool err, std::uint64_t id, std::uint64_t array_id, std::int64_t index) {
  if (err && s.join) return mesh_output(s, false, id, array_id, index);  // -j oe: one file, as qsub's
  const std::string& given = err ? s.stderr_path : s.stdout_path;
  const std::uint64_t named = array_id ? array_id : id;  // a task's files are named for its array
  std::string path = given.empty() ? s.cwd + "/" + s.name + (err ? ".e" : ".o") + std::to_string(named) : given;
  return array_id ? task_path(path, index) : path;
}

namespace {
// The memory job j holds: its request, or with memory per slot (Grid Engine's h_vmem) that
// times its slots: on each node of its last run, or the fewest it may start with while pending.
std::int64_t mesh_mem_mb(const service::MeshJob& j) {
  if (j.spec.mem_per_slot_mb <= 0) return j.spec.mem_mb;
  if (j.state == proto::state::kPending || j.runs.empty())
    return proto::mem_for_slots(j.spec, proto::least_slots(j.spec));
  std::int64_t mb = 0;
  for (std::size_t n = 0; n < j.runs.back().nodes.size(); ++n) mb += service::share_mem_mb(j, n);
  return mb;
}
}  // namespace

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
  i.mem_mb = mesh_mem_mb(j);
  i.jobfs_mb = s.jobfs_mb;
  i.stdout_path = mesh_output(s, false, j.id, j.array_id, j.array_index);
  i.stderr_path = mesh_output(s, true, j.id, j.array_id, j.array_index);
  i.array = s.array;
  i.array_id = j.array_id;
  i.array_index = j.array_index;
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
  if (j.state == proto::state::kEnded && !j.end_message.empty()) i.comment = j.end_message;
  i.depend = s.depend;
  i.su_charged = service::job_su(j, static_cast<Time>(std::time(nullptr)));  // NCI: each run as charged in the log
  i.su_rate = service::job_su_rate(j);
  if (j.state == proto::state::kPending && !j.hold.empty()) {
    i.wait_reason = proto::wait::kHeld;
    i.wait_detail = wait_text::held(j.hold_by, j.hold, j.id);
  }
  return i;
}

void Daemon::mesh_report_node() {
  const node::Topology& topo = launcher_->topology();
  mesh_->set_node(static_cast<int>(topo.cores.size()), topo.mem_mb, topo.jobfs_mb,
                  std::vector<std::uint64_t>(active_.begin(), active_.end()));
}

void Daemon::mesh_order(const proto::jobs::Message& m) {
  if (auto* s = std::get_if<proto::jobs::StartJob>(&m)) mesh_start(*s);
  else if (auto* x = std::get_if<proto::jobs::CancelJob>(&m)) mesh_stop(*x);
  else if (auto* o = std::get_if<proto::jobs::JobOrder>(&m)) mesh_control(*o);
  else if (auto* e = std::get_if<proto::jobs::ExecStart>(&m)) mesh_exec_start(*e);
  else if (auto* eo = std::get_if<proto::jobs::ExecOutput>(&m)) mesh_exec_output(*eo);
  else if (auto* ee = std::get_if<proto::jobs::ExecEnd>(&m)) mesh_exec_end(*ee);
  else if (auto* ea = std::get_if<proto::jobs::ExecAlive>(&m)) mesh_exec_alive(*ea);
  else if (auto* ec = std::get_if<proto::jobs::ExecCancel>(&m)) mesh_exec_cancel(*ec);
  else if (auto* ei = std::get_if<proto::jobs::ExecInput>(&m)) mesh_exec_input(*ei);
}

// The coordinator's cancel of a run here: stopped as a standalone cancel stops it.
void Daemon::mesh_stop(const proto::jobs::CancelJob& s) {
  if (s.term < mesh_term_) return;
  JobRecord* rec = store_->find(s.job);
  // A run older than the one named is over too (a share whose newer start never came).
  if (!rec || rec->ended() || rec->requeues + 1 > s.run) return;
  if (rec->cancel_requested) return;  // a resend: the first one is being carried out
  stop_for_cancel(*rec, "cancel requested by " + s.who);
  log_line("job " + std::to_string(s.job) + " cancel requested by " + s.who + " through the mesh");
  poll_launcher();
}

// The coordinator (node `by`) refused this node: the mesh removed it, and ended the runs it
// still held (node_fail, when it was removed while silent). Their processes are stopped
// here, as a cancel stops them; their ends are not sent (the mesh has them).
void Daemon::mesh_removed(const std::string& by) {
  std::string stopped;
  for (std::uint64_t id : std::vector<std::uint64_t>(active_.begin(), active_.end())) {
    JobRecord* rec = store_->find(id);
    if (!rec || rec->ended() || !mesh_removed_runs_.insert(id).second) continue;
    stop_for_cancel(*rec, "stopped: " + cfg_.node_name + " was removed from mesh " + cfg_.mesh);
    stopped += (stopped.empty() ? "" : ", ") + std::to_string(id);
  }
  if (!stopped.empty() || !mesh_told_removed_)
    log_line("mesh: " + by + " refuses this node: it was removed from mesh " + cfg_.mesh + "; " +
             (stopped.empty() ? std::string("no run to stop") : "stopping job(s) " + stopped) +
             " (corral undrain " + cfg_.node_name + " lets it in again)");
  mesh_told_removed_ = true;
  if (!stopped.empty()) poll_launcher();
}

void Daemon::mesh_cancel(Client& c, const proto::CancelReq& r) {
  proto::jobs::CancelAsk ask{r.id, c.peer.uid, c.peer.gid, c.peer.admin, user_name(c.peer.uid)};
  if (ask.who.empty()) ask.who = std::to_string(c.peer.uid);
  std::uint64_t ticket = c.mesh_ticket = ++mesh_tickets_;
  mesh_->cancel(std::move(ask), [this, fd = c.fd, ticket, id = r.id](const SubmitResult& res) {
    if (res.ok) mesh_answer(fd, ticket, proto::CancelRep{id, res.message});
    else mesh_answer(fd, ticket, proto::ErrorRep{res.code, res.message});
  });
}

void Daemon::mesh_start(const proto::jobs::StartJob& s) {
  proto::jobs::StartAck ack;
  ack.term = s.term;
  ack.decision = s.decision;
  ack.job = s.job;
  ack.run = s.run;
  std::string what = "job " + std::to_string(s.job) + " run " + std::to_string(s.run);
  auto answer = [&](const char* status, std::string msg) {
    ack.status = status;
    ack.message = std::move(msg);
    mesh_->start_ack(s.from, ack);
  };
  if (s.term < mesh_term_) {
    log_line("mesh: start of " + what + " refused: term " + std::to_string(s.term) + " is older than term " +
             std::to_string(mesh_term_));
    answer("refused", "term " + std::to_string(s.term) + " is older than term " + std::to_string(mesh_term_));
    return;
  }
  mesh_term_ = s.term;
  if (JobRecord* had = store_->find(s.job); had && had->requeues + 1 >= s.run) {
    // Applied here already (a resend, or a new coordinator's reconciliation): never a second start.
    if (had->ended() && had->end_reason == kGivenBack) {
      mesh_requeue(*had);  // the requeue may not have reached the mesh yet
      answer("failed", had->comment);
      return;
    }
    if (had->ended() && !had->share) mesh_ended(*had);  // its end may not have reached the mesh yet
    answer("started", "already applied");
    return;
  }
  JobRecord rec;
  rec.id = s.job;
  rec.spec = s.spec.spec;
  for (const auto& e : rec.spec.env) {
    rec.env_blob += e;
    rec.env_blob.push_back('\0');
  }
  rec.spec.env.clear();
  rec.spec.stdout_path = mesh_output(rec.spec, false, rec.id, s.array_id, s.array_index);
  rec.spec.stderr_path = mesh_output(rec.spec, true, rec.id, s.array_id, s.array_index);
  rec.array_id = s.array_id;  // a task: its index variables in its environment (array_env)
  rec.array_index = s.array_index;
  rec.uid = s.spec.uid;
  rec.gid = s.spec.gid;
  rec.user = s.spec.user;
  rec.group = std::to_string(s.spec.gid);
  rec.submit_time = s.spec.submit_time;
  rec.requeues = s.run - 1;
  rec.work_done = s.work_done;  // its checkpoints' work, wherever they were taken
  rec.checkpoints = s.checkpoints;
  rec.state = std::string(proto::state::kPending);
  if (std::string why = mesh_share(rec, s); !why.empty()) {
    log_line("mesh: start of " + what + " refused: " + why);
    answer("refused", why);
    return;
  }
  store_->put(rec);
  JobRecord& r = *store_->find(s.job);
  Decision d;
  d.job = r.id;
  d.slots = r.spec.ncpus;
  d.reason = "started by the mesh's coordinator (term " + std::to_string(s.decided_term) + ", decision " +
             std::to_string(s.decision) + ")" + (r.share ? ": a share, the script runs on " + s.nodes.front() : "");
  start_job(r, d);
  if (r.state == proto::state::kRunning) {
    mesh_report_node();
    answer("started", "");
  } else if (r.ended()) {  // the launch failed: its end is on its way to the mesh
    answer("failed", r.comment);
  } else {
    // Not started (no free cores as this node sees them): back to the queue.
    std::string why = "could not start on " + cfg_.node_name + ": " + (r.comment.empty() ? "no free cores" : r.comment);
    mesh_give_back(r, why);
    answer("failed", why);
  }
}

void Daemon::mesh_give_back(JobRecord& r, const std::string& why) {
  r.state = std::string(proto::state::kEnded);
  r.end_reason = std::string(kGivenBack);
  r.comment = why;
  store_->put(r);
  active_.erase(r.id);
  pending_.erase(r.id);
  log_line("mesh: job " + std::to_string(r.id) + " run " + std::to_string(r.requeues + 1) + " given back: " + why);
  mesh_requeue(r);
  mesh_report_node();
}

void Daemon::mesh_requeue(const JobRecord& r) {
  std::string what = "job " + std::to_string(r.id) + " run " + std::to_string(r.requeues + 1);
  mesh_->propose(proto::mesh::JobRequeued{r.id, r.requeues + 1, r.comment, now(), r.checkpoints, r.work_done},
                 [what](const SubmitResult& res) {
                   if (!res.ok) log_line("mesh: requeue of " + what + " not committed: " + res.message);
                 },
                 false);
}

// A run of a mesh job ended here: the mesh is told until it has it.
void Daemon::mesh_ended(const JobRecord& rec) {
  if (mesh_removed_runs_.erase(rec.id)) {
    log_line("mesh: job " + std::to_string(rec.id) + " stopped; its end is not sent (the mesh ended it when it removed this node)");
    return mesh_report_node();
  }
  std::int32_t run = rec.requeues + 1;
  std::string what = "end of job " + std::to_string(rec.id) + " run " + std::to_string(run);
  mesh_->propose(proto::mesh::JobEnded{rec.id, run, rec.end_reason, rec.exit_code, rec.end_time},
                 [what](const SubmitResult& res) {
                   if (!res.ok) log_line("mesh: " + what + " not taken: " + res.message);
                 },
                 false);
  mesh_report_node();
}

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
  mesh_->propose(std::move(job), [this, fd = c.fd, ticket, what](const SubmitResult& res) {
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
  if (std::string why = proto::check_states(r.states); !why.empty())
    return send(c, proto::ErrorRep{"invalid", "-s: " + why});
  std::uint64_t ticket = c.mesh_ticket = ++mesh_tickets_;
  mesh_->jobs(r.id, [this, fd = c.fd, ticket, r, peer = c.peer](std::vector<service::MeshJob> jobs) {
    if (r.id != 0 && jobs.empty()) {
      mesh_answer(fd, ticket, proto::ErrorRep{"not_found", "unknown job id " + std::to_string(r.id)});
      return;
    }
    proto::StatRep rep;
    std::vector<std::uint64_t> waiting;
    proto::StatRep all = mesh_stat_list(r, jobs);  // an array as one job with its tasks' counts
    for (proto::JobInfo& i : all.jobs) {
      if (r.id == 0 && !stat_match(peer, r, i.uid, i.user, i.project, i.state)) continue;
      const bool array = i.array.on() && i.array_id == 0;  // its tasks wait, each for its own reason
      if (i.state == proto::state::kPending && i.wait_reason.empty() && !array) waiting.push_back(i.id);
      rep.jobs.push_back(std::move(i));
    }
    if (waiting.empty()) return mesh_answer(fd, ticket, rep);
    // Why they wait, from the coordinator's last pass (nothing when it does not answer).
    mesh_->waits(std::move(waiting), [this, fd, ticket, rep = std::move(rep)](std::vector<proto::jobs::JobWait> w) mutable {
      std::map<std::uint64_t, const proto::jobs::JobWait*> by_id;
      for (const auto& x : w) by_id[x.job] = &x;
      for (proto::JobInfo& i : rep.jobs)
        if (auto it = by_id.find(i.id); it != by_id.end()) {
          i.planned_start = it->second->planned_start;
          i.wait_reason = it->second->reason;
          i.wait_detail = it->second->detail;
        }
      mesh_answer(fd, ticket, rep);
    });
  });
}

// Ends are watched from the first wait on: the watch is set before the job is looked at, so an end
// applied after the look reaches mesh_wait_ended() after the client waits.
void Daemon::mesh_wait(Client& c, const proto::WaitReq& r) {
  std::uint64_t ticket = c.mesh_ticket = ++mesh_tickets_;
  mesh_->watch_ends(true);
  mesh_->jobs(r.id, [this, fd = c.fd, ticket, id = r.id](std::vector<service::MeshJob> jobs) {
    if (jobs.empty()) return mesh_answer(fd, ticket, proto::ErrorRep{"not_found", "unknown job id " + std::to_string(id)});
    if (jobs.front().state == proto::state::kEnded)
      return mesh_answer(fd, ticket, proto::WaitRep{mesh_stat_list(proto::StatReq{id}, jobs).jobs.front()});
    auto it = clients_.find(fd);
    if (it == clients_.end() || it->second->mesh_ticket != ticket) return;
    it->second->mesh_ticket = 0;
    it->second->waiting = id;  // answered by mesh_wait_ended(), wherever the job runs
  });
}

void Daemon::mesh_wait_ended(std::uint64_t job) {
  bool waited = false;
  for (const auto& [fd, c] : clients_) waited |= c->waiting == job;
  if (!waited) return;
  mesh_->jobs(job, [this, job](std::vector<service::MeshJob> jobs) {
    if (jobs.empty()) return;
    proto::JobInfo info = mesh_stat_list(proto::StatReq{job}, jobs).jobs.front();
    for (auto& [fd, c] : clients_) {
      if (c->waiting != job) continue;
      send(*c, proto::WaitRep{info});
      c->waiting = 0;
      serve_buffered(*c);  // requests queued behind the wait
    }
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
