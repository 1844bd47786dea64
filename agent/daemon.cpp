#include "agent/daemon.hpp"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <poll.h>
#include <set>
#include <sstream>
#include <stdexcept>
#include <sys/stat.h>
#include <tuple>
#include <unistd.h>

#include "agent/local_socket.hpp"
#include "agent/node/launcher.hpp"
#include "agent/job_accounting.hpp"
#include "agent/node/topology.hpp"

namespace corral::agent {

namespace {
int g_sig_write = -1;
extern "C" void on_signal(int sig) {
  int saved = errno;
  unsigned char b = static_cast<unsigned char>(sig);
  if (g_sig_write >= 0) (void)!::write(g_sig_write, &b, 1);
  errno = saved;
}
}  // namespace

// ---------------------------------------------------------------- setup --

Daemon::Daemon(Config cfg) : cfg_(std::move(cfg)) {
  boot_ = wall_now();
  boot_mono_ = mono_now();
  setup_scheduling();

  store_ = std::make_unique<Store>(cfg_.state_dir, cfg_.fsync);
  if (cfg_.pba) setup_pba();  // after the store: its plan's origin is kept in state_dir
  // Traversable, not listable: jobs (running as their users) read their own
  // script under scripts/; the journal itself is 0600.
  ::chmod(cfg_.state_dir.c_str(), 0711);
  const LoadReport& lr = store_->load_report();
  log_line("state " + store_->path() + ": " + std::to_string(lr.jobs) + " jobs from " +
           std::to_string(lr.entries) + " journal entries, next id " +
           std::to_string(store_->peek_next_id()));
  if (!lr.warning.empty()) log_line("warning: " + lr.warning);
  log_line("config " + (cfg_.config_file.empty() ? std::string("(no file: built-in defaults and flags)") : cfg_.config_file) +
           "; checkpoint signal " + signal_name(cfg_.checkpoint_signal) + ", grace " +
           std::to_string(cfg_.checkpoint_grace) + " s");

  setup_launcher();
  pub_.set_origin(hostname_, boot_);
  load_jobs();
  recover();

  setup_signals();
  pub_.open(cfg_.pub);
  setup_socket();
  store_->flush();
}

void Daemon::setup_signals() {
  if (::pipe2(sig_pipe_, O_CLOEXEC | O_NONBLOCK) != 0)
    throw std::runtime_error("pipe: " + errno_text());
  g_sig_write = sig_pipe_[1];
  struct sigaction sa{};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  for (int s : {SIGTERM, SIGINT, SIGHUP}) ::sigaction(s, &sa, nullptr);
  std::signal(SIGPIPE, SIG_IGN);
}

Daemon::~Daemon() {
  close_socket();
  pub_.close();
  try {
    store_->flush();
  } catch (const std::exception& e) {
    log_line(std::string("error: ") + e.what());
  }
  // The Launcher's destructor leaves running jobs alone: the next corrald
  // adopts them (see recover()).
  g_sig_write = -1;
  for (int fd : sig_pipe_)
    if (fd >= 0) ::close(fd);
}

// ----------------------------------------------------------------- loop --

// SIGHUP reopens the log and the monitor file (rotation); SIGTERM and SIGINT stop the loop.
void Daemon::on_signals() {
  unsigned char sigs[16];
  ssize_t k;
  while ((k = ::read(sig_pipe_[0], sigs, sizeof sigs)) > 0) {
    for (ssize_t i = 0; i < k; ++i) {
      if (sigs[i] == SIGHUP) {
        try {
          log_reopen();
          if (monitor_) open_monitor();
          log_line(monitor_ ? "SIGHUP: log and monitor_file reopened" : "SIGHUP: log reopened");
        } catch (const std::exception& e) {
          log_line(e.what());
        }
      } else {
        log_line(std::string("signal ") + strsignal(sigs[i]) + ": shutting down (running jobs keep running)");
        stop_ = true;
      }
    }
  }
}

int Daemon::run() {
  log_line(std::string("corrald ") + "standalone on " + hostname_ + " (pid " +
           std::to_string(::getpid()) + ")");
  double t = mono_now();
  next_cycle_ = t + cfg_.cycle_interval;
  next_heartbeat_ = t;
  next_poll_ = t + cfg_.poll_interval;
  next_usage_ = t + cfg_.usage_interval;
  std::vector<pollfd> fds;
  std::vector<Client*> fd_clients;
  while (!stop_) {
    double mono = mono_now();
    double deadline = next_heartbeat_;
    if (!pending_.empty()) deadline = std::min(deadline, next_cycle_);
    if (!active_.empty()) deadline = std::min({deadline, next_poll_, next_usage_});
    int timeout = dirty_ ? 0 : static_cast<int>(std::max(0.0, (deadline - mono) * 1000.0) + 1);

    fds.clear();
    fd_clients.clear();
    fds.push_back({sig_pipe_[0], POLLIN, 0});
    fds.push_back({listen_fd_, static_cast<short>(clients_.size() < kMaxClients ? POLLIN : 0), 0});
    int wake = launcher_->wake_fd();
    fds.push_back({wake, static_cast<short>(wake >= 0 ? POLLIN : 0), 0});
    for (auto& [fd, c] : clients_) {
      short ev = c->out.empty() ? POLLIN : static_cast<short>(POLLIN | POLLOUT);
      fds.push_back({fd, ev, 0});
      fd_clients.push_back(c.get());
    }
    int n = ::poll(fds.data(), fds.size(), timeout);
    if (n < 0 && errno != EINTR) {
      log_line("poll: " + errno_text());
      return 1;
    }
    if (fds[0].revents & POLLIN) on_signals();
    // Ends first, and the pass they call for: a freed slot's next job starts before this
    // iteration's requests are read and their journal entries synced. Only jobs whose submit is
    // already on disk can start here: every iteration's commit_and_reply() syncs the submits it
    // acknowledges.
    mono = mono_now();
    if ((fds[2].revents & POLLIN) || (!active_.empty() && mono >= next_poll_)) {
      poll_launcher();
      next_poll_ = mono + cfg_.poll_interval;
      if (dirty_) {
        cycle();
        next_cycle_ = mono_now() + cfg_.cycle_interval;
      }
    }
    if (fds[1].revents & POLLIN) accept_clients();
    for (std::size_t i = 0; i < fd_clients.size(); ++i) {
      Client& c = *fd_clients[i];
      short re = fds[i + 3].revents;
      if (re & (POLLIN | POLLHUP | POLLERR)) read_client(c);
    }
    if (!commit_and_reply()) return 1;
    mono = mono_now();
    if (dirty_ || (!pending_.empty() && mono >= next_cycle_)) {
      cycle();
      next_cycle_ = mono_now() + cfg_.cycle_interval;
    }
    for (const auto& m : launcher_->tidy()) log_line(m);
    if (!active_.empty() && mono >= next_usage_) {
      sample_usage(true);
      next_usage_ = mono + cfg_.usage_interval;
    }
    if (mono >= next_heartbeat_) {
      heartbeat();
      next_heartbeat_ = mono + cfg_.heartbeat_interval;
    }
    if (!commit_and_reply()) return 1;
  }
  return 0;
}

// Write-ahead: everything changed so far is written (and synced when a client
// is owed an acknowledgement: submit, cancel) before any reply leaves.
bool Daemon::commit_and_reply() {
  try {
    // Every stored job not pending or active has ended: trim (a walk of the whole store) only
    // when that count is over the limit.
    if (store_->jobs().size() - pending_.size() - active_.size() > static_cast<std::size_t>(cfg_.keep_ended))
      store_->trim_ended(static_cast<std::size_t>(cfg_.keep_ended));
    bool owed = false;
    for (auto& [fd, c] : clients_) owed |= !c->out.empty();
    store_->flush(owed || need_sync_);
    if (owed) need_sync_ = false;
  } catch (const std::exception& e) {
    log_line(std::string("fatal: cannot persist state: ") + e.what());
    return false;
  }
  pub_.flush();
  for (auto it = clients_.begin(); it != clients_.end();) {
    Client& c = *it->second;
    if (!c.dead && !c.out.empty()) write_client(c);
    if (c.dead || (c.close_after_write && c.out.empty())) {
      ::close(it->first);
      it = clients_.erase(it);
    } else {
      ++it;
    }
  }
  return true;
}

double Daemon::now() const { return wall_now(); }

// ------------------------------------------------------------
// The node and launcher bridge: what the agent asks of its node part
// (agent/node: topology, cgroups, the Launcher) and what it learns from it:
// starting a job on its cores, suspending and resuming, each end and why,
// usage samples, and adopting running jobs after a restart.

namespace {
const char* reason_name(node::EndReason r) {
  switch (r) {
    case node::EndReason::Completed: return "completed";
    case node::EndReason::Failed: return "failed";
    case node::EndReason::Walltime: return "walltime";
    case node::EndReason::Memory: return "mem";
    case node::EndReason::Jobfs: return "jobfs";
    case node::EndReason::Cancelled: return "cancelled";
    case node::EndReason::Preempted: return "requeued";
    case node::EndReason::Checkpointed: return "checkpointed";
    case node::EndReason::LaunchFailed: return "launch_failed";
  }
  return "unknown";
}
}  // namespace

node::Topology agent_topology(const Config& cfg, const std::string& jobfs_dir) {
  if (cfg.declare_cores > 0) {
    long mb = sysconf(_SC_PHYS_PAGES) / 1024 * (sysconf(_SC_PAGESIZE) / 1024);
    return node::declared(1, cfg.declare_cores, mb);
  }
  if (!cfg.topology_xml.empty()) return node::load_xml(cfg.topology_xml);
  return node::discover(jobfs_dir);
}

void Daemon::setup_launcher() {
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
  launcher_ = std::make_unique<node::Launcher>(std::move(topo), lc);
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
    } else if (r.adopted) {
      // Running but not known as running (crash between launch and journal):
      // stop it; the job is still pending and will start again.
      log_line("job " + std::to_string(r.id) + ": stray processes stopped after restart");
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
    requeue(rec, "node_restart: corrald restarted and the job was no longer running", false);
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
  if (!ok) cores = node::pick_cores(topo, busy, want);  // the plan gave no (valid) cores
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
  std::string script = write_script(rec);
  if (script.empty()) {
    finish(rec, "launch_failed", -1, "cannot write the job script to " + cfg_.state_dir + "/scripts");
    return;
  }
  if (rec.spec.script.rfind("#!", 0) == 0) ls.argv = {script};
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
  if (!rec.spec.pe.empty()) {
    // Grid Engine's names for the granted parallel environment (qsub -pe).
    ls.env["CORRAL_PE"] = rec.spec.pe;
    ls.env["PE"] = rec.spec.pe;
    ls.env["NSLOTS"] = std::to_string(want);
  }
  ls.cwd = rec.spec.cwd;
  ls.stdout_path = rec.spec.stdout_path;
  ls.stderr_path = rec.spec.stderr_path;
  ls.cores = cores;
  ls.mem_mb = rec.spec.mem_mb;
  ls.jobfs_mb = rec.spec.jobfs_mb;
  ls.walltime_s = rec.spec.walltime;
  ls.ckpt_signal = cfg_.checkpoint_signal;  // checkpoint_signal / checkpoint_grace (CONFIG.md)
  ls.ckpt_grace_s = cfg_.checkpoint_grace;
  // A restart when a checkpoint was taken, not when whole seconds of work were counted (a job
  // checkpointed within 1 s of its start would lose its checkpoint dir). work_done > 0 covers
  // journals written before `checkpoints` existed.
  ls.restart = rec.checkpoints > 0 || rec.work_done > 0;
  double t_launch = mono_now();
  std::string err = launcher_->start(ls);
  if (trace_on()) log_line("trace: launcher.start " + std::to_string((mono_now() - t_launch) * 1000) + " ms");
  if (!err.empty()) {
    finish(rec, "launch_failed", -1, err);
    return;
  }
  double t = now();
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
    finish(*rec, reason_name(e.reason), e.exit_code, e.message);
  }
}

void Daemon::heartbeat() {
  need_sync_ = true;  // starts and ends reach the disk at least every heartbeat
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

// ------------------------------------------------------------
// The scheduling cycle, and the boundary a mesh plugs into:
//   snapshot()  state out: this node and its pending and running jobs as the
//               scheduling core sees them (coordinator/model.hpp);
//   apply()     decisions in: a Plan from schedule(), today the local core's,
//               in a mesh the elected coordinator's.
// cycle() is standalone mode: schedule(snapshot()) then apply(). The policy
// configuration (backfill, NCI, PBA's project plan, the monitor file) is set
// up here too.

namespace {
Backfill backfill_of(const std::string& s) {
  if (s == "fcfs") return Backfill::Fcfs;
  if (s == "conservative") return Backfill::Conservative;
  if (s == "reserve") return Backfill::Reserve;
  if (s == "checkpoint") return Backfill::Checkpoint;
  return Backfill::Easy;
}

// The core's view of a job record. What can change while a job waits (policy state from
// Plan::updates, a Demote's queue) is set by refresh() too; the names, project, pe and sizes are
// fixed at submit.
void refresh(Job& j, const JobRecord& r) {
  if (j.queue != r.spec.queue) j.queue = r.spec.queue;
  j.priority = r.priority;
  j.cycles_pending = r.cycles_pending;
  j.requeues = r.requeues;
  j.pba_preemptions = r.pba_preemptions;
  j.last_start_priority = r.last_start_priority;
  j.work_done = r.work_done;
  j.first_start = static_cast<Time>(r.first_start);
}
Job to_job(const JobRecord& r, PreemptMode mode) {
  Job j;
  j.preempt = mode;  // preempt_mode: how a policy stops it (PBA's requeue or suspend)
  j.id = r.id;
  j.name = r.spec.name;
  j.user = r.user;
  j.group = r.group;
  j.project = r.spec.project;
  j.submit = static_cast<Time>(r.submit_time);
  j.walltime = r.spec.walltime;
  j.pe = r.spec.pe;
  std::tie(j.slots_min, j.slots_max) = slot_range(r.spec);
  j.mem_mb = r.spec.mem_mb;
  j.jobfs_mb = r.spec.jobfs_mb;
  j.reserve = r.spec.reserve;
  refresh(j, r);
  return j;
}
}  // namespace

// ---------------------------------------------------------------- setup --

void Daemon::setup_scheduling() {
  sched_.order.policy = cfg_.order;
  sched_.planner.backfill = backfill_of(cfg_.backfill);
  sched_.planner.max_reservation = cfg_.max_reservation;
  if (cfg_.default_duration > 0) sched_.planner.default_duration = cfg_.default_duration;
  if (!cfg_.monitor_file.empty()) {
    open_monitor();  // a path it cannot write is a clear error at start
    sched_.planner.monitor = true;
  }
  sched_.nci.enabled = cfg_.nci;
  if (cfg_.nci) {
    auto req = [&](const char* k) {
      return std::find(cfg_.nci_require.begin(), cfg_.nci_require.end(), k) != cfg_.nci_require.end();
    };
    sched_.nci.require_walltime = req("walltime");
    sched_.nci.require_vmem = req("mem");
    sched_.nci.require_jobfs = req("jobfs");
    sched_.nci.window_wait = static_cast<Time>(cfg_.nci_start_window);
  }
  preempt_mode_ = cfg_.preempt_mode == "suspend" ? PreemptMode::Suspend : PreemptMode::Requeue;
}

// The origin of a PBA plan's relative dates (+N weeks, +DURATION deadlines):
// the first start with PBA, kept in state_dir/pba_origin, so that a restart
// moves no allocation and no deadline.
Time Daemon::pba_origin() {
  const std::string path = cfg_.state_dir + "/pba_origin";
  {
    std::ifstream in(path);
    long long t = 0;
    if (in >> t && t > 0) return static_cast<Time>(t);
  }
  const Time t = static_cast<Time>(now());
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << t << "\n";
    if (!out) throw std::runtime_error("cannot write " + tmp + ": " + errno_text());
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) throw std::runtime_error("cannot write " + path + ": " + errno_text());
  return t;
}

// pba = yes: the plan file (coordinator/pba/PLANFILE.md) read as `corral sim --projects` reads
// it (sim::use_projects), with relative dates counted from pba_origin().
void Daemon::setup_pba() {
  const std::string& path = cfg_.pba_plan;
  if (path.empty())
    throw std::runtime_error("pba = yes needs pba_plan = FILE (a project plan: coordinator/pba/PLANFILE.md)");
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("pba_plan " + path + ": cannot read: " + errno_text());
  std::ostringstream text;
  text << f.rdbuf();
  pba::PlanParseOptions po;
  po.origin = pba_origin();
  pba::PlanParseResult pr = pba::parse_plan(text.str(), po);
  if (!pr.ok()) {
    std::string all;
    for (const auto& e : pr.errors) all += (all.empty() ? "" : "; ") + e;
    throw std::runtime_error("pba_plan " + path + ": " + all);
  }
  if (pr.plan.projects.empty()) throw std::runtime_error("pba_plan " + path + ": no project declared");
  if (!pr.plan.queues.empty() || !pr.plan.grants.empty())
    log_line("pba_plan " + path + ": its queue and grant lines are not used here (queues come from `queues`)");
  PbaConfig& p = sched_.pba;
  p.enabled = true;
  p.plan = std::move(pr.plan);
  p.preempt = cfg_.pba_preempt;
  p.preempt_after = static_cast<Time>(cfg_.pba_preempt_after);
  p.max_requeues = static_cast<int>(cfg_.pba_max_requeues);
  p.require_project_tag = cfg_.pba_require_project;
  if (cfg_.nci) {  // as sim::use_projects: NCI resumes, and holds suspended jobs' cores
    p.resume_suspended = false;
    p.suspended_hold_cores = sched_.nci.claim_suspended_cores;
    // With a time window NCI lets PBA's allocated class use the cores
    // suspended jobs hold (nci.cpp), so PBA counts them free (as corral sim).
    if (cfg_.nci_start_window > 0) p.suspended_hold_cores = false;
  }
  sched_.planner.may_place = pba::may_place_now;  // placeholder slots beside memory-heavy jobs
  int allocated = 0;
  for (const auto& pd : p.plan.projects) allocated += p.plan.allocated_slots(pd.name, po.origin);
  log_line("PBA: plan " + path + ": " + std::to_string(p.plan.projects.size()) + " project(s), " +
           std::to_string(allocated) + " slot(s) allocated this week; preemption " +
           (p.preempt ? "after " + std::to_string(p.preempt_after) + " s pending, by " + cfg_.preempt_mode
                      : std::string("off")));
}

// MONITOR (sge6-reservation-backfill.txt 2d): the schedule file, appended to
// and never truncated, as Grid Engine's; SIGHUP reopens it (rotation).
void Daemon::open_monitor() {
  std::FILE* f = std::fopen(cfg_.monitor_file.c_str(), "a");
  if (!f) throw std::runtime_error("monitor_file: cannot open " + cfg_.monitor_file + ": " + errno_text());
  monitor_.reset(f);
}

void Daemon::write_monitor(const std::vector<std::string>& lines) {
  for (const std::string& l : lines) {
    std::fwrite(l.data(), 1, l.size(), monitor_.get());
    std::fputc('\n', monitor_.get());
  }
  if (std::fflush(monitor_.get()) != 0) log_line("monitor_file " + cfg_.monitor_file + ": write failed: " + errno_text());
}

// ----------------------------------------------------- state out: snapshot --

std::vector<Queue> Daemon::snapshot_queues() const {
  std::vector<Queue> out;
  for (const auto& q : cfg_.queues) {
    Queue qq;
    qq.name = q.name;
    qq.priority = q.priority;
    out.push_back(std::move(qq));
  }
  // PBA's pre-qualification demotes to this queue: below every other one, unless configured
  // (as for corral sim, coordinator/sim/sim.cpp project_queues()).
  if (sched_.pba.enabled) add_lowest_queue(out, sched_.pba.lowest_queue);
  return out;
}

void Daemon::snapshot_fixed(Snapshot& s, Time t) const {
  s.now = t;
  const node::Topology& topo = launcher_->topology();
  Node n;
  n.name = hostname_;
  n.cores = static_cast<int>(topo.cores.size());
  n.mem_mb = topo.mem_mb;
  n.jobfs_mb = topo.jobfs_mb;
  for (const auto& c : topo.cores) n.core_numa.push_back(c.numa);
  s.nodes.clear();
  s.nodes.push_back(std::move(n));
  s.queues = snapshot_queues();
  s.running.clear();
  for (auto id : active_) {
    const JobRecord& r = store_->jobs().at(id);
    RunningJob rj;
    rj.job = to_job(r, preempt_mode_);
    rj.start = static_cast<Time>(r.start_time);
    // No walltime: planned for default_duration as it was before its start
    // (Grid Engine), else as if it ran for a year (it holds its cores).
    // Suspended time does not count against the walltime (nci-pbs-policy.txt).
    rj.suspended_for = static_cast<Time>(suspended_total(r, t));
    const Time no_walltime = cfg_.default_duration > 0 ? static_cast<Time>(cfg_.default_duration) : 365 * 86400;
    rj.expected_end = rj.start + rj.suspended_for + (r.spec.walltime > 0 ? r.spec.walltime : no_walltime);
    rj.slots = granted(r);
    rj.placement.push_back(Placement{0, static_cast<std::uint32_t>(rj.slots), r.cores});
    rj.suspended = r.state == proto::state::kSuspended;
    // The NCI resume window counts from the start of this suspension; a job an
    // admin holds (`corral suspend`) has none: only `corral resume` thaws it.
    if (rj.suspended && !r.held && r.suspended_since > 0) rj.suspended_since = static_cast<Time>(r.suspended_since);
    s.running.push_back(std::move(rj));
  }
}

Snapshot Daemon::snapshot(Time t) const {
  Snapshot s;
  snapshot_fixed(s, t);
  s.pending.reserve(pending_.size());
  for (auto id : pending_) {
    auto it = store_->jobs().find(id);
    if (it == store_->jobs().end()) throw std::out_of_range("snapshot: pending job " + std::to_string(id) + " is not in the store");
    s.pending.push_back(to_job(it->second, preempt_mode_));
  }
  return s;
}

// snapshot(t), kept in snap_ and brought up to date: both pending_ and snap_.pending are in id
// order, so one merge walk drops the jobs that left, converts the ones that came (appended, or
// a requeued job put back in its place) and refreshes the rest in place.
const Snapshot& Daemon::pass_snapshot(Time t) {
  snapshot_fixed(snap_, t);
  auto& v = snap_.pending;
  // Only the kept entries whose record changed since the last pass are refreshed: a walk of every
  // pending record costs a cache miss each.
  auto& stale = snap_stale_;
  std::sort(stale.begin(), stale.end());
  std::size_t st = 0;
  std::size_t w = 0, r = 0;  // write and read positions: [w, r) are dropped entries
  for (auto id : pending_) {
    while (r < v.size() && v[r].id < id) ++r;
    if (r < v.size() && v[r].id == id) {
      if (w != r) {
        v[w] = std::move(v[r]);
        snap_recs_[w] = snap_recs_[r];
      }
      while (st < stale.size() && stale[st] < id) ++st;
      if (st < stale.size() && stale[st] == id) refresh(v[w], *snap_recs_[w]);
      ++w, ++r;
      continue;
    }
    const JobRecord* rec = store_->find(id);
    if (!rec) throw std::out_of_range("snapshot: pending job " + std::to_string(id) + " is not in the store");
    if (w < r) {  // reuse a dropped entry's place
      v[w] = to_job(*rec, preempt_mode_);
      snap_recs_[w] = rec;
    } else {
      v.insert(v.begin() + static_cast<std::ptrdiff_t>(w), to_job(*rec, preempt_mode_));
      snap_recs_.insert(snap_recs_.begin() + static_cast<std::ptrdiff_t>(w), rec);
      ++r;
    }
    ++w;
  }
  v.erase(v.begin() + static_cast<std::ptrdiff_t>(w), v.end());
  snap_recs_.resize(w);
  stale.clear();
  if (trace_on() && std::getenv("CORRAL_CHECK_SNAPSHOT")) {
    // Self-check (tests): the kept snapshot says what a fresh one says.
    const bool same = snapshot(t).pending == v;  // every member of every job
    log_line(same ? "trace: snapshot check ok (" + std::to_string(v.size()) + " pending)"
                  : "trace: snapshot check FAILED");
  }
  return snap_;
}

// The kept pass snapshot's memory back (the queue drained); the next pass builds it anew.
void Daemon::drop_pass_snapshot() {
  snap_ = Snapshot{};
  snap_recs_ = {};
  snap_stale_ = {};
}

// ----------------------------------------------------------- the cycle --

void Daemon::cycle() {
  dirty_ = false;
  if (pending_.empty() && active_.empty()) return;
  double t0 = mono_now();
  // A kept Planner and Plan (their buffers live across passes); the node never changes while
  // corrald runs, so the planner may keep what it derived from it (nodes_version).
  const Snapshot& snap = pass_snapshot(static_cast<Time>(now()));
  snap_.nodes_version = 1;
  schedule(snap, sched_, ++passes_, planner_, plan_);
  if (monitor_) write_monitor(plan_.monitor);
  if (trace_on()) log_line("trace: schedule " + std::to_string((mono_now() - t0) * 1000) + " ms");
  apply(plan_);
}

// ------------------------------------------------------ decisions in: apply --

void Daemon::apply(const Plan& plan) {
  for (const auto& u : plan.updates) {
    if (JobRecord* r = store_->find(u.job); r && !r->ended()) {
      r->priority = u.priority;  // kept in memory; persisted with its next change
      r->cycles_pending = u.cycles_pending;
      snap_stale_.push_back(u.job);
    }
  }
  for (const Decision& d : plan.decisions) {
    JobRecord* rec = store_->find(d.job);
    std::string id = std::to_string(d.job);
    if (!rec || rec->ended()) {
      if (d.action != Action::Reserve) log_line("plan: job " + id + " is unknown or ended; decision skipped");
      continue;
    }
    bool pending = rec->state == proto::state::kPending;
    switch (d.action) {
      case Action::Start:
        if (!pending || rec->cancel_requested) {
          log_line("plan: job " + id + " is not pending; start skipped");
          break;
        }
        start_job(*rec, d);
        break;
      case Action::Reserve:
        if (pending) rec->comment = "reserved: " + (d.reason.empty() ? "resources held" : d.reason);
        break;
      case Action::Suspend:
      case Action::Resume: {
        bool sus = d.action == Action::Suspend;
        if (rec->state != (sus ? proto::state::kRunning : proto::state::kSuspended)) {
          log_line("plan: job " + id + " is " + rec->state + "; " + (sus ? "suspend" : "resume") + " skipped");
          break;
        }
        if (!sus && rec->held) break;  // suspended by an admin: only `corral resume` thaws it
        if (suspend_resume(*rec, sus, d.reason).empty() && sus && d.pba_preemption) {
          rec->pba_preemptions += 1;  // PBA's requeue bound (pba.hpp contract)
          store_->put(*rec);
        }
        break;
      }
      case Action::Requeue:
      case Action::Checkpoint: {
        if (pending) break;
        bool ck = d.action == Action::Checkpoint;
        std::string err = ck ? launcher_->checkpoint(d.job) : launcher_->requeue(d.job);
        if (!err.empty()) {
          log_line("job " + id + ": " + (ck ? "checkpoint" : "requeue") + " failed: " + err);
          break;
        }
        rec->requeue_requested = true;
        if (d.pba_preemption) rec->pba_preemptions += 1;  // PBA's requeue bound (pba.hpp contract)
        rec->comment = d.reason;
        store_->put(*rec);
        log_line("job " + id + (ck ? " checkpointing" : " requeueing") + (d.reason.empty() ? "" : ": " + d.reason));
        break;
      }
      case Action::Reject:
        if (pending) finish(*rec, "rejected", -1, d.reason.empty() ? "can never run as asked" : d.reason);
        break;
      case Action::Demote:
        if (pending && !d.queue.empty()) {
          rec->spec.queue = d.queue;
          snap_stale_.push_back(d.job);
          rec->comment = "moved to queue " + d.queue + (d.reason.empty() ? "" : ": " + d.reason);
          store_->put(*rec);
          log_line("job " + id + " " + rec->comment);
        }
        break;
    }
  }
}

}  // namespace corral::agent
