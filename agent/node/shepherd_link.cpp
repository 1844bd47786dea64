// The agent's side of the corral-shepherd server: spawning it (once, and
// again if it died), sending it start requests, and reading the wake records
// its jobs' processes send (running, failed, ended).
#include "launcher_impl.hpp"

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>

namespace corral::node {
using namespace detail;

// The shepherd server, (re)started when needed: posix_spawn once, then one fork per job in it.
// A dead server shows as EPIPE on the next request (start() then restarts it once).
std::string Launcher::Impl::ensure_server() {
  if (srv_fd >= 0) return {};
  stop_server();
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return "socketpair: " + errstr(errno);
  posix_spawn_file_actions_t fa;
  posix_spawnattr_t at;
  posix_spawn_file_actions_init(&fa);
  posix_spawnattr_init(&at);
  // Moved up first (to 10+) so that the dup2s below never overwrite one another.
  int fds[2] = {::fcntl(sv[1], F_DUPFD_CLOEXEC, 10), ::fcntl(wake_w, F_DUPFD_CLOEXEC, 10)};
  int dn = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  for (int f = 0; f < 3; ++f) posix_spawn_file_actions_adddup2(&fa, dn, f);
  for (int f = 0; f < 2; ++f) posix_spawn_file_actions_adddup2(&fa, fds[f], 3 + f);
  sigset_t all, none;
  sigfillset(&all);
  sigemptyset(&none);
  posix_spawnattr_setsigdefault(&at, &all);
  posix_spawnattr_setsigmask(&at, &none);
  posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
  std::string arg0 = shepherd, arg1 = "--server";
  char* argv[] = {arg0.data(), arg1.data(), nullptr};
  char* envp[] = {nullptr};
  pid_t pid = -1;
  int rc = ::posix_spawn(&pid, shepherd.c_str(), &fa, &at, argv, envp);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&at);
  for (int f : fds)
    if (f >= 0) ::close(f);
  if (dn >= 0) ::close(dn);
  ::close(sv[1]);
  if (rc != 0) {
    ::close(sv[0]);
    return "cannot start the shepherd server " + shepherd + ": " + errstr(rc);
  }
  srv_fd = sv[0];
  srv_pid = pid;
  return {};
}

void Launcher::Impl::stop_server() {
  if (srv_fd >= 0) ::close(srv_fd);  // EOF: the server exits once its last job is reaped
  srv_fd = -1;
  bool busy = false;
  for (auto& [id, j] : jobs) busy |= j.served && !j.launch_failed;
  if (srv_pid > 0 && busy) {
    old_servers.push_back(srv_pid);  // it stays for its jobs (exit codes); reaped by poll() later
  } else if (srv_pid > 0) {
    int pfd = static_cast<int>(::syscall(SYS_pidfd_open, srv_pid, 0));
    if (pfd >= 0) {
      struct pollfd p {pfd, POLLIN, 0};
      if (::poll(&p, 1, 2000) == 0) ::kill(srv_pid, SIGKILL);
      ::close(pfd);
    }
    while (::waitpid(srv_pid, nullptr, 0) < 0 && errno == EINTR) {}
  }
  srv_pid = -1;
}

std::string Launcher::Impl::send_request(const std::string& req) {
  std::string send_err;
  for (int attempt = 0; attempt < 2; ++attempt) {  // a dead server is restarted once
    send_err = ensure_server();
    if (!send_err.empty()) break;
    std::size_t off = 0;
    while (off < req.size()) {
      ssize_t n = ::send(srv_fd, req.data() + off, req.size() - off, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      off += static_cast<std::size_t>(n);
    }
    if (off == req.size()) break;
    send_err = "shepherd server: " + errstr(errno);
    if (off > 0) break;  // half a request went out: not safe to resend on the same server
    stop_server();
  }
  return send_err;
}

// One wake record: a shepherd's pid once it runs, or its failure.
void Launcher::Impl::take(const WakeRecord& r) {
  auto it = jobs.find(r.id);
  if (it == jobs.end()) return;
  Job& j = it->second;
  const std::int32_t kind = r.kind & kWakeKindMask;
  if (kind == kWakeEnded && j.served && j.pid_known && r.pid == j.shepherd) {
    j.end_seen = true;
    if (r.kind & kWakeHasStatus) j.end_status = wake_status(r.kind);
  }
  if (j.pid_known || (kind != kWakeRunning && kind != kWakeFailed)) return;
  j.shepherd = r.pid;
  j.pid_known = true;
  j.our_child = false;  // the server's child
  if (r.kind == kWakeFailed) {
    j.launch_failed = true;
  } else {
    save_record(r.id, j);  // from now on the job can be adopted after a restart
    j.pidfd = static_cast<int>(::syscall(SYS_pidfd_open, r.pid, 0));  // ESRCH: gone already (-1)
  }
}

// Reads wake records; with want != 0 blocks (up to timeout_ms) until that job has reported.
// Returns true if `want` is known (or no job was wanted).
bool Launcher::Impl::drain(std::uint64_t want, int timeout_ms) {
  auto deadline = now_ms() + timeout_ms;
  WakeRecord buf[64];
  bool news = false;  // an end (or a failure of another job) that poll() must see
  while (true) {
    ssize_t n = ::read(wake_r, buf, sizeof buf);
    if (n > 0) {
      for (ssize_t i = 0; i + static_cast<ssize_t>(sizeof(WakeRecord)) <= n; i += sizeof(WakeRecord)) {
        const WakeRecord& r = buf[i / static_cast<ssize_t>(sizeof(WakeRecord))];
        news |= r.kind != kWakeRunning && !(r.kind == kWakeFailed && r.id == want);  // ended: any flags
        take(r);
      }
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (want == 0) break;
    auto it = jobs.find(want);
    if (it == jobs.end() || it->second.pid_known) break;
    std::int64_t left = deadline - now_ms();
    if (left <= 0) break;
    struct pollfd p {wake_r, POLLIN, 0};
    ::poll(&p, 1, static_cast<int>(std::min<std::int64_t>(left, 100)));
  }
  if (want != 0 && news) nudge_owed = true;
  auto it = want ? jobs.find(want) : jobs.end();
  return want == 0 || it == jobs.end() || it->second.pid_known;
}

// Records consumed outside poll() may have carried ends: make the wake fd readable again.
void Launcher::Impl::nudge() {
  if (!nudge_owed) return;
  nudge_owed = false;
  struct pollfd p {wake_w, POLLOUT, 0};
  if (::poll(&p, 1, 0) == 1) send_wake(wake_w, 0, 0, kWakeNudge);  // full: it is readable anyway
}

// Before acting on a job's processes: its shepherd must be in its cgroups (it has reported).
void Launcher::Impl::settle(std::uint64_t id, Job& j) {
  if (!j.pid_known) drain(id, 5000);
  nudge();
}

}  // namespace corral::node
