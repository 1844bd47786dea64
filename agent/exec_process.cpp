#include "agent/exec_process.hpp"

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <ctime>
#include <cstring>
#include <stdexcept>

namespace corral::agent {

namespace {

constexpr std::size_t kChunk = 64 * 1024;

// What the child reports before exec on its error pipe: the step and errno.
struct ChildFail {
  int step;
  int err;
};
constexpr const char* kSteps[] = {"join the job's cgroups", "set the user's groups", "set the group id",
                                  "set the user id", "set up stdin and output", "run /bin/sh"};

[[noreturn]] void child_fail(int fd, int step) {
  ChildFail f{step, errno};
  (void)!::write(fd, &f, sizeof f);
  ::_exit(127);
}

// The child of the fork: system calls only (the agent has other threads).
[[noreturn]] void child_main(const ExecLaunch& l, const std::vector<gid_t>& groups, char* const* argv,
                             char* const* envp, int in_r, int out_w, int err_w, int fail_w) {
  for (const std::string& f : l.procs_files) {
    int fd = ::open(f.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0 || ::write(fd, "0", 1) != 1) child_fail(fail_w, 0);
    ::close(fd);
  }
  ::setsid();
  if (::setgroups(groups.size(), groups.data()) != 0) child_fail(fail_w, 1);
  if (::setgid(l.gid) != 0) child_fail(fail_w, 2);
  if (::setuid(l.uid) != 0) child_fail(fail_w, 3);
  if (::chdir(l.cwd.c_str()) != 0 && ::chdir("/") != 0) child_fail(fail_w, 4);
  int in = in_r >= 0 ? in_r : ::open("/dev/null", O_RDONLY);
  if (in < 0 || ::dup2(in, 0) < 0 || ::dup2(out_w, 1) < 0 || ::dup2(err_w, 2) < 0) child_fail(fail_w, 4);
  sigset_t all;
  sigemptyset(&all);
  ::sigprocmask(SIG_SETMASK, &all, nullptr);
  for (int s : {SIGPIPE, SIGINT, SIGTERM, SIGHUP, SIGCHLD}) ::signal(s, SIG_DFL);
  // Every descriptor but 0-2 and the error pipe (close-on-exec) goes.
  ::syscall(SYS_close_range, 3u, static_cast<unsigned>(fail_w) - 1, 0u);
  ::syscall(SYS_close_range, static_cast<unsigned>(fail_w) + 1, ~0u, 0u);
  ::execve("/bin/sh", argv, envp);
  child_fail(fail_w, 5);
}

}  // namespace

std::string spawn_exec(const ExecLaunch& l, ExecChild& child) {
  std::vector<gid_t> groups{l.gid};
  if (!l.user.empty()) {
    int n = 64;
    groups.resize(static_cast<std::size_t>(n));
    if (::getgrouplist(l.user.c_str(), l.gid, groups.data(), &n) < 0) {
      groups.resize(static_cast<std::size_t>(n));
      if (::getgrouplist(l.user.c_str(), l.gid, groups.data(), &n) < 0) n = 0;
    }
    groups.resize(static_cast<std::size_t>(n));
    if (groups.empty()) groups.push_back(l.gid);
  }
  std::vector<std::string> args = {"sh", "-c", l.command};
  std::vector<char*> argv, envp;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env = l.env;
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  int out[2], err[2], fail[2] = {-1, -1}, in[2] = {-1, -1};
  if (::pipe2(out, O_CLOEXEC) != 0) return std::string("pipe: ") + std::strerror(errno);
  if (::pipe2(err, O_CLOEXEC) != 0) {
    ::close(out[0]), ::close(out[1]);
    return std::string("pipe: ") + std::strerror(errno);
  }
  if (::pipe2(fail, O_CLOEXEC) != 0 || (l.input && ::pipe2(in, O_CLOEXEC) != 0)) {
    const int e = errno;
    for (int fd : {out[0], out[1], err[0], err[1], fail[0], fail[1]})
      if (fd >= 0) ::close(fd);
    return std::string("pipe: ") + std::strerror(e);
  }
  pid_t pid = ::fork();
  if (pid == 0) child_main(l, groups, argv.data(), envp.data(), in[0], out[1], err[1], fail[1]);
  int fork_errno = errno;
  for (int fd : {out[1], err[1], fail[1], in[0]})
    if (fd >= 0) ::close(fd);
  if (pid < 0) {
    for (int fd : {out[0], err[0], fail[0], in[1]})
      if (fd >= 0) ::close(fd);
    return std::string("fork: ") + std::strerror(fork_errno);
  }
  ChildFail f{};
  ssize_t n;
  while ((n = ::read(fail[0], &f, sizeof f)) < 0 && errno == EINTR) {
  }
  ::close(fail[0]);
  if (n == static_cast<ssize_t>(sizeof f)) {
    while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
    }
    ::close(out[0]), ::close(err[0]);
    if (in[1] >= 0) ::close(in[1]);
    const int step = f.step >= 0 && f.step < 6 ? f.step : 5;
    return std::string("cannot ") + kSteps[step] + ": " + std::strerror(f.err);
  }
  child = ExecChild{pid, out[0], err[0], in[1]};
  return "";
}

// One watched process. `m` orders a stop()'s kill against the session's reaping of the pid (a
// reaped pid may be another process's).
struct ExecWatch::Session {
  std::string key;
  pid_t pid = -1;
  std::thread thread;
  std::atomic<bool> done{false};
  std::mutex m;
  bool reaped = false;
  std::int64_t kill_at_ms = -1;  // monotonic ms of the SIGKILL a stop() set (-1: none)
  int poke_fd = -1;              // an eventfd: stop() and input() wake the thread
  // Its stdin (when it has a pipe, in_fd: the thread's, closed by it): what input() gave that
  // the process has not read yet, and whether its caller's input ended.
  std::string in_buf;
  bool in_eof = false;
  bool in_open = false;          // input() takes more
};

ExecWatch::ExecWatch() : stop_fd_(::eventfd(0, EFD_CLOEXEC)) {
  if (stop_fd_ < 0) throw std::runtime_error(std::string("eventfd: ") + std::strerror(errno));
}

ExecWatch::~ExecWatch() {
  std::uint64_t one = 1;
  (void)!::write(stop_fd_, &one, sizeof one);  // never read: every thread sees it readable
  for (auto& s : sessions_) {
    s->thread.join();
    ::close(s->poke_fd);
  }
  ::close(stop_fd_);
}

namespace {

std::int64_t mono_ms() {
  timespec t{};
  ::clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<std::int64_t>(t.tv_sec) * 1000 + t.tv_nsec / 1000000;
}

// Reads what `fd` has now (it is non-blocking); false at its end.
bool relay(int fd, int stream, const ExecWatch::Output& out) {
  char buf[kChunk];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n > 0) {
      out(stream, std::string(buf, static_cast<std::size_t>(n)));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
  }
}

int exit_code(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 255;
}

// The poll timeout: the next sign of life, or a stop()'s SIGKILL when sooner.
int next_wake(ExecWatch::Session& s, std::int64_t next_alive) {
  std::lock_guard<std::mutex> lock(s.m);
  std::int64_t at = s.kill_at_ms >= 0 ? std::min(next_alive, s.kill_at_ms) : next_alive;
  return static_cast<int>(std::max<std::int64_t>(0, at - mono_ms()));
}

// Writes what input() gave to the process's stdin as far as the pipe takes it; closes it at
// the input's end, or when the process closed its end (what is left is dropped). -1 once closed.
int feed_stdin(ExecWatch::Session& s, int in_fd) {
  std::lock_guard<std::mutex> lock(s.m);
  while (!s.in_buf.empty()) {
    ssize_t n = ::write(in_fd, s.in_buf.data(), s.in_buf.size());
    if (n > 0) {
      s.in_buf.erase(0, static_cast<std::size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return in_fd;
    s.in_buf.clear();  // EPIPE: the process will not read it
    s.in_open = false;
    ::close(in_fd);
    return -1;
  }
  if (!s.in_eof) return in_fd;
  s.in_open = false;
  ::close(in_fd);
  return -1;
}

// Whether stdin has input waiting for the pipe to take it.
bool stdin_waits(ExecWatch::Session& s) {
  std::lock_guard<std::mutex> lock(s.m);
  return !s.in_buf.empty();
}

// The session: output until the process has ended and its pipes are drained (a process it left
// behind holding them open does not keep the caller waiting), then its status.
void run_session(ExecChild c, ExecWatch::Session& s, int stop_fd, const ExecWatch::Output& out,
                 const ExecWatch::Ended& ended, const ExecWatch::Alive& alive) {
  int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, c.pid, 0));
  for (int fd : {c.out_fd, c.err_fd, c.in_fd})
    if (fd >= 0) ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  int in_fd = c.in_fd >= 0 ? feed_stdin(s, c.in_fd) : -1;
  bool open_out = true, open_err = true, exited = false;
  int status = 0;
  std::int64_t next_alive = mono_ms() + ExecWatch::kAliveMs;
  while (!exited) {
    pollfd p[6] = {{stop_fd, POLLIN, 0}, {pidfd, POLLIN, 0}, {open_out ? c.out_fd : -1, POLLIN, 0},
                   {open_err ? c.err_fd : -1, POLLIN, 0}, {s.poke_fd, POLLIN, 0},
                   {in_fd >= 0 && stdin_waits(s) ? in_fd : -1, POLLOUT, 0}};
    // Without a pidfd, the end of both pipes stands for the end of the process.
    if (pidfd < 0 && !open_out && !open_err) break;
    if (::poll(p, 6, next_wake(s, next_alive)) < 0 && errno != EINTR) break;
    if (p[0].revents) {
      if (pidfd >= 0) ::close(pidfd);
      ::close(c.out_fd), ::close(c.err_fd);
      if (in_fd >= 0) ::close(in_fd);
      return;
    }
    if (p[4].revents) {
      std::uint64_t n;
      (void)!::read(s.poke_fd, &n, sizeof n);
    }
    if (in_fd >= 0 && (p[4].revents || p[5].revents)) in_fd = feed_stdin(s, in_fd);
    if (p[2].revents) open_out = relay(c.out_fd, 1, out);
    if (p[3].revents) open_err = relay(c.err_fd, 2, out);
    if (p[1].revents) exited = true;
    const std::int64_t now = mono_ms();
    {
      std::lock_guard<std::mutex> lock(s.m);
      if (s.kill_at_ms >= 0 && now >= s.kill_at_ms && !exited) {
        ::kill(-c.pid, SIGKILL);
        s.kill_at_ms = -1;
      }
    }
    if (!exited && now >= next_alive) {
      alive();
      next_alive = now + ExecWatch::kAliveMs;
    }
  }
  {
    std::lock_guard<std::mutex> lock(s.m);  // the pid stays this process's while a stop() may kill it
    // Stopped: what the shell left in its group goes with it (its unreaped pid keeps the group's).
    if (s.kill_at_ms >= 0) ::kill(-c.pid, SIGKILL);
    while (::waitpid(c.pid, &status, 0) < 0 && errno == EINTR) {
    }
    s.reaped = true;
  }
  if (open_out) relay(c.out_fd, 1, out);
  if (open_err) relay(c.err_fd, 2, out);
  if (pidfd >= 0) ::close(pidfd);
  ::close(c.out_fd), ::close(c.err_fd);
  if (in_fd >= 0) {
    std::lock_guard<std::mutex> lock(s.m);
    s.in_open = false;
    ::close(in_fd);
  }
  ended(exit_code(status));
}

}  // namespace

void ExecWatch::watch(std::string key, ExecChild child, Output out, Ended ended, Alive alive) {
  sessions_.remove_if([](const std::unique_ptr<Session>& s) {
    if (!s->done.load()) return false;
    s->thread.join();
    ::close(s->poke_fd);
    return true;
  });
  auto s = std::make_unique<Session>();
  s->key = std::move(key);
  s->pid = child.pid;
  s->poke_fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  s->in_open = child.in_fd >= 0;
  Session* raw = s.get();
  s->thread = std::thread([child, raw, stop = stop_fd_, out = std::move(out), ended = std::move(ended),
                           alive = std::move(alive)] {
    run_session(child, *raw, stop, out, ended, alive);
    raw->done.store(true);
  });
  sessions_.push_back(std::move(s));
}

// The shell leads its own process group (setsid in the child): the group is what it started.
bool ExecWatch::stop(const std::string& key) {
  for (auto& s : sessions_) {
    if (s->key != key || s->done.load()) continue;
    std::lock_guard<std::mutex> lock(s->m);
    if (s->reaped) return false;
    ::kill(-s->pid, SIGTERM);
    if (s->kill_at_ms < 0) s->kill_at_ms = mono_ms() + kKillGraceMs;
    std::uint64_t one = 1;
    (void)!::write(s->poke_fd, &one, sizeof one);
    return true;
  }
  return false;
}

bool ExecWatch::input(const std::string& key, std::string data, bool eof) {
  for (auto& s : sessions_) {
    if (s->key != key || s->done.load()) continue;
    std::lock_guard<std::mutex> lock(s->m);
    if (!s->in_open) return false;
    s->in_buf += data;
    s->in_eof = s->in_eof || eof;
    std::uint64_t one = 1;
    (void)!::write(s->poke_fd, &one, sizeof one);
    return true;
  }
  return false;
}

}  // namespace corral::agent
