#include "agent/daemon.hpp"

#include <fcntl.h>
#include <malloc.h>
#include <grp.h>
#include <poll.h>
#include <pwd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include <zmq.h>

#include <algorithm>
#include <tuple>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "agent/node/launcher.hpp"
#include "agent/node/topology.hpp"

namespace corral::agent {

// ------------------------------------------------------------------ log --

namespace {
std::FILE* g_log = stderr;
std::string g_log_path;

double wall_now() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}
double mono_now() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// CORRAL_TRACE=1 in corrald's environment logs the time of each loop stage.
bool trace_on() {
  static const bool on = std::getenv("CORRAL_TRACE") != nullptr;
  return on;
}

int g_sig_write = -1;
extern "C" void on_signal(int sig) {
  int saved = errno;
  unsigned char b = static_cast<unsigned char>(sig);
  if (g_sig_write >= 0) (void)!::write(g_sig_write, &b, 1);
  errno = saved;
}

std::string errno_text() { return std::strerror(errno); }

std::string user_name(uid_t uid) {
  passwd pw{}, *res = nullptr;
  char buf[4096];
  if (getpwuid_r(uid, &pw, buf, sizeof buf, &res) == 0 && res) return pw.pw_name;
  return "";
}
std::string group_name(gid_t gid) {
  group gr{}, *res = nullptr;
  char buf[4096];
  if (getgrgid_r(gid, &gr, buf, sizeof buf, &res) == 0 && res) return gr.gr_name;
  return std::to_string(gid);
}

std::string join_ints(const std::vector<int>& v) {
  std::string s;
  for (int x : v) s += (s.empty() ? "" : ",") + std::to_string(x);
  return s;
}

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

Backfill backfill_of(const std::string& s) {
  if (s == "fcfs") return Backfill::Fcfs;
  if (s == "conservative") return Backfill::Conservative;
  if (s == "reserve") return Backfill::Reserve;
  if (s == "checkpoint") return Backfill::Checkpoint;
  return Backfill::Easy;
}

// Slots a started job holds: the cores it was granted (a -pe range grants a
// count within it), else its request.
int granted(const JobRecord& r) {
  return r.cores.empty() ? r.spec.ncpus : static_cast<int>(r.cores.size());
}
// Seconds suspended in the current run, including an ongoing suspension.
double suspended_total(const JobRecord& r, double now) {
  return r.suspended_seconds + (r.suspended_since > 0 ? std::max(0.0, now - r.suspended_since) : 0.0);
}
// Ends an ongoing suspension at `now` (its time is added to suspended_seconds).
void close_suspension(JobRecord& r, double now) {
  r.suspended_seconds = suspended_total(r, now);
  r.suspended_since = 0;
}
// The slot range a spec asks for: a -pe range (min-max), else exactly ncpus.
std::pair<int, int> slot_range(const proto::JobSpec& s) {
  if (!s.pe.empty() && s.slots_min >= 1 && s.slots_max >= s.slots_min) return {s.slots_min, s.slots_max};
  return {s.ncpus, s.ncpus};
}

constexpr std::size_t kMaxClients = 4096;
constexpr std::size_t kMaxRequestElems = 1u << 16;  // env entries etc. in one request
}  // namespace

void log_to(const std::string& path) {
  if (path.empty()) return;
  std::FILE* f = std::fopen(path.c_str(), "a");
  if (!f) throw std::runtime_error("cannot open log file " + path + ": " + errno_text());
  std::setvbuf(f, nullptr, _IOLBF, 0);
  if (g_log != stderr) std::fclose(g_log);
  g_log = f;
  g_log_path = path;
}

void log_line(const std::string& msg) {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  tm t{};
  gmtime_r(&ts.tv_sec, &t);
  char stamp[80];
  std::snprintf(stamp, sizeof stamp, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ", t.tm_year + 1900,
                t.tm_mon + 1, t.tm_mday, t.tm_hour, t.tm_min, t.tm_sec, ts.tv_nsec / 1000000);
  std::fprintf(g_log, "%s corrald: %s\n", stamp, msg.c_str());
  std::fflush(g_log);
}

node::Topology agent_topology(const Config& cfg, const std::string& jobfs_dir) {
  if (cfg.declare_cores > 0) {
    long mb = sysconf(_SC_PHYS_PAGES) / 1024 * (sysconf(_SC_PAGESIZE) / 1024);
    return node::declared(1, cfg.declare_cores, mb);
  }
  if (!cfg.topology_xml.empty()) return node::load_xml(cfg.topology_xml);
  return node::discover(jobfs_dir);
}

// -------------------------------------------------------------- clients --

struct Daemon::Client {
  int fd = -1;
  Peer peer;
  proto::FrameReader reader;
  std::string out;
  std::uint64_t waiting = 0;     // job id a `wait` blocks on
  bool close_after_write = false;
  bool dead = false;
};

// ---------------------------------------------------------------- setup --

Daemon::Daemon(Config cfg) : cfg_(std::move(cfg)) {
  boot_ = wall_now();
  boot_mono_ = mono_now();
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

  // Issue 3: "CRIU only where `criu check` passes; never depend on it". Probed once, before the
  // Launcher has children of its own to reap, and only reported: checkpoints stay cooperative.
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
  // below in run()): off the path from one job's end to the next one's start.
  lc.defer_cleanup = true;
  launcher_ = std::make_unique<node::Launcher>(std::move(topo), lc);
  log_line("cgroups " + launcher_->cgroups().describe());
  if (auto w = node::check_enforcement(launcher_->cgroups(), cfg_.strict || cfg_.nci); !w.empty())
    log_line("warning: " + w);

  for (const auto& [id, rec] : store_->jobs()) {
    if (rec.state == proto::state::kPending) pending_.insert(id);
    else if (!rec.ended()) active_.insert(id);
    else if (sched_.pba.enabled && rec.end_reason == "completed" && !rec.spec.project.empty())
      ++sched_.pba.jobs_done[rec.spec.project];  // throughput SLA progress (ended jobs kept)
  }
  recover();

  if (::pipe2(sig_pipe_, O_CLOEXEC | O_NONBLOCK) != 0)
    throw std::runtime_error("pipe: " + errno_text());
  g_sig_write = sig_pipe_[1];
  struct sigaction sa{};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  for (int s : {SIGTERM, SIGINT, SIGHUP}) ::sigaction(s, &sa, nullptr);
  std::signal(SIGPIPE, SIG_IGN);

  setup_pub();
  setup_socket();
  store_->flush();
}

// pba = yes: the plan file (docs/plan-file.md) as `corral sim --projects` reads it
// (tools/corral/cmd_sim.cpp, sim::use_projects), with relative dates counted from pba_origin().
// The origin of the plan's relative dates (+N weeks, +DURATION deadlines):
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

void Daemon::setup_pba() {
  const std::string& path = cfg_.pba_plan;
  if (path.empty())
    throw std::runtime_error("pba = yes needs pba_plan = FILE (a project plan: docs/plan-file.md)");
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

Daemon::~Daemon() {
  for (auto& [fd, c] : clients_) ::close(fd);
  if (listen_fd_ >= 0) {
    ::close(listen_fd_);
    ::unlink(cfg_.socket.c_str());
  }
  if (zpub_) {
    send_events();
    zmq_close(zpub_);
  }
  if (zctx_) zmq_ctx_term(zctx_);
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

void Daemon::setup_socket() {
  const std::string& path = cfg_.socket;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof addr.sun_path)
    throw std::runtime_error("socket path '" + path + "' is empty or too long (max " +
                             std::to_string(sizeof addr.sun_path - 1) + " bytes)");
  std::memcpy(addr.sun_path, path.c_str(), path.size());
  std::string dir = path.substr(0, path.rfind('/'));
  if (!dir.empty() && ::mkdir(dir.c_str(), 0755) == 0) ::chmod(dir.c_str(), 0755);

  // A live corrald on the same socket is an error; a stale file is replaced.
  int probe = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (probe >= 0) {
    bool live = ::connect(probe, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
    ::close(probe);
    if (live) throw std::runtime_error("another corrald is already serving " + path);
  }
  ::unlink(path.c_str());
  listen_fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (listen_fd_ < 0) throw std::runtime_error("socket: " + errno_text());
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0)
    throw std::runtime_error("cannot bind " + path + ": " + errno_text());
  // Every user may connect; identity comes from SO_PEERCRED, not the client.
  ::chmod(path.c_str(), 0666);
  if (::listen(listen_fd_, 512) != 0) throw std::runtime_error("listen: " + errno_text());
  log_line("serving " + path);
}

void Daemon::setup_pub() {
  if (cfg_.pub.empty() || cfg_.pub == "none") return;
  zctx_ = zmq_ctx_new();
  zpub_ = zmq_socket(zctx_, ZMQ_PUB);
  int linger = 0, hwm = 100000;
  zmq_setsockopt(zpub_, ZMQ_LINGER, &linger, sizeof linger);
  zmq_setsockopt(zpub_, ZMQ_SNDHWM, &hwm, sizeof hwm);
  if (cfg_.pub.rfind("ipc://", 0) == 0) {
    std::string p = cfg_.pub.substr(6);
    std::string dir = p.substr(0, p.rfind('/'));
    if (!dir.empty()) ::mkdir(dir.c_str(), 0755);
  }
  if (zmq_bind(zpub_, cfg_.pub.c_str()) != 0)
    throw std::runtime_error("cannot publish on " + cfg_.pub + ": " + zmq_strerror(zmq_errno()));
  log_line("publishing events on " + cfg_.pub);
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

// ----------------------------------------------------------------- loop --

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
    if (fds[0].revents & POLLIN) {
      unsigned char sigs[16];
      ssize_t k;
      while ((k = ::read(sig_pipe_[0], sigs, sizeof sigs)) > 0) {
        for (ssize_t i = 0; i < k; ++i) {
          if (sigs[i] == SIGHUP) {
            try {
              log_to(g_log_path);
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
    // Ends first, and the pass they call for: a freed slot's next job starts before this
    // iteration's requests are read and their journal entries fsync'd (with a burst of submits
    // that was up to 32 decodes and an fdatasync between an end and the next start). Only jobs
    // whose submit is already on disk can start here: every iteration's commit_and_reply()
    // syncs the submits it acknowledges.
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
    // Every stored job not pending or active has ended: trim (a walk of the whole store) only when
    // that count is over the limit, not twice per loop iteration (it was a launch cost).
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
  send_events();
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

void Daemon::accept_clients() {
  while (clients_.size() < kMaxClients) {
    int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
        log_line("accept: " + errno_text());
      return;
    }
    ucred cr{};
    socklen_t len = sizeof cr;
    if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) != 0) {
      ::close(fd);
      continue;
    }
    auto c = std::make_unique<Client>();
    c->fd = fd;
    c->peer = Peer{cr.uid, cr.gid, cr.pid};
    clients_[fd] = std::move(c);
  }
}

void Daemon::read_client(Client& c) {
  char buf[65536];
  bool closed = false;
  for (;;) {
    ssize_t n = ::recv(c.fd, buf, sizeof buf, 0);
    if (n > 0) {
      c.reader.feed(buf, static_cast<std::size_t>(n));
      if (c.reader.buffered() > 2 * proto::kMaxFrame) break;  // let it drain first
      continue;
    }
    if (n == 0) {
      closed = true;
      break;
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) c.dead = true;
    break;
  }
  std::string frame;
  try {
    // A client blocked in `wait` sends nothing more until it is answered.
    while (!c.dead && !c.waiting && !c.close_after_write && c.reader.next(frame)) handle(c, frame);
  } catch (const proto::ProtoError& e) {
    send(c, proto::ErrorRep{"proto", e.what()});
    c.close_after_write = true;
  }
  if (closed) {
    if (c.waiting) c.dead = true;  // nobody left to tell
    else c.close_after_write = true;
  }
}

void Daemon::send(Client& c, const proto::Message& m) { c.out += proto::frame(proto::encode(m)); }

void Daemon::write_client(Client& c) {
  while (!c.out.empty()) {
    ssize_t n = ::send(c.fd, c.out.data(), c.out.size(), MSG_NOSIGNAL);
    if (n > 0) {
      c.out.erase(0, static_cast<std::size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    c.dead = true;
    return;
  }
}

void Daemon::handle(Client& c, const std::string& frame) {
  proto::Message m;
  try {
    m = proto::decode(frame, kMaxRequestElems);
  } catch (const proto::ProtoError& e) {
    log_line("bad request from pid " + std::to_string(c.peer.pid) + " uid " +
             std::to_string(c.peer.uid) + ": " + e.what());
    send(c, proto::ErrorRep{"proto", e.what()});
    c.close_after_write = true;
    return;
  }
  try {
    if (auto* r = std::get_if<proto::SubmitReq>(&m)) {
      send(c, on_submit(c.peer, *r));
    } else if (auto* s = std::get_if<proto::StatReq>(&m)) {
      send(c, on_stat(c.peer, *s));
    } else if (auto* x = std::get_if<proto::CancelReq>(&m)) {
      send(c, on_cancel(c.peer, *x));
    } else if (auto* w = std::get_if<proto::WaitReq>(&m)) {
      const JobRecord* rec = store_->find(w->id);
      if (!rec) {
        send(c, proto::ErrorRep{"not_found", "unknown job id " + std::to_string(w->id)});
      } else if (rec->ended()) {
        send(c, proto::WaitRep{info(*rec)});
      } else {
        c.waiting = w->id;  // answered by notify_waiters()
      }
    } else if (auto* nd = std::get_if<proto::NodeReq>(&m)) {
      send(c, on_node(c.peer, *nd));
    } else if (auto* ct = std::get_if<proto::ControlReq>(&m)) {
      send(c, on_control(c.peer, *ct));
    } else {
      send(c, proto::ErrorRep{"invalid", std::string("'") + std::string(proto::type_name(m)) +
                                             "' is not a request"});
    }
  } catch (const std::exception& e) {
    log_line(std::string("error handling request: ") + e.what());
    send(c, proto::ErrorRep{"internal", e.what()});
  }
}

// ------------------------------------------------------------- requests --

proto::Message Daemon::on_submit(const Peer& p, proto::SubmitReq& r) {
  proto::JobSpec& s = r.spec;
  const node::Topology& topo = launcher_->topology();
  auto bad = [](std::string msg) -> proto::Message { return proto::ErrorRep{"invalid", std::move(msg)}; };
  if (s.ncpus < 1) return bad("ncpus must be at least 1");
  const int node_cores = static_cast<int>(topo.cores.size());
  if (!s.pe.empty() || s.slots_min != 0 || s.slots_max != 0) {
    // -pe NAME n-m (sge6-reservation-backfill.txt section 3): "n-" is capped
    // at this node's cores; the count itself is the planner's choice (issue 2).
    if (s.pe.empty()) return bad("a slot range needs a parallel environment name (-pe NAME RANGE)");
    if (s.slots_min < 1) return bad("-pe " + s.pe + ": the slot range must start at 1 or more");
    if (s.slots_max < s.slots_min)
      return bad("-pe " + s.pe + ": the slot range " + std::to_string(s.slots_min) + "-" +
                 std::to_string(s.slots_max) + " is empty (maximum below minimum)");
    if (s.ncpus != 1 && s.ncpus != s.slots_min)
      return bad("give either ncpus or a -pe slot range, not both");
    if (s.slots_min > node_cores)
      return bad("-pe " + s.pe + " " + std::to_string(s.slots_min) + "-: the minimum of " +
                 std::to_string(s.slots_min) + " slots exceeds this node's " +
                 std::to_string(node_cores) + " cores");
    s.slots_max = std::min(s.slots_max, node_cores);
    s.ncpus = s.slots_min;
  }
  if (s.ncpus > node_cores)
    return bad("ncpus=" + std::to_string(s.ncpus) + " exceeds this node's " +
               std::to_string(topo.cores.size()) + " cores");
  if (s.mem_mb < 0) return bad("mem must not be negative");
  if (topo.mem_mb > 0 && s.mem_mb > topo.mem_mb)
    return bad("mem=" + std::to_string(s.mem_mb) + "mb exceeds this node's " +
               std::to_string(topo.mem_mb) + "mb");
  if (s.jobfs_mb < 0) return bad("jobfs must not be negative");
  if (topo.jobfs_mb > 0 && s.jobfs_mb > topo.jobfs_mb)
    return bad("jobfs=" + std::to_string(s.jobfs_mb) + "mb exceeds this node's " +
               std::to_string(topo.jobfs_mb) + "mb");
  if (s.walltime < 0) return bad("walltime must not be negative");
  if (s.walltime == 0) s.walltime = cfg_.default_walltime;
  if (s.walltime == 0 && cfg_.require_walltime)
    return bad("a walltime is required here (-l walltime=HH:MM:SS)");
  if (s.script.empty()) return bad("the job script is empty");
  if (s.cwd.empty() || s.cwd[0] != '/') return bad("the working directory must be an absolute path");
  if (s.name.size() > 255) return bad("the job name is longer than 255 characters");
  for (const auto& e : s.env)
    if (e.find('=') == std::string::npos || e[0] == '=')
      return bad("environment entry '" + e.substr(0, 40) + "' is not KEY=VALUE");
  if (s.queue.empty()) s.queue = cfg_.queues.front().name;
  bool known = false;
  std::string names;
  for (const auto& q : cfg_.queues) {
    known |= q.name == s.queue;
    names += (names.empty() ? "" : ", ") + q.name;
  }
  if (!known) return bad("unknown queue '" + s.queue + "' (queues here: " + names + ")");

  if (sched_.nci.enabled) {
    // NCI: mandatory requests and queue bounds are refused at submit
    // (nci-pbs-policy.txt "Resource limits").
    Job j;
    j.queue = s.queue;
    j.walltime = s.walltime;
    std::tie(j.slots_min, j.slots_max) = slot_range(s);
    j.mem_mb = s.mem_mb;
    j.jobfs_mb = s.jobfs_mb;
    NciVerdict v = validate_request(j, snapshot_queues(), sched_.nci);
    if (!v.ok) return bad("refused by the NCI policy: " + v.reason);
  }

  JobRecord rec;
  rec.id = store_->next_id();
  if (s.name.empty()) s.name = "job";
  for (std::string* path : {&s.stdout_path, &s.stderr_path})
    if (!path->empty() && (*path)[0] != '/') *path = s.cwd + "/" + *path;
  if (s.stdout_path.empty()) s.stdout_path = s.cwd + "/" + s.name + ".o" + std::to_string(rec.id);
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
  store_->put(rec);  // flushed before the reply leaves (run())
  pending_.insert(rec.id);
  dirty_ = true;
  log_line("job " + std::to_string(rec.id) + " submitted by " + rec.user + ": " + rec.spec.name +
           (rec.spec.pe.empty() ? " ncpus=" + std::to_string(rec.spec.ncpus)
                                : " pe=" + rec.spec.pe + " slots=" + std::to_string(rec.spec.slots_min) +
                                      "-" + std::to_string(rec.spec.slots_max)) +
           " queue=" + rec.spec.queue);
  proto::Event e;
  e.kind = "submitted";
  e.job = rec.id;
  e.user = rec.user;
  e.submit_time = rec.submit_time;
  publish(e);
  return proto::SubmitRep{rec.id};
}

proto::Message Daemon::on_stat(const Peer&, const proto::StatReq& r) {
  // Like qstat, everyone sees every job (never scripts or environments).
  proto::StatRep rep;
  if (r.id != 0) {
    const JobRecord* rec = store_->find(r.id);
    if (!rec) return proto::ErrorRep{"not_found", "unknown job id " + std::to_string(r.id)};
    rep.jobs.push_back(info(*rec));
    return rep;
  }
  rep.jobs.reserve(store_->jobs().size());
  for (const auto& [id, rec] : store_->jobs()) rep.jobs.push_back(info(rec));
  return rep;
}

proto::Message Daemon::on_cancel(const Peer& p, const proto::CancelReq& r) {
  JobRecord* rec = store_->find(r.id);
  if (!rec) return proto::ErrorRep{"not_found", "unknown job id " + std::to_string(r.id)};
  if (p.uid != 0 && p.uid != rec->uid)
    return proto::ErrorRep{"permission", "job " + std::to_string(r.id) + " belongs to " +
                                             rec->user + "; only its owner or root may cancel it"};
  if (rec->ended())
    return proto::ErrorRep{"invalid", "job " + std::to_string(r.id) + " has already ended (" +
                                          rec->end_reason + ")"};
  std::string who = user_name(p.uid);
  if (who.empty()) who = std::to_string(p.uid);
  if (rec->state == proto::state::kPending) {
    finish(*rec, "cancelled", -1, "cancelled by " + who + " before it started");
  } else {
    rec->cancel_requested = true;
    rec->comment = "cancel requested by " + who;
    store_->put(*rec);
    std::string err = launcher_->cancel(rec->id);
    if (!err.empty()) log_line("job " + std::to_string(rec->id) + ": cancel: " + err);
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
  if (act != "suspend" && act != "resume" && act != "requeue" && act != "checkpoint")
    return proto::ErrorRep{"invalid", "unknown action '" + act.substr(0, 32) +
                                          "' (suspend, resume, requeue or checkpoint)"};
  JobRecord* rec = store_->find(r.id);
  std::string id = std::to_string(r.id);
  if (!rec) return proto::ErrorRep{"not_found", "unknown job id " + id};
  bool admin_only = act == "suspend" || act == "resume";
  if (p.uid != 0 && (admin_only || p.uid != rec->uid))
    return proto::ErrorRep{"permission", admin_only ? "only root may " + act + " jobs (job " + id + " belongs to " + rec->user + ")"
                                                    : "job " + id + " belongs to " + rec->user + "; only its owner or root may " + act + " it"};
  std::string who = user_name(p.uid);
  if (who.empty()) who = std::to_string(p.uid);
  auto not_now = [&](const std::string& why) {
    return proto::ErrorRep{"invalid", "cannot " + act + " job " + id + ": it is " + why};
  };
  std::string st = rec->state;
  if (rec->ended()) return not_now("ended (" + rec->end_reason + ")");
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
    std::string err = ck ? launcher_->checkpoint(rec->id) : launcher_->requeue(rec->id);
    if (!err.empty()) return proto::ErrorRep{"internal", "cannot " + act + " job " + id + ": " + err};
    rec->requeue_requested = true;
    rec->held = false;
    rec->comment = (ck ? "checkpoint requested by " : "requeue requested by ") + who;
    store_->put(*rec);
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
  n.mode = "standalone";
  n.topology = node::describe(topo);
  n.cores = static_cast<int>(topo.cores.size());
  n.numa_nodes = topo.numa_nodes;
  n.mem_mb = topo.mem_mb;
  n.slots_total = n.cores;
  n.slots_used = slots_used();
  n.pending = static_cast<int>(pending_.size());
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

// ---------------------------------------------------------- scheduling --

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

namespace {
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
  // Only the kept entries whose record changed since the last pass are refreshed (a walk of every
  // pending record was ~8 % of the agent's CPU per launch with 2,000 queued: a cache miss each).
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

int Daemon::slots_used() const {
  int used = 0;
  for (auto id : active_) {
    const JobRecord& r = store_->jobs().at(id);
    if (r.state == proto::state::kRunning) used += granted(r);
  }
  return used;
}

void Daemon::start_job(JobRecord& rec, const Decision& d) {
  const node::Topology& topo = launcher_->topology();
  std::vector<int> busy;
  for (auto id : active_) {
    const JobRecord& r = store_->jobs().at(id);
    if (r.state == proto::state::kRunning) busy.insert(busy.end(), r.cores.begin(), r.cores.end());
  }
  std::vector<int> cores;
  if (!d.placement.empty()) cores = d.placement.front().cores;
  // The slot count the planner chose: within a -pe range the largest it could
  // give at the earliest start (issue 2); else the request.
  int want = rec.spec.ncpus;
  if (!rec.spec.pe.empty()) {
    int chosen = d.slots > 0 ? d.slots : static_cast<int>(cores.size());
    if (chosen >= rec.spec.slots_min && chosen <= rec.spec.slots_max) want = chosen;
  }
  bool ok = static_cast<int>(cores.size()) == want;
  for (int c : cores)
    ok = ok && c >= 0 && c < static_cast<int>(topo.cores.size()) &&
         std::find(busy.begin(), busy.end(), c) == busy.end();
  if (!ok) cores = node::pick_cores(topo, busy, want);  // the plan gave no (valid) cores
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
  ls.ckpt_signal = cfg_.checkpoint_signal;  // checkpoint_signal / checkpoint_grace (docs/configuration.md)
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
  publish(e);
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
  publish(e);
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

void Daemon::requeue(JobRecord& rec, const std::string& why, bool keep_work, int exit_code) {
  double t = now();
  rec.runs.push_back(proto::RunInfo{rec.start_time, t, "preempted", exit_code, why});
  if (keep_work && rec.start_time > 0)
    rec.work_done += static_cast<std::int64_t>(t - rec.start_time - suspended_total(rec, t));
  if (keep_work) rec.checkpoints += 1;
  close_suspension(rec, t);
  rec.held = false;
  rec.state = std::string(proto::state::kPending);
  rec.requeues += 1;
  rec.cycles_pending = 0;  // pba.hpp: a requeue starts its pending cycles again (pba::on_requeue)
  snap_stale_.push_back(rec.id);  // the kept snapshot may still hold its entry from before its start
  rec.cores.clear();
  rec.requeue_requested = false;
  rec.comment = why;
  store_->put(rec);
  active_.erase(rec.id);
  pending_.insert(rec.id);
  dirty_ = true;
  log_line("job " + std::to_string(rec.id) + " back to pending: " + why);
  proto::Event ev;
  ev.kind = "requeued";
  ev.job = rec.id;
  ev.user = rec.user;
  ev.reason = why;
  ev.end_reason = rec.runs.back().end_reason;
  ev.exit_code = exit_code;
  ev.run = static_cast<std::int32_t>(rec.runs.size());
  ev.start_time = rec.runs.back().start;
  publish(ev);
}

void Daemon::finish(JobRecord& rec, const std::string& reason, int exit_code, const std::string& msg) {
  double t = now();
  const bool ran = active_.count(rec.id) > 0;  // else it ends before any run (cancel, reject, launch)
  if (ran) rec.runs.push_back(proto::RunInfo{rec.start_time, t, reason, exit_code, msg});
  close_suspension(rec, t);
  rec.held = false;
  rec.state = std::string(proto::state::kEnded);
  rec.end_reason = reason;
  rec.exit_code = exit_code;
  rec.end_time = t;
  rec.comment = msg;
  // The script and environment are not needed any more: keep memory small.
  rec.spec.script.clear();
  rec.spec.script.shrink_to_fit();
  rec.env_blob.clear();
  rec.env_blob.shrink_to_fit();
  if (auto u = launcher_->has(rec.id) ? launcher_->usage(rec.id) : std::nullopt) {
    rec.cpu_seconds = u->cpu_s;
    rec.rss_mb = u->max_rss_mb;
  }
  store_->put(rec);
  pending_.erase(rec.id);
  active_.erase(rec.id);
  remove_script(rec.id);
  if (sched_.pba.enabled && reason == "completed" && !rec.spec.project.empty())
    ++sched_.pba.jobs_done[rec.spec.project];  // throughput SLA progress (pba.hpp contract)
  dirty_ = true;
  // Queue drained: hand the memory of a burst (scripts, environments, the kept pass snapshot)
  // back. (finish() runs after the pass's schedule() has returned: snap_ is not in use.)
  if (pending_.empty() && active_.empty()) {
    snap_ = Snapshot{};
    snap_recs_ = {};
    snap_stale_ = {};
    ::malloc_trim(0);
  }
  log_line("job " + std::to_string(rec.id) + " ended: " + reason + " exit " +
           std::to_string(exit_code) + (msg.empty() ? "" : " (" + msg + ")"));
  proto::Event e;
  e.kind = "ended";
  e.job = rec.id;
  e.user = rec.user;
  e.reason = reason;
  e.end_reason = reason;
  e.exit_code = exit_code;
  if (ran) {
    e.run = static_cast<std::int32_t>(rec.runs.size());
    e.start_time = rec.start_time;
  }
  e.cores = rec.cores;
  e.cpu_seconds = rec.cpu_seconds;
  e.rss_mb = rec.rss_mb;
  publish(e);
  notify_waiters(rec);
}

void Daemon::notify_waiters(const JobRecord& rec) {
  for (auto& [fd, c] : clients_) {
    if (c->waiting != rec.id) continue;
    send(*c, proto::WaitRep{info(rec)});
    c->waiting = 0;
    std::string frame;  // requests queued behind the wait
    try {
      while (!c->waiting && c->reader.next(frame)) handle(*c, frame);
    } catch (const proto::ProtoError& e) {
      send(*c, proto::ErrorRep{"proto", e.what()});
      c->close_after_write = true;
    }
  }
}

// ------------------------------------------------------------- scripts --

std::string Daemon::write_script(const JobRecord& rec) {
  // Root-owned 0711 dir: users cannot list it; each script is its owner's, 0500.
  // Per start: one open (no mkdir, unlink or geteuid first: the dir is made, and a leftover of
  // the same id removed, only when the open says so) and no fchown when the agent's user owns it
  // already (new files take the dir's group unless it is setgid: checked when the dir is made).
  std::string dir = cfg_.state_dir + "/scripts";
  std::string path = dir + "/" + std::to_string(rec.id);
  const int flags = O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW;
  int fd = ::open(path.c_str(), flags, 0500);
  for (int attempt = 0; fd < 0 && attempt < 2 && (errno == ENOENT || errno == EEXIST); ++attempt) {
    if (errno == ENOENT) {
      if (::mkdir(dir.c_str(), 0711) != 0 && errno != EEXIST) return "";
      scripts_owner_.forget();
    } else {
      ::unlink(path.c_str());
    }
    fd = ::open(path.c_str(), flags, 0500);
  }
  if (fd < 0) return "";
  std::string_view data = rec.spec.script;
  bool ok = true;
  while (ok && !data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    ok = n > 0;
    if (ok) data.remove_prefix(static_cast<std::size_t>(n));
  }
  if (ok && scripts_owner_.euid() == 0 && !scripts_owner_.owned_by(dir, rec.uid, rec.gid))
    ok = ::fchown(fd, rec.uid, rec.gid) == 0;
  ::close(fd);
  if (!ok) {
    ::unlink(path.c_str());
    return "";
  }
  return path;
}

void Daemon::remove_script(std::uint64_t id) {
  ::unlink((cfg_.state_dir + "/scripts/" + std::to_string(id)).c_str());
}

// -------------------------------------------------------------- events --

void Daemon::publish(proto::Event& e) {
  e.seq = ++seq_;
  e.time = now();
  e.node = hostname_;
  e.boot = boot_;
  if (!zpub_) return;
  // Sent by send_events() before any reply leaves, in this order: a zmq_send wakes ZeroMQ's I/O
  // thread (and the subscribers'), which then competed for the CPUs between a job's end and the
  // next start on its slot.
  events_out_.emplace_back("corral." + e.kind, proto::encode(e));
}

void Daemon::send_events() {
  // Never block the agent on a slow subscriber: drop at the high-water mark
  // (the subscriber sees the gap in seq).
  for (const auto& [topic, payload] : events_out_) {
    zmq_send(zpub_, topic.data(), topic.size(), ZMQ_SNDMORE | ZMQ_DONTWAIT);
    zmq_send(zpub_, payload.data(), payload.size(), ZMQ_DONTWAIT);
  }
  events_out_.clear();
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
  publish(e);
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
    publish(e);
  }
}

// --------------------------------------------------------------- misc --

double Daemon::now() const { return wall_now(); }

proto::JobInfo Daemon::info(const JobRecord& r) const {
  proto::JobInfo j;
  j.id = r.id;
  j.name = r.spec.name;
  j.user = r.user;
  j.uid = r.uid;
  j.queue = r.spec.queue;
  j.project = r.spec.project;
  j.state = r.state;
  j.exit_code = r.exit_code;
  j.end_reason = r.end_reason;
  j.submit_time = r.submit_time;
  j.start_time = r.start_time;
  j.end_time = r.end_time;
  j.walltime = r.spec.walltime;
  j.ncpus = r.spec.ncpus;
  j.pe = r.spec.pe;
  std::tie(j.slots_min, j.slots_max) = slot_range(r.spec);
  j.slots = r.cores.empty() ? 0 : static_cast<int>(r.cores.size());
  j.suspended_seconds = suspended_total(r, now());
  j.mem_mb = r.spec.mem_mb;
  j.jobfs_mb = r.spec.jobfs_mb;
  j.cores = r.cores;
  j.cpu_seconds = r.cpu_seconds;
  j.rss_mb = r.rss_mb;
  j.requeues = r.requeues;
  j.stdout_path = r.spec.stdout_path;
  j.stderr_path = r.spec.stderr_path;
  j.comment = r.comment;
  j.runs = r.runs;
  if (r.state == proto::state::kRunning || r.state == proto::state::kSuspended)
    j.runs.push_back(proto::RunInfo{r.start_time, 0, "", -1, ""});  // the current run
  return j;
}

}  // namespace corral::agent
