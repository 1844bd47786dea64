// corral-shepherd --server: the one process the Launcher posix_spawns (once, not per job) and
// asks, over a socket, to start jobs. It is the shepherd of every job it starts: it vforks the
// job (no fork of anything per job: a fork, even of this small static process, cost ~1 ms of page
// table copies and faults on this machine, bench/launch/RESULTS.md) and is its reaper. The vfork
// runs on launch threads (one per CPU, pinned there, each job on its slot's CPU), so a slow cgroup
// join before one job's execve holds up neither the main thread's reaping nor the other slots'
// starts (RESULTS.md, rounds 3 and 4).
//
// The job's side of the vfork starts its own session, joins its slot cgroups (writes "0" to each
// join file: v1 tasks, v2 cgroup.procs), takes the user's groups/gid/uid, cwd, stdout/err opened as
// the user, and execs.
// The server tells the agent on the wake pipe (WakeRecord): running (the exec worked: the job's
// pid), failed (stage:errno in the request's fail_file), then ended (the job's wait status was
// written to exit_file while the job was still a zombie, then it was reaped). It is the
// subreaper of every job, so whatever a job leaves behind is reaped here once the agent has
// killed it. When the agent closes the socket (exit, restart) the server keeps running until its
// last job is reaped, so exit codes survive an agent restart; the new agent adopts the jobs.
//
// Fds of the server: 0-2 /dev/null, 3 request socket (read), 4 wake pipe (write).
// Request: u32 length, then strings (u32 length + bytes each):
//   id exit_file fail_file uid gid groups(comma list) drop(0/1) cwd stdout stderr out_flags binary
//   nprocs procs_file... nargv argv... nenv env... [ncpus cpu...]  (the job's CPUs: optional)
#include "child_fail.hpp"

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
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
  mode_t umask = 022;
  std::vector<std::string> procs, argv, env;
  std::vector<int> cpus;  // the job's CPUs (its slot's cpuset), a hint for where to vfork it
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
  std::vector<std::string> cpus;  // optional (the launcher sends it)
  if (i < r.s.size() && !list(cpus)) return false;
  std::string mask;  // optional (the launcher sends it): the job's umask
  if (next(mask)) r.umask = static_cast<mode_t>(std::strtoul(mask.c_str(), nullptr, 10) & 0777);
  for (const auto& c : cpus) r.cpus.push_back(static_cast<int>(std::strtol(c.c_str(), nullptr, 10)));
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

// What the job's side of the vfork reports before it exits (it shares our memory until execve,
// so it writes into its launch thread's stack frame; no pipe is needed). One per launch: several
// launch threads vfork at the same time.
struct Fail {
  volatile int err = 0;
  const char* volatile stage = nullptr;
};

[[noreturn]] void job_fail(Fail* f, const char* stage) {
  f->err = errno;
  f->stage = stage;
  ::_exit(127);
}

void report_fail(const Request& r, const char* stage, int err, std::int32_t pid) {
  std::string tmp = r.fail_file + ".tmp";
  corral::node::write_fail(tmp.c_str(), r.fail_file.c_str(), stage, err);
  corral::node::send_wake(kWake, r.id, pid, corral::node::kWakeFailed);
}

// The CPUs the server may use (at its start), and whether launch threads are pinned to some.
cpu_set_t g_all_cpus;
bool g_pinned = false;

// The job's side of the vfork: syscalls only (it shares the server's memory until execve).
[[noreturn]] __attribute__((noinline)) void exec_job(const Request& r, const char* const* procs, std::size_t nprocs,
                                                     char* const* argv, char* const* envp, Fail* fail) {
  // The server blocks SIGCHLD (signalfd) and ignores SIGPIPE: the job starts with neither.
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  ::sigaction(SIGPIPE, &dfl, nullptr);
  ::sigaction(SIGCHLD, &dfl, nullptr);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  ::setsid();  // its own session and process group: every descendant can be found and signalled
  // Into its slot cgroups before anything else runs (as root, before the uid drop).
  for (std::size_t i = 0; i < nprocs; ++i) {
    int f = ::open(procs[i], O_WRONLY | O_CLOEXEC);
    if (f < 0 || ::write(f, "0", 1) != 1) job_fail(fail, "cgroup attach");
    ::close(f);
  }
  // It inherited its launch thread's CPU pinning: back to the server's own set (the kernel
  // keeps it within the slot's cpuset, which the join above already applied).
  if (g_pinned) ::sched_setaffinity(0, sizeof g_all_cpus, &g_all_cpus);
  ::umask(r.umask);
  if (r.drop) {
    // Raw syscalls: credentials are per thread in the kernel and this process has one thread;
    // glibc's wrappers would, in a multi-threaded process (the server is one), try to signal
    // the server's other threads (its setxid broadcast) from here.
    if (::syscall(SYS_setgroups, r.groups.size(), r.groups.data()) != 0) job_fail(fail, "setgroups");
    if (::syscall(SYS_setgid, r.gid) != 0) job_fail(fail, "setgid");
    if (::syscall(SYS_setuid, r.uid) != 0) job_fail(fail, "setuid");
  }
  if (::chdir(r.cwd.c_str()) != 0) job_fail(fail, "chdir");
  // Opened as the user: the files are theirs. O_NONBLOCK: a FIFO without a reader fails.
  int o = ::open(r.out_path.c_str(), r.out_flags | O_NONBLOCK | O_CLOEXEC, 0644);
  if (o < 0) job_fail(fail, "open stdout");
  int e = r.out_path == r.err_path ? o : ::open(r.err_path.c_str(), r.out_flags | O_NONBLOCK | O_CLOEXEC, 0644);
  if (e < 0) job_fail(fail, "open stderr");
  ::fcntl(o, F_SETFL, ::fcntl(o, F_GETFL) & ~O_NONBLOCK);
  ::fcntl(e, F_SETFL, ::fcntl(e, F_GETFL) & ~O_NONBLOCK);
  ::dup2(o, 1);  // dup2 clears close-on-exec on 1 and 2
  ::dup2(e, 2);
  ::execve(r.binary.c_str(), argv, envp);
  job_fail(fail, "execve");
}

// A job this server started and will reap: its exit status goes to exit_file.
struct Kid {
  pid_t pid;
  std::uint64_t id;
  std::string exit_file;
};
std::vector<Kid> g_kids;

// The vfork happens on launch threads (vfork suspends only the calling thread): the job's setup
// before its execve (cgroup joins: the cpuset one waits for an RCU grace period now and then,
// up to ~4.6 ms measured, bench/launch/RESULTS.md round 3) no longer keeps the main thread from
// reaping the other jobs, and with several launch threads one job's slow setup does not hold
// up another slot's start (round 4). g_mu guards g_kids, g_queue, g_inflight.
std::mutex g_mu;
// One queue per launch thread. Launch thread i is pinned to CPU i of the server's set (with more
// CPUs than threads, to every nthreads-th one) and gets the jobs whose first CPU that is: the
// job is vforked where its slot's cpuset puts it, so its cpuset join does not have to migrate it
// (a wait for the migration thread and the target CPU: ~half of all launches blocked there
// measured with 2 slots, bench/launch/RESULTS.md round 4).
struct LaunchQueue {
  std::condition_variable cv;
  std::deque<Request> q;
};
std::vector<LaunchQueue> g_queues;
std::vector<int> g_cpu_thread;  // CPU number -> its launch thread (-1: none)
int g_inflight = 0;   // requests a launch thread holds (their children may not be in g_kids yet)
int g_launched = -1;  // eventfd: a launch thread finished one (the main thread reaps again)

// Starts one job: vfork (the job borrows this process's memory until its execve: no page tables
// copied, no copy-on-write faults, no fork of a shepherd per job), then tells the agent.
void start(const Request& r) {
  std::vector<const char*> procs;
  for (const auto& p : r.procs) procs.push_back(p.c_str());
  std::vector<char*> argv, envp;
  for (const auto& a : r.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (const auto& e : r.env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  Fail fail;
  pid_t jp = ::vfork();
  if (jp == 0) exec_job(r, procs.data(), procs.size(), argv.data(), envp.data(), &fail);
  if (jp < 0) {
    report_fail(r, "fork", errno, -1);
    return;
  }
  // vfork returns once the child has exec'd or exited: a stage set means it failed.
  if (const char* stage = fail.stage) {
    int e = fail.err;
    while (::waitpid(jp, nullptr, 0) < 0 && errno == EINTR) {}
    report_fail(r, stage, e, -1);
    return;
  }
  // Registered and reported under the lock: the main thread cannot reap it (and report it ended)
  // before the agent has its "running" record.
  std::lock_guard<std::mutex> g(g_mu);
  g_kids.push_back(Kid{jp, r.id, r.exit_file});
  corral::node::send_wake(kWake, r.id, static_cast<std::int32_t>(jp), corral::node::kWakeRunning);
}

// A launch thread: takes its queue's requests in the order they came, one at a time.
void launch_loop(LaunchQueue* lq) {
  while (true) {
    Request r;
    {
      std::unique_lock<std::mutex> g(g_mu);
      lq->cv.wait(g, [lq] { return !lq->q.empty(); });
      r = std::move(lq->q.front());
      lq->q.pop_front();
      ++g_inflight;
    }
    start(r);
    {
      std::lock_guard<std::mutex> g(g_mu);
      --g_inflight;
    }
    std::uint64_t one = 1;
    (void)!::write(g_launched, &one, sizeof one);
  }
}

// Writes a job's exit status from its (zombie's) siginfo, reaps it, reports it ended. g_mu held.
void finish_kid(std::vector<Kid>::iterator it, const siginfo_t& si) {
  // The wait status as waitpid() would give it.
  int st = si.si_code == CLD_EXITED ? (si.si_status & 0xff) << 8
                                    : (si.si_status & 0x7f) | (si.si_code == CLD_DUMPED ? 0x80 : 0);
  std::string tmp = it->exit_file + ".tmp";
  corral::node::write_exit_status(tmp.c_str(), it->exit_file.c_str(), st);
  while (::waitpid(it->pid, nullptr, 0) < 0 && errno == EINTR) {}
  corral::node::send_wake(kWake, it->id, static_cast<std::int32_t>(it->pid), corral::node::wake_ended_with(st));
  g_kids.erase(it);
}

// Reaps every exited child. A job's status is written (exit file) while it is still a zombie
// (waitid WNOWAIT), and only then reaped: once its pid is gone, the status is on disk, which is
// what an agent that adopted the job after a restart relies on. Returns false once no child
// is left at all (ECHILD).
bool reap() {
  std::lock_guard<std::mutex> g(g_mu);
  while (true) {
    siginfo_t si{};
    if (::waitid(P_ALL, 0, &si, WEXITED | WNOHANG | WNOWAIT) != 0) {
      if (errno == EINTR) continue;
      return errno != ECHILD;
    }
    if (si.si_pid == 0) return true;  // children, none exited
    pid_t pid = si.si_pid;
    auto it = std::find_if(g_kids.begin(), g_kids.end(), [pid](const Kid& k) { return k.pid == pid; });
    // Not ours yet, while a launch is in flight: it may be that job (exited before it was
    // registered, or failed: start() waits for that one itself). Left for a later reap, which
    // the launch thread's eventfd triggers. The known jobs behind it are looked at one by one
    // (with launches in flight back to back, it could otherwise hold up every end).
    if (it == g_kids.end() && g_inflight > 0) {
      for (std::size_t i = 0; i < g_kids.size();) {
        siginfo_t ki{};
        if (::waitid(P_PID, static_cast<id_t>(g_kids[i].pid), &ki, WEXITED | WNOHANG | WNOWAIT) == 0 &&
            ki.si_pid == g_kids[i].pid)
          finish_kid(g_kids.begin() + static_cast<std::ptrdiff_t>(i), ki);
        else
          ++i;
      }
      return true;
    }
    if (it != g_kids.end()) {
      finish_kid(it, si);
      continue;
    }
    while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {}
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::strcmp(argv[1], "--server") != 0) {
    std::fprintf(stderr,
                 "corral-shepherd: started by corrald's launcher only (corral-shepherd --server, fd 3 requests, "
                 "fd 4 wake pipe)\n");
    return 2;
  }
  ::close_range(kWake + 1, ~0U, 0);
  ::fcntl(kReq, F_SETFD, FD_CLOEXEC);
  ::fcntl(kWake, F_SETFD, FD_CLOEXEC);
  ::signal(SIGPIPE, SIG_IGN);  // an agent gone: the statuses still go to the exit files
  // Orphans of every job are reparented here and reaped, not left to init as zombies.
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);
  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  ::sigprocmask(SIG_BLOCK, &chld, nullptr);
  int sfd = ::signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
  if (sfd < 0) return 4;
  g_launched = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (g_launched < 0) return 4;
  // One launch thread per CPU the server may use, 2 to 32 (a job's setup sleeps in the kernel at
  // times; one thread per CPU keeps every slot's start independent of the others'). SIGCHLD
  // stays blocked in them too (inherited mask).
  CPU_ZERO(&g_all_cpus);
  if (::sched_getaffinity(0, sizeof g_all_cpus, &g_all_cpus) != 0) CPU_SET(0, &g_all_cpus);
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &g_all_cpus)) cpus.push_back(c);
  std::size_t nthreads = std::clamp<std::size_t>(cpus.size(), 2, 32);
  g_queues = std::vector<LaunchQueue>(nthreads);
  g_cpu_thread.assign(CPU_SETSIZE, -1);
  for (std::size_t k = 0; k < cpus.size(); ++k) g_cpu_thread[static_cast<std::size_t>(cpus[k])] = static_cast<int>(k % nthreads);
  g_pinned = cpus.size() > 1;
  for (std::size_t i = 0; i < nthreads; ++i) {
    std::thread t(launch_loop, &g_queues[i]);
    if (g_pinned) {
      cpu_set_t mine;
      CPU_ZERO(&mine);
      for (std::size_t k = i; k < cpus.size(); k += nthreads) CPU_SET(cpus[k], &mine);
      if (CPU_COUNT(&mine) > 0) ::pthread_setaffinity_np(t.native_handle(), sizeof mine, &mine);
    }
    t.detach();
  }
  bool agent = true;  // the request socket is open
  while (true) {
    // Without the agent, the server stays until its last job (and what it left) is reaped, and
    // until every request it read has been started.
    if (!agent) {
      bool idle;
      {
        std::lock_guard<std::mutex> g(g_mu);
        idle = g_inflight == 0 &&
               std::all_of(g_queues.begin(), g_queues.end(), [](const LaunchQueue& l) { return l.q.empty(); });
      }
      // _exit: a plain return would run the static destructors, and glibc's condition variable
      // destructor waits for the launch thread, which waits on it forever.
      if (idle && !reap()) ::_exit(0);
    }
    struct pollfd p[3] = {{sfd, POLLIN, 0}, {agent ? kReq : -1, POLLIN, 0}, {g_launched, POLLIN, 0}};
    if (::poll(p, 3, -1) < 0) continue;
    if (p[2].revents & POLLIN) {
      std::uint64_t n;
      (void)!::read(g_launched, &n, sizeof n);
    }
    if (p[0].revents & POLLIN) {
      struct signalfd_siginfo ss[16];
      while (::read(sfd, ss, sizeof ss) > 0) {}
    }
    if (p[0].revents & POLLIN || p[2].revents & POLLIN) reap();
    if (!(p[1].revents & (POLLIN | POLLHUP | POLLERR))) continue;
    std::uint32_t len = 0;
    if (!read_full(kReq, &len, sizeof len) || len > (64u << 20)) {  // closed, or not our protocol
      ::close(kReq);
      agent = false;
      continue;
    }
    std::string payload(len, '\0');
    if (!read_full(kReq, payload.data(), len)) {
      ::close(kReq);
      agent = false;
      continue;
    }
    Request r;
    if (!parse(payload, r)) {
      if (r.id != 0 && !r.fail_file.empty()) report_fail(r, "shepherd request", EINVAL, -1);
      continue;
    }
    LaunchQueue* lq;
    {
      std::lock_guard<std::mutex> g(g_mu);
      // The thread of the job's first CPU; without a hint (or an unknown CPU), by job id.
      int c = r.cpus.empty() ? -1 : r.cpus.front();
      int k = c >= 0 && c < CPU_SETSIZE ? g_cpu_thread[static_cast<std::size_t>(c)] : -1;
      lq = &g_queues[k >= 0 ? static_cast<std::size_t>(k) : r.id % g_queues.size()];
      lq->q.push_back(std::move(r));
    }
    lq->cv.notify_one();
  }
}
