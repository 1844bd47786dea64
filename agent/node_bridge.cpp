// The node and launcher bridge: what the agent asks of its node part
// (agent/node: topology, cgroups, the Launcher) and what it learns from it:
// starting a job on its cores, suspending and resuming, each end and why,
// usage samples, and adopting running jobs after a restart.
#include <unistd.h>

#include <algorithm>
#include <set>

#include "agent/daemon.hpp"
#include "agent/job_accounting.hpp"
#include "agent/node/emulated.hpp"
#include "agent/node/launcher.hpp"
#include "agent/node/topology.hpp"
#include "proto/spec_check.hpp"

namespace corral::agent {

// What holds a share's cgroups on a node that does not run the job's script (argv: it, "infinity").
constexpr std::string_view kShareHolder = "/bin/sleep";

node::Topology agent_topology(const Config& cfg, const std::string& jobfs_dir) {
  if (!cfg.emulate.empty()) {
    std::string name = cfg.node_name;
    if (name.empty()) {
      char h[256] = {};
      ::gethostname(h, sizeof h - 1);
      name = h;
    }
    return node::emulated_topology(node::parse_emulate_spec(cfg.emulate), name);
  }
  if (cfg.declare_cores > 0) {
    long mb = sysconf(_SC_PHYS_PAGES) / 1024 * (sysconf(_SC_PAGESIZE) / 1024);
    return node::declared(1, cfg.declare_cores, mb);
  }
  if (!cfg.topology_xml.empty()) return node::load_xml(cfg.topology_xml);
  return node::discover(jobfs_dir);
}

void Daemon::setup_launcher() {
  if (!cfg_.emulate.empty()) return setup_emulated();
  // CRIU only where `criu check` passes, never depended on. Probed once, before the Launcher has
  // children of its own to reap, and only reported: checkpoints stay cooperative.
  criu_ = node::probe_criu();
  log_line("criu: " + criu_.why + (criu_.found ? " (" + criu_.path + ")" : "") +
           "; checkpoints are cooperative (checkpoint_signal), CRIU is not used");
  node::Topology topo = agent_topology(cfg_, cfg_.jobfs_root);
  hostname_ = topo.hostname;
  if (hostname_.empty()) {
    char h[256] = {};
    ::gethostname(h, sizeof h - 1);
    hostname_ = h;
  }
  log_line("node " + node::describe(topo));
  node::LauncherConfig lc;
  lc.cgroup_parent = cfg_.cgroup_parent;
  lc.cgroup_version = cfg_.cgroup;
  lc.jobfs_root = cfg_.jobfs_root;
  lc.ckpt_root = cfg_.ckpt_root;
  lc.state_dir = cfg_.node_state_dir;
  lc.hostname = hostname_;
  // The loop never waits for a launch: a failure as the user (chdir, open stdout, execve) comes
  // back from poll() as a launch_failed end, with the same message start() would have returned.
  lc.async_start = true;
  // An ended job's slot is removed after the pass that starts the next job on its cores (tidy()
  // in run()): off the path from one job's end to the next one's start.
  lc.defer_cleanup = true;
  auto launcher = std::make_unique<node::Launcher>(std::move(topo), lc);
  log_line("cgroups " + launcher->cgroups().describe());
  if (auto w = node::check_enforcement(launcher->cgroups(), cfg_.strict || cfg_.nci); !w.empty())
    log_line("warning: " + w);
  launcher_ = std::move(launcher);
}

// No processes, cgroups or CRIU: the jobs are timers (agent/node/emulated.hpp).
void Daemon::setup_emulated() {
  node::Topology topo = agent_topology(cfg_, "");
  hostname_ = topo.hostname;
  criu_.why = "emulated node: no processes to checkpoint";
  log_line("node " + node::describe(topo) + " (--emulate " + cfg_.emulate +
           "): jobs are timers (#CORRAL_EMULATE runtime=...), no cgroups");
  launcher_ = std::make_unique<node::EmulatedNode>(std::move(topo));
}

// After a crash or restart: jobs the journal says run are adopted when their
// processes still run (the node part's Launcher finds them by cgroup); jobs
// that ended while nobody watched report their real end at the first poll;
// any other "running" job is requeued (reason node_restart), so no job is lost.
void Daemon::recover() {
  auto found = launcher_->recover(cfg_.on_restart == "cleanup" ? node::RecoverMode::Cleanup
                                                               : node::RecoverMode::Adopt);
  std::set<std::uint64_t> adopted;
  for (const auto& r : found) {
    JobRecord* rec = store_->find(r.id);
    if (r.adopted && rec && active_.count(r.id)) {
      adopted.insert(r.id);
      log_line("job " + std::to_string(r.id) + " adopted after restart" +
               (r.message.empty() ? "" : ": " + r.message));
    } else if (r.adopted && (!rec || !rec->ended())) {
      // Running but not known as running (crash between launch and journal, a journal restored
      // by --recover): never killed, adopted as it runs.
      adopt_unknown(r.id);
      adopted.insert(r.id);
    } else if (r.adopted) {
      log_line("job " + std::to_string(r.id) + ": ended in the journal; stray processes stopped after restart");
      discard_end_.insert(r.id);
      launcher_->cancel(r.id);
    } else {
      log_line("job " + std::to_string(r.id) + ": leftovers cleaned up" +
               (r.message.empty() ? "" : ": " + r.message));
    }
  }
  if (active_.empty()) return;
  // Ends that happened while we were down.
  for (const auto& e : launcher_->poll()) on_end(e);
  std::vector<std::uint64_t> lost;
  for (auto id : active_)
    if (!adopted.count(id) && !launcher_->has(id)) lost.push_back(id);
  for (auto id : lost) {
    JobRecord& rec = *store_->find(id);
    const std::string why = "node_restart: corrald restarted and the job was no longer running";
    if (mesh_ && rec.share) {  // a share ends here only: its job's run goes on on its first node
      rec.state = std::string(proto::state::kEnded);
      rec.end_reason = "node_restart";
      rec.comment = why;
      store_->put(rec);
      active_.erase(id);
      continue;
    }
    if (mesh_) mesh_give_back(rec, why);  // the mesh requeues it, wherever it then runs
    else requeue(rec, why, false);
  }
  for (auto id : active_) {
    if (auto u = launcher_->usage(id)) {
      JobRecord& rec = *store_->find(id);
      std::string want(u->suspended ? proto::state::kSuspended : proto::state::kRunning);
      if (rec.state != want) {
        rec.state = want;
        if (u->suspended && rec.suspended_since <= 0) rec.suspended_since = now();
        if (!u->suspended && rec.suspended_since > 0) close_suspension(rec, now());
        store_->put(rec);
      }
    }
  }
}

// A job whose processes run but that the journal has pending or does not have: recorded as
// running with what its launcher record says, and reported (log, stat comment).
void Daemon::adopt_unknown(std::uint64_t id) {
  std::optional<node::LaunchSpec> sp = launcher_->spec(id);
  JobRecord* rec = store_->find(id);
  const bool known = rec != nullptr;
  if (!known) {
    JobRecord nr;
    nr.id = id;
    if (sp) {
      nr.uid = sp->uid;
      nr.gid = sp->gid;
      nr.user = sp->user.empty() ? std::to_string(sp->uid) : sp->user;
      nr.spec.cwd = sp->cwd;
      nr.spec.stdout_path = sp->stdout_path;
      nr.spec.stderr_path = sp->stderr_path;
      nr.spec.ncpus = std::max<int>(1, static_cast<int>(sp->cores.size()));
      nr.spec.mem_mb = sp->mem_mb;
      nr.spec.jobfs_mb = sp->jobfs_mb;
      nr.spec.walltime = sp->walltime_s;
    }
    nr.spec.name = "adopted";
    nr.spec.queue = cfg_.queues.front().name;
    nr.submit_time = now();
    store_->put(nr);
    rec = store_->find(id);
  }
  pending_.erase(id);
  rec->state = std::string(proto::state::kRunning);
  if (sp) rec->cores = sp->cores;
  rec->start_time = now();  // its real start is not recorded anywhere
  rec->comment = known ? "adopted after restart: running, though the journal had it pending"
                       : "adopted after restart: running, though the journal did not know it";
  store_->put(*rec);
  active_.insert(id);
  log_line("job " + std::to_string(id) + " " + rec->comment + " (not killed)");
}

int Daemon::slots_used() const {
  int used = 0;
  for (auto id : active_) {
    const JobRecord& r = store_->jobs().at(id);
    if (r.state == proto::state::kRunning) used += granted(r);
  }
  return used;
}

// The slot count the planner chose (within a -pe range the largest it could give at the earliest
// start; else the request) in `want`, and the cores: the plan's when valid and free, else picked
// here. Fewer than `want` cores: the job does not fit.
std::vector<int> Daemon::start_cores(const JobRecord& rec, const Decision& d, int& want) const {
  const node::Topology& topo = launcher_->topology();
  std::vector<int> busy;
  for (auto id : active_) {
    const JobRecord& r = store_->jobs().at(id);
    if (r.state == proto::state::kRunning) busy.insert(busy.end(), r.cores.begin(), r.cores.end());
  }
  std::vector<int> cores;
  if (!d.placement.empty()) cores = d.placement.front().cores;
  want = rec.spec.ncpus;
  if (!rec.spec.pe.empty()) {
    int chosen = d.slots > 0 ? d.slots : static_cast<int>(cores.size());
    if (chosen >= rec.spec.slots_min && chosen <= rec.spec.slots_max) want = chosen;
  }
  bool ok = static_cast<int>(cores.size()) == want;
  for (int c : cores)
    ok = ok && c >= 0 && c < static_cast<int>(topo.cores.size()) &&
         std::find(busy.begin(), busy.end(), c) == busy.end();
  // The plan gave no (valid) cores. A share of a job across nodes takes busy ones rather than
  // give the run back (which would requeue a job whose script already runs on its first node).
  if (!ok) cores = node::pick_cores(topo, rec.share ? std::vector<int>{} : busy, want);
  return cores;
}

void Daemon::start_job(JobRecord& rec, const Decision& d) {
  int want = 0;
  std::vector<int> cores = start_cores(rec, d, want);
  if (static_cast<int>(cores.size()) != want) {
    log_line("plan: job " + std::to_string(rec.id) + " does not fit the free cores; start skipped");
    return;
  }
  node::LaunchSpec ls;
  ls.id = rec.id;
  ls.uid = rec.uid;
  ls.gid = rec.gid;
  ls.user = rec.user == std::to_string(rec.uid) ? "" : rec.user;  // named at submit; else by uid
  // A share of a job whose script runs on another node: its cgroups are held by a process that
  // only waits, and `corral exec` adds the job's processes beside it.
  std::string script = rec.share ? std::string(kShareHolder) : write_script(rec);
  if (script.empty() && (errno == ENOSPC || errno == EDQUOT)) {
    // Not the job's fault: it waits, pending, and starts once the state disk has room.
    const std::string why = "state disk full: the job script cannot be written; waiting for room";
    if (rec.comment != why) {
      rec.comment = why;
      store_->put(rec);
      log_line("job " + std::to_string(rec.id) + ": " + why);
    }
    return;
  }
  if (script.empty()) {
    finish(rec, EndReason::LaunchFailed, -1, "cannot write the job script to " + cfg_.state_dir + "/scripts");
    return;
  }
  if (rec.share) ls.argv = {script, "infinity"};
  else if (rec.spec.script.rfind("#!", 0) == 0) ls.argv = {script};
  else ls.argv = {"/bin/sh", script};
  for (std::size_t pos = 0; pos < rec.env_blob.size();) {
    std::size_t end = rec.env_blob.find('\0', pos);
    if (end == std::string::npos) end = rec.env_blob.size();
    std::string_view kv(rec.env_blob.data() + pos, end - pos);
    std::size_t eq = kv.find('=');
    if (eq != std::string_view::npos && eq > 0)
      ls.env[std::string(kv.substr(0, eq))] = std::string(kv.substr(eq + 1));
    pos = end + 1;
  }
  ls.env["CORRAL_JOBID"] = std::to_string(rec.id);
  ls.env["CORRAL_JOBNAME"] = rec.spec.name;
  ls.env["CORRAL_QUEUE"] = rec.spec.queue;
  ls.env["CORRAL_O_WORKDIR"] = rec.spec.cwd;
  ls.env["CORRAL_NCPUS"] = std::to_string(want);
  ls.env["CORRAL_SOCKET"] = cfg_.socket;  // this node's agent, for `corral exec` and the other commands
  // PBS's and Grid Engine's names for the same, so their scripts run unchanged.
  ls.env["PBS_JOBID"] = ls.env["JOB_ID"] = std::to_string(rec.id);
  ls.env["PBS_JOBNAME"] = ls.env["JOB_NAME"] = rec.spec.name;
  ls.env["PBS_QUEUE"] = ls.env["QUEUE"] = rec.spec.queue;
  ls.env["PBS_O_WORKDIR"] = ls.env["SGE_O_WORKDIR"] = rec.spec.cwd;
  ls.env["PBS_NCPUS"] = ls.env["NSLOTS"] = std::to_string(want);
  if (rec.array_id) array_env(rec, ls.env);
  if (!rec.spec.pe.empty()) {
    // Grid Engine's name for the granted parallel environment (qsub -pe).
    ls.env["CORRAL_PE"] = rec.spec.pe;
    ls.env["PE"] = rec.spec.pe;
  }
  ls.cwd = rec.spec.cwd;
  if (rec.spec.umask != proto::kUmaskUnset) ls.umask = static_cast<mode_t>(rec.spec.umask & 0777);
  ls.stdout_path = rec.share ? "/dev/null" : rec.spec.stdout_path;
  ls.stderr_path = rec.share ? "/dev/null" : rec.spec.stderr_path;
  ls.cores = cores;
  if (rec.spec.mem_per_slot_mb > 0) rec.spec.mem_mb = proto::mem_for_slots(rec.spec, want);  // h_vmem
  ls.mem_mb = rec.spec.mem_mb;
  ls.jobfs_mb = rec.spec.jobfs_mb;
  ls.walltime_s = rec.spec.walltime;
  ls.ckpt_signal = cfg_.checkpoint_signal;  // checkpoint_signal / checkpoint_grace (docs/configuration.md)
  ls.ckpt_grace_s = cfg_.checkpoint_grace;
  // A restart when a checkpoint was taken, not when whole seconds of work were counted (a job
  // checkpointed within 1 s of its start would lose its checkpoint dir). work_done > 0 covers
  // journals written before `checkpoints` existed.
  ls.restart = rec.checkpoints > 0 || rec.work_done > 0;
  double t_launch = mono_now();
  // Its start is when it was asked for: the launcher counts its walltime from there too, so a
  // job killed at its walltime shows a run of its walltime, not a few ms less.
  const double t = now();
  std::string err = launcher_->start(ls);
  if (trace_on()) log_line("trace: launcher.start " + std::to_string((mono_now() - t_launch) * 1000) + " ms");
  if (!err.empty()) {
    finish(rec, EndReason::LaunchFailed, -1, err);
    return;
  }
  rec.state = std::string(proto::state::kRunning);
  rec.start_time = t;
  if (rec.first_start < 0) rec.first_start = t;
  rec.last_start_priority = rec.priority;
  rec.cores = cores;
  rec.suspended_seconds = 0;
  rec.suspended_since = 0;
  rec.held = false;
  rec.comment = d.reason;
  store_->put(rec);
  pending_.erase(rec.id);
  active_.insert(rec.id);
  next_poll_ = std::min(next_poll_, mono_now() + cfg_.poll_interval);
  log_line("job " + std::to_string(rec.id) + " started on cores " + join_ints(cores) + " as " +
           rec.user + (rec.spec.pe.empty() ? "" : " (pe " + rec.spec.pe + ", " + std::to_string(want) + " slots)"));
  proto::Event e;
  e.kind = "started";
  e.job = rec.id;
  e.user = rec.user;
  e.cores = cores;
  e.submit_time = rec.submit_time;
  e.reason = d.reason;
  pub_.publish(e);
}

// Freezes or thaws a running/suspended job (a Suspend/Resume decision or an
// admin command). Returns "" or the Launcher's error.
std::string Daemon::suspend_resume(JobRecord& rec, bool sus, const std::string& reason) {
  std::string id = std::to_string(rec.id);
  std::string err = sus ? launcher_->suspend(rec.id) : launcher_->resume(rec.id);
  if (!err.empty()) {
    log_line("job " + id + ": " + (sus ? "suspend" : "resume") + " failed: " + err);
    return err;
  }
  double t = now();
  if (sus) {
    rec.suspended_since = t;
  } else {
    close_suspension(rec, t);
    rec.held = false;
  }
  rec.state = std::string(sus ? proto::state::kSuspended : proto::state::kRunning);
  rec.comment = reason;
  store_->put(rec);
  log_line("job " + id + (sus ? " suspended" : " resumed") + (reason.empty() ? "" : ": " + reason));
  proto::Event e;
  e.kind = sus ? "suspended" : "resumed";
  e.job = rec.id;
  e.user = rec.user;
  e.reason = reason;
  e.cores = rec.cores;
  pub_.publish(e);
  dirty_ = true;
  return "";
}

void Daemon::poll_launcher() {
  double t0 = mono_now();
  for (const auto& e : launcher_->poll()) on_end(e);
  if (trace_on()) log_line("trace: poll " + std::to_string((mono_now() - t0) * 1000) + " ms");
}

void Daemon::on_end(const node::JobEnd& e) {
  if (discard_end_.erase(e.id)) return;
  JobRecord* rec = store_->find(e.id);
  if (!rec || !active_.count(e.id)) {
    log_line("launcher: end of unknown job " + std::to_string(e.id) + " ignored");
    return;
  }
  // A share of a job across nodes ends here only, whatever stopped it: the run is its script's
  // node's to give back, and the coordinator's to settle.
  if (mesh_ && rec->share) return finish(*rec, e.reason, e.exit_code, e.message);
  // Who asked for the requeue or checkpoint (on_control, apply: "requeue requested by root", a
  // policy's reason) stays in the run's comment, with what the launcher saw.
  const std::string asked = rec->requeue_requested ? rec->comment : "";
  if (e.reason == node::EndReason::Preempted || e.reason == node::EndReason::Checkpointed) {
    // "<kind>[: <who asked>][; <what the launcher saw>]", the kind said once
    // (the launcher's messages may begin with it: "checkpointed (exit 0)",
    // "preempted: stopped and requeued"); a bare kind when nothing is known.
    const bool ckpt = e.reason == node::EndReason::Checkpointed;
    const std::string kind = ckpt ? "checkpointed" : "requeued";
    std::string saw = e.message;
    for (const std::string& k : {kind, std::string("preempted")})
      if (saw.rfind(k, 0) == 0) {
        saw.erase(0, k.size());
        if (saw.rfind(": ", 0) == 0) saw.erase(0, 2);
        else if (saw.rfind(' ', 0) == 0) saw.erase(0, 1);
      }
    // A requeue someone asked for: who asked says it all.
    if (!ckpt && !asked.empty()) saw.clear();
    std::string detail = asked;
    if (!saw.empty()) detail += (detail.empty() ? "" : "; ") + saw;
    requeue(*rec, detail.empty() ? kind : kind + ": " + detail, ckpt, e.exit_code);
  } else {
    finish(*rec, e.reason, e.exit_code, e.message);
  }
}

void Daemon::heartbeat() {
  need_sync_ = true;  // starts and ends reach the disk at least every heartbeat
  charge_running(now());
  proto::Event e;
  e.kind = "heartbeat";
  e.pending = static_cast<int>(pending_.size());
  for (auto id : active_) {
    if (store_->jobs().at(id).state == proto::state::kSuspended) ++e.suspended;
    else ++e.running;
  }
  e.slots_used = slots_used();
  e.slots_total = static_cast<int>(launcher_->topology().cores.size());
  pub_.publish(e);
}

void Daemon::sample_usage(bool pub) {
  for (auto id : active_) {
    auto u = launcher_->usage(id);
    if (!u) continue;
    JobRecord& rec = store_->jobs_mut().at(id);
    rec.cpu_seconds = u->cpu_s;
    rec.rss_mb = u->rss_mb;
    if (!pub) continue;
    proto::Event e;
    e.kind = "usage";
    e.job = id;
    e.user = rec.user;
    e.cpu_seconds = u->cpu_s;
    e.rss_mb = u->rss_mb;
    e.cores = rec.cores;
    pub_.publish(e);
  }
}

}  // namespace corral::agent
