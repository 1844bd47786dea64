// The commands users send over the local socket: submit, stat, cancel,
// suspend/resume/requeue/checkpoint, node. Each checks who asks (the peer's
// uid) and what is asked, and answers with a reply or a clear error.
#include <grp.h>
#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <tuple>

#include "agent/daemon.hpp"
#include "agent/job_accounting.hpp"
#include "agent/mesh_link.hpp"
#include "agent/node/launcher.hpp"
#include "agent/node/topology.hpp"
#include "proto/spec_check.hpp"

namespace corral::agent {

std::string user_name(uid_t uid) {
  passwd pw{}, *res = nullptr;
  char buf[4096];
  if (getpwuid_r(uid, &pw, buf, sizeof buf, &res) == 0 && res) return pw.pw_name;
  return "";
}

namespace {
std::string group_name(gid_t gid) {
  group gr{}, *res = nullptr;
  char buf[4096];
  if (getgrgid_r(gid, &gr, buf, sizeof buf, &res) == 0 && res) return gr.gr_name;
  return std::to_string(gid);
}
}  // namespace

std::optional<proto::ErrorRep> Daemon::check_submit(const Peer&, proto::JobSpec& s) {
  const node::Topology& topo = launcher_->topology();
  auto bad = [](std::string msg) { return proto::ErrorRep{"invalid", std::move(msg)}; };
  // Every field as strictly as `corral submit` checks it, with the same limits and words.
  if (std::string why = proto::check_spec(s); !why.empty()) return bad(why);
  const int node_cores = static_cast<int>(topo.cores.size());
  // In a mesh a job may span nodes: the coordinator's planner places it; the sizes of this node
  // bound nothing but an open -pe range ("n-").
  if (mesh_) {
    if (!s.pe.empty()) {
      if (s.slots_max == proto::kSlotsUnbounded) s.slots_max = std::max(s.slots_min, node_cores);
      s.ncpus = s.slots_min;
    }
  } else if (!s.pe.empty()) {
    // -pe NAME n-m (sge6-reservation-backfill.txt section 3): "n-" is capped
    // at this node's cores; the count itself is the planner's choice.
    if (s.slots_min > node_cores)
      return bad("-pe " + s.pe + " " + std::to_string(s.slots_min) + "-: the minimum of " +
                 std::to_string(s.slots_min) + " slots exceeds this node's " +
                 std::to_string(node_cores) + " cores");
    s.slots_max = std::min(s.slots_max, node_cores);
    s.ncpus = s.slots_min;
  }
  if (!mesh_ && s.ncpus > node_cores)
    return bad("ncpus=" + std::to_string(s.ncpus) + " exceeds this node's " +
               std::to_string(topo.cores.size()) + " cores (a job across nodes needs a mesh)");
  const std::int64_t mem = proto::mem_for_slots(s, slot_range(s).first);  // h_vmem: at the fewest slots
  if (!mesh_ && topo.mem_mb > 0 && mem > topo.mem_mb)
    return bad((s.mem_per_slot_mb > 0 ? "h_vmem times the slots: " : "mem=") + std::to_string(mem) +
               "mb exceeds this node's " + std::to_string(topo.mem_mb) + "mb");
  if (!mesh_ && topo.jobfs_mb > 0 && s.jobfs_mb > topo.jobfs_mb)
    return bad("jobfs=" + std::to_string(s.jobfs_mb) + "mb exceeds this node's " +
               std::to_string(topo.jobfs_mb) + "mb");
  if (s.walltime == 0) s.walltime = cfg_.default_walltime;
  if (s.walltime == 0 && cfg_.require_walltime)
    return bad("a walltime is required here (-l walltime=HH:MM:SS)");
  if (s.queue.empty()) s.queue = cfg_.queues.front().name;
  bool known = false;
  std::string names;
  for (const auto& q : cfg_.queues) {
    known |= q.name == s.queue;
    names += (names.empty() ? "" : ", ") + q.name;
  }
  if (!known) return bad("unknown queue '" + proto::printable(s.queue) + "' (queues here: " + names + ")");

  if (sched_.nci.enabled) {
    // NCI: mandatory requests and queue bounds are refused at submit
    // (nci-pbs-policy.txt "Resource limits").
    Job j;
    j.queue = s.queue;
    j.walltime = s.walltime;
    std::tie(j.slots_min, j.slots_max) = slot_range(s);
    j.mem_mb = proto::mem_for_slots(s, j.slots_min);
    j.jobfs_mb = s.jobfs_mb;
    NciVerdict v = validate_request(j, snapshot_queues(), sched_.nci);
    if (!v.ok) return bad("refused by the NCI policy: " + v.reason);
  }

  // -P PROJECT:STEP (pba-synopsys-patent.txt: the project parameter names the step of a flow):
  // the step must be one of the project's, or allocations narrowed to steps never match it.
  if (!s.flow_step.empty()) {
    if (!sched_.pba.enabled)
      return bad("-P " + proto::printable(s.project) + ":" + proto::printable(s.flow_step) +
                 ": this node has no project plan (pba = no), so no flow step can be checked");
    if (auto why = pba::check_flow_step(sched_.pba.plan, s.project, s.flow_step))
      return bad("-P " + proto::printable(s.project) + ":" + proto::printable(s.flow_step) + ": " + proto::printable(*why));
  }
  // -W depend / -hold_jid: only jobs this node knows (an id mistyped would wait for ever). In a
  // mesh the coordinator judges them: a job that depends on an unknown one ends at its next pass.
  for (const proto::Dependency& d : s.depend)
    if (!mesh_ && !store_->find(d.job))
      return bad("dependency " + d.type + ":" + std::to_string(d.job) + ": unknown job id " + std::to_string(d.job));
  return std::nullopt;
}

proto::Message Daemon::on_submit(const Peer& p, proto::SubmitReq& r) {
  proto::JobSpec& s = r.spec;
  if (auto refused = check_submit(p, s)) return *refused;

  JobRecord rec;
  try {
    rec.id = store_->next_id();
  } catch (const StoreFull& e) {
    log_line(std::string("state disk full: ") + e.what());
    return proto::ErrorRep{"disk_full", "state disk full: job not accepted"};
  }
  if (s.name.empty()) s.name = "job";
  for (std::string* path : {&s.stdout_path, &s.stderr_path})
    if (!path->empty() && (*path)[0] != '/') *path = s.cwd + "/" + *path;
  if (s.stdout_path.empty()) s.stdout_path = s.cwd + "/" + s.name + ".o" + std::to_string(rec.id);
  if (s.join) s.stderr_path = s.stdout_path;  // -j oe: one file, as qsub's
  if (s.stderr_path.empty()) s.stderr_path = s.cwd + "/" + s.name + ".e" + std::to_string(rec.id);
  for (const auto& e : s.env) {
    rec.env_blob += e;
    rec.env_blob.push_back('\0');
  }
  s.env.clear();
  rec.spec = std::move(s);
  rec.uid = p.uid;
  rec.gid = p.gid;
  rec.user = user_name(p.uid);
  if (rec.user.empty()) rec.user = std::to_string(p.uid);
  rec.group = group_name(p.gid);
  rec.submit_time = now();
  rec.waits_on = rec.spec.depend;
  if (rec.is_array()) {  // one entry for every task: they are handed out as the queue needs them
    rec.waits_on.clear();
    rec.array_next = rec.spec.array.first;
    store_->put(rec);
    array_live_[rec.id];
  } else {
    store_->put(rec);  // flushed before the reply leaves (run())
    if (rec.waits_on.empty()) pending_.insert(rec.id);
    else hold_for_dependencies(rec);
  }
  dirty_ = true;
  log_line("job " + std::to_string(rec.id) + " submitted by " + rec.user + ": " + proto::printable(rec.spec.name) +
           (rec.spec.pe.empty() ? " ncpus=" + std::to_string(rec.spec.ncpus)
                                : " pe=" + rec.spec.pe + " slots=" + std::to_string(rec.spec.slots_min) +
                                      "-" + std::to_string(rec.spec.slots_max)) +
           " queue=" + proto::printable(rec.spec.queue));
  proto::Event e;
  e.kind = "submitted";
  e.job = rec.id;
  e.user = rec.user;
  e.submit_time = rec.submit_time;
  pub_.publish(e);
  return proto::SubmitRep{rec.id};
}

proto::Message Daemon::on_stat(const Peer& p, const proto::StatReq& r) {
  // Like qstat, everyone sees every job (never scripts or environments).
  charge_running(now());  // the units shown are charged up to now
  proto::StatRep rep;
  if (r.id != 0) {
    const JobRecord* rec = store_->find(r.id);
    if (!rec) return proto::ErrorRep{"not_found", "unknown job id " + std::to_string(r.id)};
    if (rec->is_array()) stat_array(p, r, *rec, rep);
    else rep.jobs.push_back(info(*rec));
    return rep;
  }
  if (std::string why = proto::check_states(r.states); !why.empty()) return proto::ErrorRep{"invalid", "-s: " + why};
  for (const auto& [id, rec] : store_->jobs()) {
    if (rec.array_id && store_->find(rec.array_id)) continue;  // listed under its array (-t)
    if (!stat_match(p, r, rec)) continue;
    if (rec.is_array()) stat_array(p, r, rec, rep);
    else rep.jobs.push_back(info(rec));
  }
  return rep;
}

proto::Message Daemon::on_cancel(const Peer& p, const proto::CancelReq& r) {
  JobRecord* rec = store_->find(r.id);
  if (!rec) return proto::ErrorRep{"not_found", "unknown job id " + std::to_string(r.id)};
  if (!p.admin && p.uid != rec->uid)
    return proto::ErrorRep{"permission", "job " + std::to_string(r.id) + " belongs to " + rec->user +
                                             "; only its owner" + (have_operators_ ? ", " : " or ") + admins() +
                                             " may cancel it"};
  if (rec->ended())
    return proto::ErrorRep{"invalid", "job " + std::to_string(r.id) + " has already ended (" +
                                          rec->end_reason + ")"};
  if (rec->is_array()) {
    if (rec->cancel_requested) return proto::ErrorRep{"invalid", "job array " + std::to_string(r.id) + " is being cancelled"};
    return cancel_array(p, *rec);
  }
  std::string who = user_name(p.uid);
  if (who.empty()) who = std::to_string(p.uid);
  if (rec->state == proto::state::kPending) {
    finish(*rec, EndReason::Cancelled, -1, "cancelled by " + who + " before it started");
  } else {
    stop_for_cancel(*rec, "cancel requested by " + who);
    poll_launcher();  // the end is usually there at once
  }
  log_line("job " + std::to_string(r.id) + " cancel requested by " + who);
  return proto::CancelRep{r.id, rec->state};
}

// corral suspend | resume | requeue | checkpoint (qsig -s suspend/resume,
// qrerun, qhold -h c). Suspending or resuming changes what other users get,
// so it is root's; the owner may requeue or checkpoint their own job.
proto::Message Daemon::on_control(const Peer& p, const proto::ControlReq& r) {
  const std::string& act = r.action;
  if (act == "hold" || act == "release" || act == "qmove") return on_job_admin(p, r);
  if (act != "suspend" && act != "resume" && act != "requeue" && act != "checkpoint")
    return proto::ErrorRep{"invalid", "unknown action '" + act.substr(0, 32) +
                                          "' (suspend, resume, requeue, checkpoint, hold, release or qmove)"};
  JobRecord* rec = store_->find(r.id);
  std::string id = std::to_string(r.id);
  if (!rec) return proto::ErrorRep{"not_found", "unknown job id " + id};
  bool admin_only = act == "suspend" || act == "resume";
  if (!p.admin && (admin_only || p.uid != rec->uid))
    return proto::ErrorRep{"permission", admin_only ? "only " + admins() + " may " + act + " jobs (job " + id + " belongs to " + rec->user + ")"
                                                    : "job " + id + " belongs to " + rec->user + "; only its owner" +
                                                          (have_operators_ ? ", " : " or ") + admins() + " may " + act + " it"};
  std::string who = user_name(p.uid);
  if (who.empty()) who = std::to_string(p.uid);
  auto not_now = [&](const std::string& why) {
    return proto::ErrorRep{"invalid", "cannot " + act + " job " + id + ": it is " + why};
  };
  std::string st = rec->state;
  if (rec->ended()) return not_now("ended (" + rec->end_reason + ")");
  if (rec->is_array()) return not_now("a job array: name one of its tasks, " + id + "[INDEX]");
  if (st == proto::state::kPending) return not_now("pending (not running)");
  if (rec->cancel_requested || rec->requeue_requested) return not_now("already being stopped");
  std::string msg;
  if (act == "suspend") {
    if (st != proto::state::kRunning) return not_now(st);
    std::string err = suspend_resume(*rec, true, "suspended by " + who);
    if (!err.empty()) return proto::ErrorRep{"internal", "cannot suspend job " + id + ": " + err};
    rec->held = true;
    store_->put(*rec);
    msg = "suspended";
  } else if (act == "resume") {
    if (st != proto::state::kSuspended) return not_now(st);
    // Its cores went to other jobs meanwhile: thawing now would share them.
    std::vector<std::uint64_t> users;
    for (auto other : active_) {
      const JobRecord& o = store_->jobs().at(other);
      if (other == rec->id || o.state != proto::state::kRunning) continue;
      for (int c : o.cores)
        if (std::find(rec->cores.begin(), rec->cores.end(), c) != rec->cores.end()) {
          users.push_back(other);
          break;
        }
    }
    if (!users.empty()) {
      std::string list;
      for (auto u : users) list += (list.empty() ? "" : ", ") + std::to_string(u);
      return proto::ErrorRep{"busy", "cannot resume job " + id + " now: its cores " +
                                         join_ints(rec->cores) + " are in use by job " + list +
                                         "; try again when they end (or suspend them)"};
    }
    std::string err = suspend_resume(*rec, false, "resumed by " + who);
    if (!err.empty()) return proto::ErrorRep{"internal", "cannot resume job " + id + ": " + err};
    msg = "resumed";
  } else {
    bool ck = act == "checkpoint";
    std::string err = stop_for_requeue(*rec, ck, (ck ? "checkpoint requested by " : "requeue requested by ") + who, false);
    if (!err.empty()) return proto::ErrorRep{"internal", "cannot " + act + " job " + id + ": " + err};
    poll_launcher();  // a requeue's end is usually there at once
    msg = rec->state == proto::state::kPending ? "requeued" : (ck ? "checkpointing" : "requeueing");
  }
  log_line("job " + id + " " + act + " by " + who);
  return proto::ControlRep{r.id, rec->state, msg};
}

proto::Message Daemon::on_node(const Peer&, const proto::NodeReq& r) {
  sample_usage(false);
  const node::Topology& topo = launcher_->topology();
  proto::NodeRep rep;
  proto::NodeStatus& n = rep.node;
  n.node = hostname_;
  n.mode = mesh_ ? "mesh" : "standalone";
  n.topology = node::describe(topo);
  n.cores = static_cast<int>(topo.cores.size());
  n.numa_nodes = topo.numa_nodes;
  n.mem_mb = topo.mem_mb;
  n.slots_total = n.cores;
  n.slots_used = slots_used();
  n.pending = static_cast<int>(pending_.size() + dep_waiting_.size());
  for (auto id : held_) n.pending += dep_waiting_.count(id) ? 0 : 1;
  n.state = drained_ ? proto::node_state::kDrained : proto::node_state::kUp;
  n.drain_reason = drain_reason_;
  for (auto id : active_) n.running.push_back(info(*store_->find(id)));
  std::vector<const JobRecord*> ended;
  for (const auto& [id, rec] : store_->jobs())
    if (rec.ended()) ended.push_back(&rec);
  std::sort(ended.begin(), ended.end(), [](const JobRecord* a, const JobRecord* b) {
    return a->end_time != b->end_time ? a->end_time > b->end_time : a->id > b->id;
  });
  for (std::size_t i = 0; i < ended.size() && static_cast<int>(i) < std::max(0, r.recent); ++i)
    n.recent.push_back(info(*ended[i]));
  n.agent_pid = static_cast<std::uint32_t>(::getpid());
  n.agent_uptime = mono_now() - boot_mono_;
  n.version = "0.1.0";
  n.criu_available = criu_.available;
  n.criu_why = criu_.why;
  return rep;
}

// Standalone, this node is a mesh of one: its own coordinator.
proto::Message Daemon::on_mesh(const Peer&, const proto::MeshReq& r) {
  proto::MeshRep rep;
  if (mesh_) {
    rep.mesh = mesh_->status();
  } else {
    proto::MeshStatus& s = rep.mesh;
    s.node = hostname_;
    s.id = 1;
    s.state = "standalone";
    s.coordinator = hostname_;
    s.coordinator_id = 1;
    s.members.push_back(proto::MeshMember{1, hostname_, "", "voter", "standalone", 0, 0, 0});
  }
  if (!r.members) rep.mesh.members.clear();
  return rep;
}

}  // namespace corral::agent
