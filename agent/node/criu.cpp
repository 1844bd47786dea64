#include "criu.hpp"
#include "agent/node/mono_clock.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

extern char** environ;

namespace corral::node {
namespace {

std::string find_on_path(const std::string& name) {
  const char* p = std::getenv("PATH");
  std::string path = p && *p ? p : "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
  std::size_t pos = 0;
  while (pos <= path.size()) {
    std::size_t c = path.find(':', pos);
    std::string dir = path.substr(pos, c == std::string::npos ? std::string::npos : c - pos);
    if (!dir.empty()) {
      std::string f = dir + "/" + name;
      struct stat st{};
      if (::stat(f.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(f.c_str(), X_OK) == 0) return f;
    }
    if (c == std::string::npos) break;
    pos = c + 1;
  }
  return "";
}

// The line that says most: criu's last "Error" line (its verdict, e.g. "Could not initialize
// kernel features detection." here), else the last non-empty one.
std::string summary(const std::string& out) {
  std::string last, error;
  std::size_t pos = 0;
  while (pos < out.size()) {
    std::size_t e = out.find('\n', pos);
    std::string line = out.substr(pos, e == std::string::npos ? std::string::npos : e - pos);
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
    if (!line.empty()) {
      last = line;
      if (line.rfind("Error", 0) == 0) error = line;
    }
    if (e == std::string::npos) break;
    pos = e + 1;
  }
  std::string s = error.empty() ? last : error;
  if (s.size() > 300) s = s.substr(0, 300) + "...";
  return s;
}

}  // namespace

CriuProbe probe_criu(int timeout_ms) {
  CriuProbe r;
  r.path = find_on_path("criu");
  if (r.path.empty()) {
    r.why = "no criu binary on PATH";
    return r;
  }
  r.found = true;
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) {
    r.why = std::string("cannot run criu check: pipe: ") + std::strerror(errno);
    return r;
  }
  posix_spawn_file_actions_t fa;
  posix_spawnattr_t at;
  posix_spawn_file_actions_init(&fa);
  posix_spawnattr_init(&at);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  posix_spawn_file_actions_adddup2(&fa, out[1], 2);
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&at, &none);
  posix_spawnattr_setsigdefault(&at, &all);
  // Its own session: a timeout kills whatever it started too.
  posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  std::string a0 = r.path, a1 = "check";
  char* argv[] = {a0.data(), a1.data(), nullptr};
  pid_t pid = -1;
  int rc = ::posix_spawn(&pid, r.path.c_str(), &fa, &at, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&at);
  ::close(out[1]);
  if (rc != 0) {
    ::close(out[0]);
    r.why = "cannot run " + r.path + " check: " + std::strerror(rc);
    return r;
  }
  const std::int64_t deadline = mono_ms() + timeout_ms;
  std::string text;
  bool eof = false, done = false, timed_out = false;
  int status = 0;
  bool reaped = false;  // status is the check's own (a failed waitpid is no pass)
  int wait_err = 0;
  while (!done) {
    if (!eof) {
      pollfd p{out[0], POLLIN, 0};
      int left = static_cast<int>(std::max<std::int64_t>(0, deadline - mono_ms()));
      int n = ::poll(&p, 1, std::min(left, 50));
      if (n > 0) {
        char buf[1024];
        ssize_t k = ::read(out[0], buf, sizeof buf);
        if (k > 0 && text.size() < 16384) text.append(buf, static_cast<std::size_t>(k));
        if (k == 0 || (k < 0 && errno != EINTR && errno != EAGAIN)) eof = true;
      }
    } else {
      struct timespec nap{0, 10 * 1000 * 1000};
      ::nanosleep(&nap, nullptr);
    }
    pid_t w = ::waitpid(pid, &status, WNOHANG);
    if (w == pid) done = reaped = true;
    else if (w < 0 && errno != EINTR) {
      wait_err = errno;
      break;
    }
    if (!done && mono_ms() >= deadline) {
      timed_out = true;
      ::kill(-pid, SIGKILL);
      ::kill(pid, SIGKILL);
      while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
      done = true;
    }
  }
  ::close(out[0]);
  std::string said = summary(text);
  if (timed_out) {
    char secs[32];
    std::snprintf(secs, sizeof secs, "%.1f", timeout_ms / 1000.0);
    r.why = std::string("criu check did not finish within ") + secs + " s (killed)";
  } else if (!reaped) {
    r.why = std::string("criu check: cannot wait for it: ") + std::strerror(wait_err);
  } else if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
    r.available = true;
    r.why = "criu check passed" + (said.empty() ? "" : ": " + said);
  } else {
    r.why = "criu check failed (" +
            (WIFEXITED(status) ? "exit " + std::to_string(WEXITSTATUS(status))
                               : "signal " + std::to_string(WTERMSIG(status))) +
            ")" + (said.empty() ? "" : ": " + said);
  }
  return r;
}

}  // namespace corral::node
