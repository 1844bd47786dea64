// `corral exec NODE COMMAND`, the daemon's side (as PBS's pbs_tmrsh and Grid
// Engine's qrsh -inherit). On the caller's node: the caller must be a process
// of the job it names (its pid, from the socket's peer credentials, is in the
// job's cgroups here) and NODE one of the nodes of the job's run; the request
// goes through the mesh to NODE's agent (proto/mesh_exec.hpp), and the
// connection gets the command's output as it comes, then its exit status. On
// NODE: the job's run must hold its share here; the command runs in that
// share's cgroups as the job's user (agent/exec_process.hpp), so the job's end
// stops it with the rest of the share. The caller's stdin follows the request
// on its connection (ExecIn) and goes on to NODE in order (ExecInput), as ssh
// relays it: NODE writes it to the command's stdin and closes that at its end.
//
// Neither side waits for ever on the other: NODE says every second that the
// process still runs (ExecAlive), and the caller's node fails a call it has
// not heard of for kExecSilentS. The caller's node stops the process (ExecCancel)
// when the caller's connection closes (`corral exec` killed), when it fails a
// call for silence, and when NODE speaks of a call it does not know (its agent
// restarted meanwhile).
#include <pwd.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "agent/daemon.hpp"
#include "agent/exec_process.hpp"
#include "agent/local_socket.hpp"
#include "agent/mesh_link.hpp"
#include "agent/node/launcher.hpp"

namespace corral::agent {

namespace {

constexpr const char* kDefaultPath = "/usr/local/bin:/usr/bin:/bin";
constexpr double kExecSilentS = 5;  // five of NODE's signs of life missed: the call fails

std::string exec_key(std::uint64_t from, std::uint64_t request) {
  return std::to_string(from) + "/" + std::to_string(request);
}

// Whether /proc/PID/cgroup names the job's slot under `parent` (in any hierarchy: only root
// moves a process between cgroups).
bool in_job_cgroup(pid_t pid, const std::string& parent, std::uint64_t job) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/cgroup");
  const std::string want = "/" + parent + "/" + node::slot_name(job);
  for (std::string line; std::getline(in, line);) {
    for (std::size_t at = line.find(want); at != std::string::npos; at = line.find(want, at + 1)) {
      std::size_t end = at + want.size();
      if (end == line.size() || line[end] == '/') return true;
    }
  }
  return false;
}

std::string joined(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ",") + s;
  return out;
}

}  // namespace

void Daemon::mesh_exec(Client& c, const proto::ExecReq& r) {
  if (!mesh_) {
    send(c, proto::ErrorRep{"invalid", "corral exec starts processes on a job's other nodes: this corrald is "
                                       "standalone (no mesh)"});
    return;
  }
  if (r.job == 0) {
    send(c, proto::ErrorRep{"permission", "corral exec runs only inside a running job (CORRAL_JOBID is not set)"});
    return;
  }
  const std::string id = std::to_string(r.job);
  const JobRecord* rec = store_->find(r.job);
  if (!rec || !active_.count(r.job)) {
    send(c, proto::ErrorRep{"permission", "job " + id + " does not run on this node (" + node_name() +
                                              "): corral exec runs only inside a running job"});
    return;
  }
  if (!in_job_cgroup(c.peer.pid, cfg_.cgroup_parent, r.job) || (c.peer.uid != rec->uid && c.peer.uid != 0)) {
    send(c, proto::ErrorRep{"permission", "pid " + std::to_string(c.peer.pid) + " is not a process of job " + id +
                                              ": corral exec runs only inside the job"});
    return;
  }
  if (r.node.empty() || r.command.empty()) {
    send(c, proto::ErrorRep{"invalid", "corral exec needs a node and a command"});
    return;
  }
  const std::int32_t run = rec->requeues + 1;
  std::uint64_t ticket = c.mesh_ticket = ++mesh_tickets_;
  c.exec_input = r.input;
  std::string who = user_name(c.peer.uid);
  if (who.empty()) who = std::to_string(c.peer.uid);
  exec_calls_[ticket] = ExecCall{c.fd, r.node, mono_now(), false, {}};  // its input waits here
  // The node must be one of the run's, as the replicated state has it.
  mesh_->run_nodes(r.job, run, [this, fd = c.fd, ticket, r, id, who, run](std::vector<std::string> nodes) {
    auto call = exec_calls_.find(ticket);
    if (call == exec_calls_.end()) return;  // its caller went away meanwhile
    if (std::find(nodes.begin(), nodes.end(), r.node) == nodes.end()) {
      exec_calls_.erase(call);
      mesh_answer(fd, ticket, proto::ErrorRep{"not_found", "node " + r.node + " is not one of the nodes of job " + id +
                                                               " (" + (nodes.empty() ? "none known" : joined(nodes)) +
                                                               ")"});
      return;
    }
    call->second.heard = mono_now();
    call->second.sent = true;
    proto::jobs::ExecStart x{"", 0, ticket, r.job, run, r.node, r.command, who, r.input};
    mesh_->send_node(r.node, x, [this, fd, ticket, node = r.node] {
      exec_calls_.erase(ticket);
      mesh_answer(fd, ticket, proto::ErrorRep{"not_found", "no member of the mesh is named " + node});
    });
    for (proto::jobs::ExecInput& in : call->second.input) mesh_->send_node(r.node, std::move(in), [] {});
    call->second.input.clear();
  });
}

void Daemon::exec_input(Client& c, const proto::ExecIn& in) {
  auto call = exec_calls_.find(c.mesh_ticket);
  if (!c.reads_input() || call == exec_calls_.end()) return;  // its call has ended: nobody reads it
  proto::jobs::ExecInput x{"", 0, c.mesh_ticket, in.data, in.eof};
  if (!call->second.sent) call->second.input.push_back(std::move(x));
  else mesh_->send_node(call->second.node, std::move(x), [] {});
}

void Daemon::mesh_exec_input(const proto::jobs::ExecInput& in) {
  if (exec_watch_) exec_watch_->input(exec_key(in.from, in.request), in.data, in.eof);
}

void Daemon::mesh_exec_output(const proto::jobs::ExecOutput& o) {
  mesh_exec_alive(proto::jobs::ExecAlive{o.mesh, o.from, o.request});
  auto call = exec_calls_.find(o.request);
  if (call == exec_calls_.end()) return;
  auto it = clients_.find(call->second.fd);
  if (it == clients_.end() || it->second->mesh_ticket != o.request || it->second->dead) return;
  send(*it->second, proto::ExecOut{o.stream, o.data});
}

// NODE's word on a call: heard; a call this node does not know (ended here, or this agent
// restarted since) is stopped there.
void Daemon::mesh_exec_alive(const proto::jobs::ExecAlive& a) {
  auto call = exec_calls_.find(a.request);
  if (call != exec_calls_.end()) {
    call->second.heard = mono_now();
    return;
  }
  mesh_->send_member(a.from, proto::jobs::ExecCancel{"", 0, a.request, "its caller's node no longer waits for it"});
}

void Daemon::exec_caller_gone(std::uint64_t ticket) {
  auto call = exec_calls_.find(ticket);
  if (call == exec_calls_.end()) return;
  mesh_->send_node(call->second.node, proto::jobs::ExecCancel{"", 0, ticket, "its caller went away"}, [] {});
  exec_calls_.erase(call);
}

void Daemon::exec_watchdog(double mono) {
  for (auto it = exec_calls_.begin(); it != exec_calls_.end();) {
    const auto& [ticket, call] = *it;
    auto c = clients_.find(call.fd);
    if (c == clients_.end() || c->second->mesh_ticket != ticket) {  // gone before it was sent
      mesh_->send_node(call.node, proto::jobs::ExecCancel{"", 0, ticket, "its caller went away"}, [] {});
      it = exec_calls_.erase(it);
      continue;
    }
    if (mono - call.heard < kExecSilentS) {
      ++it;
      continue;
    }
    mesh_->send_node(call.node, proto::jobs::ExecCancel{"", 0, ticket, "its caller's node heard nothing of it"}, [] {});
    mesh_answer(call.fd, ticket,
                proto::ErrorRep{"internal", "node " + call.node + " has not answered for " +
                                                std::to_string(static_cast<int>(kExecSilentS)) +
                                                " s (its agent restarted, or the mesh lost a message): the "
                                                "command's end is unknown; it is stopped if it still runs"});
    it = exec_calls_.erase(it);
  }
}

void Daemon::mesh_exec_cancel(const proto::jobs::ExecCancel& x) {
  if (exec_watch_ && exec_watch_->stop(exec_key(x.from, x.request)))
    log_line("corral exec of member " + std::to_string(x.from) + " (call " + std::to_string(x.request) +
             "): stopped: " + proto::printable(x.why));
}

void Daemon::mesh_exec_end(const proto::jobs::ExecEnd& e) {
  auto call = exec_calls_.find(e.request);
  if (call == exec_calls_.end()) return;
  int fd = call->second.fd;
  exec_calls_.erase(call);
  if (e.status == "exited") mesh_answer(fd, e.request, proto::ExecRep{e.exit_code});
  else mesh_answer(fd, e.request, proto::ErrorRep{e.status == "refused" ? "permission" : "internal", e.message});
}

void Daemon::mesh_exec_start(const proto::jobs::ExecStart& x) {
  auto end = [this, &x](std::string status, std::string why) {
    mesh_->send_member(x.from, proto::jobs::ExecEnd{"", 0, x.request, std::move(status), 0, std::move(why)});
  };
  const std::string id = std::to_string(x.job);
  JobRecord* rec = store_->find(x.job);
  if (!rec || !active_.count(x.job) || rec->requeues + 1 != x.run)
    return end("refused", "node " + node_name() + " holds no share of run " + std::to_string(x.run) + " of job " + id);
  if (rec->state != proto::state::kRunning) return end("refused", "job " + id + " is " + rec->state);
  auto* launcher = dynamic_cast<node::Launcher*>(launcher_.get());
  if (!launcher) return end("failed", "node " + node_name() + " is emulated: its jobs have no processes");
  ExecLaunch l;
  l.procs_files = launcher->cgroups().procs_files(node::slot_name(x.job));
  if (l.procs_files.empty()) return end("failed", "this node's cgroups cannot take a process of job " + id);
  l.uid = rec->uid;
  l.gid = rec->gid;
  l.user = rec->user == std::to_string(rec->uid) ? "" : rec->user;
  l.cwd = rec->spec.cwd;
  l.command = x.command;
  l.input = x.input;
  std::map<std::string, std::string> env;
  for (std::size_t pos = 0; pos < rec->env_blob.size();) {
    std::size_t stop = rec->env_blob.find('\0', pos);
    if (stop == std::string::npos) stop = rec->env_blob.size();
    std::string kv = rec->env_blob.substr(pos, stop - pos);
    if (std::size_t eq = kv.find('='); eq != std::string::npos && eq > 0) env[kv.substr(0, eq)] = kv.substr(eq + 1);
    pos = stop + 1;
  }
  passwd pw{}, *res = nullptr;
  char buf[4096];
  if (getpwuid_r(rec->uid, &pw, buf, sizeof buf, &res) == 0 && res) {
    env["HOME"] = pw.pw_dir;
    env["USER"] = env["LOGNAME"] = pw.pw_name;
  }
  if (!env.count("PATH")) env["PATH"] = kDefaultPath;
  env["CORRAL_JOBID"] = env["PBS_JOBID"] = env["JOB_ID"] = id;
  env["CORRAL_NODE"] = node_name();
  env["CORRAL_SOCKET"] = cfg_.socket;
  for (const auto& [k, v] : env) l.env.push_back(k + "=" + v);
  ExecChild child;
  if (std::string why = spawn_exec(l, child); !why.empty()) return end("failed", "on " + node_name() + ": " + why);
  log_line("job " + id + ": corral exec from " + x.who + " (member " + std::to_string(x.from) + "): pid " +
           std::to_string(child.pid) + ": " + proto::printable(x.command.substr(0, 200)));
  if (!exec_watch_) exec_watch_ = std::make_unique<ExecWatch>();
  exec_watch_->watch(
      exec_key(x.from, x.request), child,
      [mesh = mesh_.get(), to = x.from, request = x.request](int stream, std::string data) {
        mesh->send_member(to, proto::jobs::ExecOutput{"", 0, request, stream, std::move(data)});
      },
      [mesh = mesh_.get(), to = x.from, request = x.request](int code) {
        mesh->send_member(to, proto::jobs::ExecEnd{"", 0, request, "exited", code, ""});
      },
      [mesh = mesh_.get(), to = x.from, request = x.request] {
        mesh->send_member(to, proto::jobs::ExecAlive{"", 0, request});
      });
}

}  // namespace corral::agent
