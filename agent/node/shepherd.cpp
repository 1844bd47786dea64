// corral-shepherd: the small process between the agent and one job (see launcher.hpp).
// The Launcher starts it with posix_spawn (vfork-like: the agent's memory is never copied,
// so no copy-on-write faults in the agent after each launch; fork() of the agent was the
// largest cost of a launch). It waits for the agent's go (after it has been put into the
// job's slot cgroups), forks the job (new session, the user's groups/gid/uid, cwd, stdout/err
// opened as the user, execve), waits for it, writes its status to the exit file and wakes the
// agent; then reaps what is left (it is the job's subreaper) until the agent has killed it all.
//
// Arguments: exit_file uid gid groups(comma list) drop(0/1) cwd stdout stderr out_flags binary argv...
// Environment: the job's. Fds: 0-2 /dev/null, 3 go (read), 4 error report (write), 5 wake (write).
// Only async-signal-safe calls after the fork, as in the in-process path of launcher.cpp.
#include "child_fail.hpp"

#include <fcntl.h>
#include <grp.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

constexpr int kGo = 3, kErr = 4, kWake = 5;

[[noreturn]] void fail(const char* stage) { corral::node::child_fail(kErr, stage); }

long num(const char* s) { return std::strtol(s, nullptr, 10); }

}  // namespace

int main(int argc, char** argv, char** envp) {
  if (argc < 12) {
    errno = EINVAL;
    fail("shepherd arguments");
  }
  const char* exit_file = argv[1];
  uid_t uid = static_cast<uid_t>(num(argv[2]));
  gid_t gid = static_cast<gid_t>(num(argv[3]));
  gid_t groups[1024];
  std::size_t ng = 0;
  for (const char* p = argv[4]; *p && ng < 1024;) {
    char* end = nullptr;
    groups[ng++] = static_cast<gid_t>(std::strtoul(p, &end, 10));
    p = (*end == ',') ? end + 1 : end;
    if (end == p && *p) break;
  }
  const bool drop = argv[5][0] == '1';
  const char* cwd = argv[6];
  const char* out_path = argv[7];
  const char* err_path = argv[8];
  const int out_flags = static_cast<int>(num(argv[9]));
  const char* binary = argv[10];
  char** job_argv = argv + 11;
  const bool same_out = std::strcmp(out_path, err_path) == 0;
  ::close_range(kWake + 1, ~0U, 0);
  ::fcntl(kErr, F_SETFD, FD_CLOEXEC);
  ::fcntl(kWake, F_SETFD, FD_CLOEXEC);

  char b;
  if (::read(kGo, &b, 1) != 1) ::_exit(126);  // the agent died before attaching us
  ::close(kGo);
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);  // orphans of the job are reaped here, not left as zombies
  pid_t jp = ::fork();
  if (jp < 0) fail("fork");
  if (jp == 0) {
    ::setsid();  // its own session and process group: every descendant can be found and signalled
    ::umask(022);
    if (drop) {
      if (::setgroups(ng, groups) != 0) fail("setgroups");
      if (::setgid(gid) != 0) fail("setgid");
      if (::setuid(uid) != 0) fail("setuid");
    }
    if (::chdir(cwd) != 0) fail("chdir");
    // Opened as the user: the files are theirs. O_NONBLOCK: a FIFO without a reader fails.
    int o = ::open(out_path, out_flags | O_NONBLOCK, 0644);
    if (o < 0) fail("open stdout");
    int e = same_out ? o : ::open(err_path, out_flags | O_NONBLOCK, 0644);
    if (e < 0) fail("open stderr");
    ::fcntl(o, F_SETFL, ::fcntl(o, F_GETFL) & ~O_NONBLOCK);
    ::fcntl(e, F_SETFL, ::fcntl(e, F_GETFL) & ~O_NONBLOCK);
    ::dup2(o, 1);
    ::dup2(e, 2);
    if (o > 2) ::close(o);
    if (e > 2 && e != o) ::close(e);
    ::execve(binary, job_argv, envp);
    fail("execve");
  }
  ::close(kErr);
  int st = 0, jst = 0;
  while (true) {
    pid_t r = ::waitpid(-1, &st, 0);
    if (r == jp) { jst = st; break; }
    if (r < 0 && errno != EINTR) break;
  }
  // exit_file.tmp then rename: the agent never reads half a status.
  char tmp[4096];
  std::size_t len = std::strlen(exit_file);
  if (len + 5 < sizeof tmp) {
    std::memcpy(tmp, exit_file, len);
    std::memcpy(tmp + len, ".tmp", 5);
    corral::node::write_exit_status(tmp, exit_file, jst);
  }
  [[maybe_unused]] auto w = ::write(kWake, "x", 1);
  while (true) {
    pid_t r = ::waitpid(-1, &st, 0);
    if (r < 0 && errno != EINTR) break;
  }
  return 0;
}
