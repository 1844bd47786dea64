#include "agent/exec_process.hpp"

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
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
                             char* const* envp, int out_w, int err_w, int fail_w) {
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
  int null = ::open("/dev/null", O_RDONLY);
  if (null < 0 || ::dup2(null, 0) < 0 || ::dup2(out_w, 1) < 0 || ::dup2(err_w, 2) < 0) child_fail(fail_w, 4);
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
  int out[2], err[2], fail[2];
  if (::pipe2(out, O_CLOEXEC) != 0) return std::string("pipe: ") + std::strerror(errno);
  if (::pipe2(err, O_CLOEXEC) != 0) {
    ::close(out[0]), ::close(out[1]);
    return std::string("pipe: ") + std::strerror(errno);
  }
  if (::pipe2(fail, O_CLOEXEC) != 0) {
    for (int fd : {out[0], out[1], err[0], err[1]}) ::close(fd);
    return std::string("pipe: ") + std::strerror(errno);
  }
  pid_t pid = ::fork();
  if (pid == 0) child_main(l, groups, argv.data(), envp.data(), out[1], err[1], fail[1]);
  int fork_errno = errno;
  for (int fd : {out[1], err[1], fail[1]}) ::close(fd);
  if (pid < 0) {
    for (int fd : {out[0], err[0], fail[0]}) ::close(fd);
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
    const int step = f.step >= 0 && f.step < 6 ? f.step : 5;
    return std::string("cannot ") + kSteps[step] + ": " + std::strerror(f.err);
  }
  child = ExecChild{pid, out[0], err[0]};
  return "";
}

ExecWatch::ExecWatch() : stop_fd_(::eventfd(0, EFD_CLOEXEC)) {
  if (stop_fd_ < 0) throw std::runtime_error(std::string("eventfd: ") + std::strerror(errno));
}

ExecWatch::~ExecWatch() {
  std::uint64_t one = 1;
  (void)!::write(stop_fd_, &one, sizeof one);  // never read: every thread sees it readable
  for (auto& s : sessions_) s->thread.join();
  ::close(stop_fd_);
}

namespace {

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

// The session: output until the process has ended and its pipes are drained (a process it left
// behind holding them open does not keep the caller waiting), then its status.
void run_session(ExecChild c, int stop_fd, const ExecWatch::Output& out, const ExecWatch::Ended& ended) {
  int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, c.pid, 0));
  for (int fd : {c.out_fd, c.err_fd}) ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  bool open_out = true, open_err = true, exited = false;
  int status = 0;
  while (!exited) {
    pollfd p[4] = {{stop_fd, POLLIN, 0}, {pidfd, POLLIN, 0}, {open_out ? c.out_fd : -1, POLLIN, 0},
                   {open_err ? c.err_fd : -1, POLLIN, 0}};
    // Without a pidfd, the end of both pipes stands for the end of the process.
    if (pidfd < 0 && !open_out && !open_err) break;
    if (::poll(p, 4, -1) < 0 && errno != EINTR) break;
    if (p[0].revents) {
      if (pidfd >= 0) ::close(pidfd);
      ::close(c.out_fd), ::close(c.err_fd);
      return;
    }
    if (p[2].revents) open_out = relay(c.out_fd, 1, out);
    if (p[3].revents) open_err = relay(c.err_fd, 2, out);
    if (p[1].revents) exited = true;
  }
  while (::waitpid(c.pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (open_out) relay(c.out_fd, 1, out);
  if (open_err) relay(c.err_fd, 2, out);
  if (pidfd >= 0) ::close(pidfd);
  ::close(c.out_fd), ::close(c.err_fd);
  ended(exit_code(status));
}

}  // namespace

void ExecWatch::watch(ExecChild child, Output out, Ended ended) {
  sessions_.remove_if([](const std::unique_ptr<Session>& s) {
    if (!s->done.load()) return false;
    s->thread.join();
    return true;
  });
  auto s = std::make_unique<Session>();
  Session* raw = s.get();
  s->thread = std::thread([child, stop = stop_fd_, out = std::move(out), ended = std::move(ended), raw] {
    run_session(child, stop, out, ended);
    raw->done.store(true);
  });
  sessions_.push_back(std::move(s));
}

}  // namespace corral::agent
