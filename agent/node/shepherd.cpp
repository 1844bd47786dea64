// corral-shepherd --server: the one process the Launcher posix_spawns (once, not per job) and
// asks, over a socket, to start jobs. For each request it forks a shepherd: a fork of this small
// static process is cheap, where a posix_spawn + exec of a shepherd per job cost several ms of
// page faults on this machine (bench/launch/RESULTS.md), and the agent never waits for it.
//
// A shepherd joins its slot cgroups itself (writes "0" to each cgroup.procs), starts its own
// session, becomes the job's subreaper and forks the job (new session, the user's groups/gid/uid,
// cwd, stdout/err opened as the user, execve). It tells the agent on the wake pipe (WakeRecord):
// running (the exec worked: its pid), failed (stage:errno in <exit_file minus .exit>.fail), then
// ended (the job's wait status in exit_file; then it leaves the slot for the parent group, so the
// agent can remove the slot without waiting for it). Then it reaps whatever the job left until the
// agent has killed it all. The server itself ignores SIGCHLD (its shepherds are reaped by the kernel)
// and exits when the agent closes the socket; shepherds and jobs keep running (adoption).
//
// Fds of the server: 0-2 /dev/null, 3 request socket (read), 4 wake pipe (write).
// Request: u32 length, then strings (u32 length + bytes each):
//   id exit_file fail_file uid gid groups(comma list) drop(0/1) cwd stdout stderr out_flags binary
//   nprocs procs_file... nargv argv... nenv env...
#include "child_fail.hpp"

#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

constexpr int kReq = 3, kWake = 4;

bool read_full(int fd, void* buf, std::size_t n) {
  auto* p = static_cast<char*>(buf);
  while (n > 0) {
    ssize_t r = ::read(fd, p, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    n -= static_cast<std::size_t>(r);
  }
  return true;
}

struct Request {
  std::vector<std::string> s;  // every field, in order
  std::uint64_t id = 0;
  std::string exit_file, fail_file, cwd, out_path, err_path, binary;
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;
  bool drop = false;
  int out_flags = 0;
  std::vector<std::string> procs, argv, env;
};

bool parse(const std::string& payload, Request& r) {
  std::size_t off = 0;
  while (off < payload.size()) {
    if (payload.size() - off < 4) return false;
    std::uint32_t len;
    std::memcpy(&len, payload.data() + off, 4);
    off += 4;
    if (payload.size() - off < len) return false;
    r.s.emplace_back(payload.data() + off, len);
    off += len;
  }
  std::size_t i = 0;
  auto next = [&](std::string& out) {
    if (i >= r.s.size()) return false;
    out = r.s[i++];
    return true;
  };
  auto list = [&](std::vector<std::string>& out) {
    std::string n;
    if (!next(n)) return false;
    long k = std::strtol(n.c_str(), nullptr, 10);
    if (k < 0 || static_cast<std::size_t>(k) > r.s.size() - i) return false;
    for (long j = 0; j < k; ++j) out.push_back(r.s[i++]);
    return true;
  };
  std::string id, uid, gid, groups, drop, flags;
  if (!next(id) || !next(r.exit_file) || !next(r.fail_file) || !next(uid) || !next(gid) || !next(groups) ||
      !next(drop) || !next(r.cwd) || !next(r.out_path) || !next(r.err_path) || !next(flags) || !next(r.binary) ||
      !list(r.procs) || !list(r.argv) || !list(r.env))
    return false;
  r.id = std::strtoull(id.c_str(), nullptr, 10);
  r.uid = static_cast<uid_t>(std::strtoul(uid.c_str(), nullptr, 10));
  r.gid = static_cast<gid_t>(std::strtoul(gid.c_str(), nullptr, 10));
  for (const char* p = groups.c_str(); *p;) {
    char* end = nullptr;
    r.groups.push_back(static_cast<gid_t>(std::strtoul(p, &end, 10)));
    if (end == p) break;
    p = (*end == ',') ? end + 1 : end;
  }
  r.drop = drop == "1";
  r.out_flags = static_cast<int>(std::strtol(flags.c_str(), nullptr, 10));
  return r.id != 0 && !r.argv.empty();
}

// The failure of a launch: the reason into the .fail file, then the agent is told.
[[noreturn]] void launch_failed(const Request& r, const char* stage, int err) {
  std::string tmp = r.fail_file + ".tmp";
  corral::node::write_fail(tmp.c_str(), r.fail_file.c_str(), stage, err);
  corral::node::send_wake(kWake, r.id, static_cast<std::int32_t>(::getpid()), corral::node::kWakeFailed);
  ::_exit(0);
}

// The job's side of the vfork: syscalls only (it shares the shepherd's memory until execve).
[[noreturn]] __attribute__((noinline)) void exec_job(const Request& r, int err_fd, char* const* argv,
                                                     char* const* envp) {
  using corral::node::child_fail;
  ::setsid();  // its own session and process group: every descendant can be found and signalled
  ::umask(022);
  if (r.drop) {
    if (::setgroups(r.groups.size(), r.groups.data()) != 0) child_fail(err_fd, "setgroups");
    if (::setgid(r.gid) != 0) child_fail(err_fd, "setgid");
    if (::setuid(r.uid) != 0) child_fail(err_fd, "setuid");
  }
  if (::chdir(r.cwd.c_str()) != 0) child_fail(err_fd, "chdir");
  // Opened as the user: the files are theirs. O_NONBLOCK: a FIFO without a reader fails.
  int o = ::open(r.out_path.c_str(), r.out_flags | O_NONBLOCK | O_CLOEXEC, 0644);
  if (o < 0) child_fail(err_fd, "open stdout");
  int e = r.out_path == r.err_path ? o : ::open(r.err_path.c_str(), r.out_flags | O_NONBLOCK | O_CLOEXEC, 0644);
  if (e < 0) child_fail(err_fd, "open stderr");
  ::fcntl(o, F_SETFL, ::fcntl(o, F_GETFL) & ~O_NONBLOCK);
  ::fcntl(e, F_SETFL, ::fcntl(e, F_GETFL) & ~O_NONBLOCK);
  ::dup2(o, 1);  // dup2 clears close-on-exec on 1 and 2
  ::dup2(e, 2);
  ::execve(r.binary.c_str(), argv, envp);
  child_fail(err_fd, "execve");
}

// One shepherd (a forked child of the server; single-threaded, so it may allocate).
[[noreturn]] void shepherd(const Request& r) {
  ::signal(SIGCHLD, SIG_DFL);  // the server ignores it; we wait for our job
  ::close(kReq);
  for (const auto& p : r.procs) {
    int f = ::open(p.c_str(), O_WRONLY | O_CLOEXEC);
    if (f < 0 || ::write(f, "0", 1) != 1) launch_failed(r, "cgroup attach", errno);
    ::close(f);
  }
  ::setsid();  // off the agent's session; the job gets its own below
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);  // orphans of the job are reaped here, not left as zombies
  std::vector<char*> argv, envp;
  for (const auto& a : r.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (const auto& e : r.env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  int errp[2];
  if (::pipe2(errp, O_CLOEXEC) != 0) launch_failed(r, "pipe", errno);
  // vfork: the job borrows this process's memory until its execve (no page tables copied, no
  // copy-on-write faults; each cost TLB-flush IPIs on this machine). exec_job makes syscalls only.
  pid_t jp = ::vfork();
  if (jp == 0) exec_job(r, errp[1], argv.data(), envp.data());
  if (jp < 0) launch_failed(r, "fork", errno);
  ::close(errp[1]);
  // EOF: the exec worked (the pipe is close-on-exec); else "<stage>:<errno>" from the child.
  std::string err;
  char buf[256];
  ssize_t n;
  while ((n = ::read(errp[0], buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR))
    if (n > 0) err.append(buf, static_cast<std::size_t>(n));
  ::close(errp[0]);
  int st = 0, jst = 0;
  auto wait_job = [&] {
    while (true) {
      pid_t w = ::waitpid(-1, &st, 0);
      if (w == jp) { jst = st; break; }
      if (w < 0 && errno != EINTR) break;
    }
  };
  if (!err.empty()) {
    wait_job();
    auto colon = err.rfind(':');
    std::string stage = err.substr(0, colon);
    int e = colon == std::string::npos ? 0 : std::atoi(err.c_str() + colon + 1);
    launch_failed(r, stage.c_str(), e);
  }
  const std::int32_t me = static_cast<std::int32_t>(::getpid());
  corral::node::send_wake(kWake, r.id, me, corral::node::kWakeRunning);
  ::signal(SIGPIPE, SIG_IGN);  // an agent gone: the status is in the exit file anyway
  wait_job();
  std::string tmp = r.exit_file + ".tmp";
  corral::node::write_exit_status(tmp.c_str(), r.exit_file.c_str(), jst);
  // Out of the slot (into its parent group) once the status is written, before telling the agent:
  // the agent kills what the job left, removes the slot at once and never waits for us to exit.
  for (const auto& p : r.procs) {
    auto slot_dir = p.rfind('/');
    auto parent_dir = slot_dir == std::string::npos ? std::string::npos : p.rfind('/', slot_dir - 1);
    if (parent_dir == std::string::npos) continue;
    int f = ::open((p.substr(0, parent_dir) + "/cgroup.procs").c_str(), O_WRONLY | O_CLOEXEC);
    if (f >= 0) {
      [[maybe_unused]] auto w = ::write(f, "0", 1);
      ::close(f);
    }
  }
  corral::node::send_wake(kWake, r.id, me, corral::node::kWakeEnded);
  while (true) {
    pid_t w = ::waitpid(-1, &st, 0);
    if (w < 0 && errno != EINTR) break;
  }
  ::_exit(0);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::strcmp(argv[1], "--server") != 0) {
    std::fprintf(stderr,
                 "corral-shepherd: started by corrald's launcher only (corral-shepherd --server, fd 3 requests, "
                 "fd 4 wake pipe)\n");
    return 2;
  }
  ::signal(SIGCHLD, SIG_IGN);  // shepherds are reaped by the kernel
  ::close_range(kWake + 1, ~0U, 0);
  ::fcntl(kReq, F_SETFD, FD_CLOEXEC);
  ::fcntl(kWake, F_SETFD, FD_CLOEXEC);
  while (true) {
    std::uint32_t len = 0;
    if (!read_full(kReq, &len, sizeof len)) return 0;  // the agent closed the socket
    if (len > (64u << 20)) return 3;                    // not our protocol
    std::string payload(len, '\0');
    if (!read_full(kReq, payload.data(), len)) return 0;
    Request r;
    if (!parse(payload, r)) {
      if (r.id != 0 && !r.fail_file.empty()) {
        std::string tmp = r.fail_file + ".tmp";
        corral::node::write_fail(tmp.c_str(), r.fail_file.c_str(), "shepherd request", EINVAL);
        corral::node::send_wake(kWake, r.id, -1, corral::node::kWakeFailed);
      }
      continue;
    }
    pid_t p = ::fork();
    if (p == 0) shepherd(r);
    if (p < 0) {
      std::string tmp = r.fail_file + ".tmp";
      corral::node::write_fail(tmp.c_str(), r.fail_file.c_str(), "fork", errno);
      corral::node::send_wake(kWake, r.id, -1, corral::node::kWakeFailed);
    }
  }
}
