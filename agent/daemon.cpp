#include "agent/daemon.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <stdexcept>

#include "agent/exec_process.hpp"
#include "agent/local_socket.hpp"
#include "agent/mesh_link.hpp"
#include "agent/node/launcher.hpp"

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

  store_ = std::make_unique<Store>(cfg_.state_dir, cfg_.fsync, cfg_.recover);
  if (cfg_.pba) setup_pba();  // after the store: its plan's origin is kept in state_dir
  setup_charging();           // after PBA: its plan may hold the grants
  // Traversable, not listable: jobs (running as their users) read their own
  // script under scripts/; the journal itself is 0600.
  ::chmod(cfg_.state_dir.c_str(), 0711);
  const LoadReport& lr = store_->load_report();
  log_line("state " + store_->path() + ": " + std::to_string(lr.jobs) + " jobs from " +
           std::to_string(lr.entries) + " journal entries, next id " +
           std::to_string(store_->peek_next_id()));
  if (!lr.warning.empty()) log_line("warning: " + lr.warning);
  for (auto id : lr.lost)
    log_line("recover: job " + std::to_string(id) + " could not be restored (no intact entry holds it)");
  for (auto id : lr.maybe_stale)
    log_line("recover: job " + std::to_string(id) +
             " restored from entries before the damage: a later change to it may be lost");
  log_line("config " + (cfg_.config_file.empty() ? std::string("(no file: built-in defaults and flags)") : cfg_.config_file) +
           "; checkpoint signal " + signal_name(cfg_.checkpoint_signal) + ", grace " +
           std::to_string(cfg_.checkpoint_grace) + " s");

  if (!cfg_.mesh.empty()) {  // after the store: its lock keeps a second corrald off the raft files
    MeshConfig mc;
    mc.name = cfg_.mesh;
    mc.voters = cfg_.voters;
    mc.node_name = cfg_.node_name;
    mc.listen = cfg_.listen;
    mc.dir = cfg_.state_dir + "/mesh";
    mc.keys = load_mesh_keys({cfg_.mesh_key, cfg_.mesh_allowed_keys, cfg_.mesh_insecure}, cfg_.voters, cfg_.listen);
    mc.allowed_file = cfg_.mesh_allowed_keys;
    mc.fsync = cfg_.fsync;
    mc.submit_wait_ms = static_cast<std::uint64_t>(cfg_.mesh_submit_wait) * 1000;
    mc.sched = sched_;
    mc.queues = snapshot_queues();
    mc.grants = grants_;
    mc.on_order = [this](const proto::jobs::Message& m) { mesh_order(m); };
    mc.on_ended = [this](std::uint64_t job) { mesh_wait_ended(job); };
    mc.on_removed = [this](const std::string& by) { mesh_removed(by); };
    mesh_ = std::make_unique<MeshLink>(std::move(mc));
  }

  setup_launcher();
  pub_.set_origin(hostname_, boot_);
  load_jobs();
  load_drain();
  recover();
  if (mesh_) mesh_report_node();

  setup_signals();
  pub_.open(cfg_.pub);
  setup_socket();
  try {
    store_->flush();
  } catch (const StoreFull& e) {  // an intact journal serves; the changes are written once there is room
    disk_full_ = true;
    need_sync_ = true;
    log_line(std::string("state disk full: ") + e.what());
  }
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
  exec_watch_.reset();  // its threads send through the mesh
  mesh_.reset();
  close_socket();
  pub_.close();
  try {
    flush_ledger(true);
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

// SIGHUP reopens the log and the monitor file (rotation); SIGTERM and SIGINT stop the loop,
// the coordinator's once it has handed its role over (mesh_leave()).
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
      } else if (leave_by_ > 0 || !mesh_leave()) {  // a second signal does not wait for the handover
        log_line(std::string("signal ") + strsignal(sigs[i]) + ": shutting down (running jobs keep running)");
        stop_ = true;
      }
    }
  }
}

int Daemon::run() {
  std::string mode = mesh_ ? "member " + cfg_.listen + " of mesh " + cfg_.mesh : "standalone";
  log_line("corrald " + mode + " on " + hostname_ + " (pid " + std::to_string(::getpid()) + ")");
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
    if (!clients_.empty()) deadline = std::min(deadline, next_idle_check_);
    if (mono < accept_paused_until_) deadline = std::min(deadline, accept_paused_until_);
    if (leave_by_ > 0) deadline = std::min(deadline, mono + 0.05);  // watching mesh_->status()
    int timeout = dirty_ ? 0 : static_cast<int>(std::max(0.0, (deadline - mono) * 1000.0) + 1);

    fds.clear();
    fd_clients.clear();
    fds.push_back({sig_pipe_[0], POLLIN, 0});
    fds.push_back({listen_fd_, static_cast<short>(listening(mono) ? POLLIN : 0), 0});
    int wake = launcher_->wake_fd();
    fds.push_back({wake, static_cast<short>(wake >= 0 ? POLLIN : 0), 0});
    fds.push_back({mesh_ ? mesh_->wake_fd() : -1, POLLIN, 0});
    for (auto& [fd, c] : clients_) {
      fds.push_back({fd, client_events(*c), 0});
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
    if (fds[3].revents & POLLIN) mesh_->run_replies();
    if (fds[1].revents & POLLIN) accept_clients();
    for (std::size_t i = 0; i < fd_clients.size(); ++i) {
      Client& c = *fd_clients[i];
      short re = fds[i + 4].revents;
      if (re & (POLLIN | POLLHUP | POLLERR)) read_client(c, (re & (POLLHUP | POLLERR)) != 0);
    }
    close_idle(mono_now());
    if (mesh_) exec_watchdog(mono_now());
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
      log_suppressed();
      next_heartbeat_ = mono + cfg_.heartbeat_interval;
    }
    if (!commit_and_reply()) return 1;
    if (leave_by_ > 0 && !stop_) mesh_left();
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
    flush_ledger(owed || need_sync_);  // charges first: a run's end in the journal is charged
    try {
      store_->flush(owed || need_sync_);
      if (owed || need_sync_) need_sync_ = false;
      if (disk_full_) log_line("state disk has room again: all changes written");
      disk_full_ = false;
    } catch (const StoreFull& e) {
      if (!disk_full_) log_line(std::string("state disk full: ") + e.what());
      disk_full_ = true;
      need_sync_ = true;
      refuse_unsynced_submits();
    }
    unsynced_submits_.clear();
  } catch (const std::exception& e) {
    log_line(std::string("fatal: cannot persist state: ") + e.what());
    return false;
  }
  pub_.flush();
  for (auto& [fd, c] : clients_)
    if (!c->dead && !c->out.empty()) write_client(*c);
  reap_clients();
  return true;
}

// The state disk is full: every submit answered since the last write is withdrawn and its
// acknowledgement replaced by a refusal. Other changes stay in the batch, written once there is room.
void Daemon::refuse_unsynced_submits() {
  for (auto it = unsynced_submits_.rbegin(); it != unsynced_submits_.rend(); ++it) {
    store_->withdraw(it->id);
    pub_.withdraw(it->id);
    pending_.erase(it->id);
    log_line("job " + std::to_string(it->id) + " not accepted: state disk full");
    auto c = clients_.find(it->fd);
    if (c == clients_.end()) continue;
    std::string no = proto::frame(proto::encode(proto::Message{proto::ErrorRep{"disk_full", "state disk full: job not accepted"}}));
    c->second->out.replace(it->at, it->len, no);
  }
  try {
    store_->flush();
  } catch (const StoreFull&) {  // still full: retried at the next iteration
  }
}

double Daemon::now() const { return wall_now(); }

}  // namespace corral::agent
