#include "launcher.hpp"
#include "child_fail.hpp"
#include "owner.hpp"

#include <fcntl.h>
#include <ftw.h>
#include <poll.h>
#include <sys/syscall.h>
#include <grp.h>
#include <pwd.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <set>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

namespace corral::node {
namespace fs = std::filesystem;

const char* to_string(EndReason r) {
  switch (r) {
    case EndReason::Completed: return "completed";
    case EndReason::Failed: return "failed";
    case EndReason::Walltime: return "walltime";
    case EndReason::Memory: return "memory";
    case EndReason::Jobfs: return "jobfs";
    case EndReason::Cancelled: return "cancelled";
    case EndReason::Preempted: return "preempted";
    case EndReason::Checkpointed: return "checkpointed";
    case EndReason::LaunchFailed: return "launch-failed";
  }
  return "unknown";
}

namespace {

// ---- small helpers ---------------------------------------------------------------------------

std::string errstr(int e) { return std::strerror(e); }

struct Fd {
  int fd = -1;
  Fd() = default;
  explicit Fd(int f) : fd(f) {}
  ~Fd() { reset(); }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  void reset(int f = -1) {
    if (fd >= 0) ::close(fd);
    fd = f;
  }
};

// du-like accounting of a jobfs directory: allocated blocks, not apparent sizes, no symlinks followed.
thread_local std::int64_t g_du_bytes = 0;
int du_visit(const char*, const struct stat* st, int, struct FTW*) {
  g_du_bytes += static_cast<std::int64_t>(st->st_blocks) * 512;
  return 0;
}
std::int64_t du_mb(const std::string& dir) {
  g_du_bytes = 0;
  if (dir.empty() || ::nftw(dir.c_str(), du_visit, 32, FTW_PHYS | FTW_MOUNT) != 0) return 0;
  return g_du_bytes >> 20;
}

// Record files: "key=value" lines, values with '%' and newlines escaped.
std::string esc(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '%') o += "%25";
    else if (c == '\n') o += "%0A";
    else o += c;
  }
  return o;
}
std::string unesc(const std::string& s) {
  std::string o;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && s.compare(i, 3, "%25") == 0) { o += '%'; i += 2; }
    else if (s[i] == '%' && s.compare(i, 3, "%0A") == 0) { o += '\n'; i += 2; }
    else o += s[i];
  }
  return o;
}

struct UserInfo {
  uid_t uid = 0;
  gid_t gid = 0;
  std::string name, home, shell;
  std::vector<gid_t> groups;
};

std::string lookup_user(const LaunchSpec& spec, UserInfo& u) {
  std::vector<char> buf(16384);
  struct passwd pw {};
  struct passwd* res = nullptr;
  int rc = spec.user.empty() ? getpwuid_r(spec.uid, &pw, buf.data(), buf.size(), &res)
                             : getpwnam_r(spec.user.c_str(), &pw, buf.data(), buf.size(), &res);
  if (rc != 0 || !res)
    return "unknown user " + (spec.user.empty() ? "uid " + std::to_string(spec.uid) : "'" + spec.user + "'") +
           (rc ? ": " + errstr(rc) : "");
  u.uid = pw.pw_uid;
  u.gid = spec.user.empty() ? spec.gid : pw.pw_gid;
  u.name = pw.pw_name;
  u.home = pw.pw_dir ? pw.pw_dir : "/";
  u.shell = pw.pw_shell ? pw.pw_shell : "/bin/sh";
  int n = 64;
  std::vector<gid_t> groups(static_cast<std::size_t>(n));
  while (getgrouplist(u.name.c_str(), u.gid, groups.data(), &n) < 0) groups.resize(static_cast<std::size_t>(n));
  groups.resize(static_cast<std::size_t>(n));
  u.groups = groups;
  return {};
}

bool executable_file(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & 0111);
}

// argv[0] resolved in the parent (PATH search is not async-signal-safe in the child).
std::string resolve_binary(const std::string& arg0, const std::string& path_env, const std::string& cwd,
                           std::string& err) {
  if (arg0.find('/') != std::string::npos) {
    std::string p = arg0[0] == '/' ? arg0 : cwd + "/" + arg0;
    if (!executable_file(p)) {
      err = "command not found or not executable: " + arg0;
      return {};
    }
    return p;
  }
  std::stringstream ss(path_env);
  std::string d;
  while (std::getline(ss, d, ':')) {
    if (d.empty()) d = ".";
    std::string p = (d[0] == '/' ? d : cwd + "/" + d) + "/" + arg0;
    if (executable_file(p)) return p;
  }
  err = "command not found: " + arg0 + " (PATH=" + path_env + ")";
  return {};
}

// A job's checkpoint/jobfs dir is usually empty when it goes: one rmdir, a walk only if not.
void remove_tree(const std::string& dir) {
  if (dir.empty() || ::rmdir(dir.c_str()) == 0 || errno == ENOENT) return;
  std::error_code ec;
  fs::remove_all(dir, ec);
}

void close_fds_except(int a, int b, int c) {  // async-signal-safe: no allocation
  int keep[3] = {a, b, c};
  std::sort(keep, keep + 3);
  unsigned lo = 3;
  for (int k : keep) {
    if (k < 3) continue;
    if (static_cast<unsigned>(k) > lo) ::close_range(lo, static_cast<unsigned>(k) - 1, 0);
    lo = static_cast<unsigned>(k) + 1;
  }
  ::close_range(lo, ~0U, 0);
}

void reset_signals() {  // async-signal-safe: the agent may block or ignore signals (signalfd, SIGPIPE)
  struct sigaction sa {};
  sa.sa_handler = SIG_DFL;
  for (int s = 1; s < NSIG; ++s) ::sigaction(s, &sa, nullptr);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
}

std::string describe_status(int st) {
  if (WIFEXITED(st)) return "exit " + std::to_string(WEXITSTATUS(st));
  if (WIFSIGNALED(st)) return std::string("killed by signal ") + std::to_string(WTERMSIG(st)) + " (" +
                              (strsignal(WTERMSIG(st)) ? strsignal(WTERMSIG(st)) : "?") + ")";
  return "status " + std::to_string(st);
}
int exit_code_of(int st) {
  if (WIFEXITED(st)) return WEXITSTATUS(st);
  if (WIFSIGNALED(st)) return 128 + WTERMSIG(st);
  return -1;
}

// "cannot start job N: <stage> <what>: <reason> (as user U)" from a child's "<stage>:<errno>".
std::string launch_fail_message(std::uint64_t id, const std::string& report, const std::string& binary,
                                const std::string& cwd, const std::string& out_path, const std::string& err_path,
                                const std::string& user) {
  auto colon = report.rfind(':');
  int e = colon == std::string::npos ? 0 : std::atoi(report.c_str() + colon + 1);
  std::string stage = report.substr(0, colon);
  std::string why = "cannot start job " + std::to_string(id) + ": " + stage;
  if (stage == "execve") why += " " + binary;
  else if (stage == "chdir") why += " " + cwd;
  else if (stage == "open stdout") why += " " + out_path;
  else if (stage == "open stderr") why += " " + err_path;
  return why + ": " + errstr(e) + " (as user " + user + ")";
}

}  // namespace

// ---- state ------------------------------------------------------------------------------------

struct Launcher::Impl {
  struct Job {
    LaunchSpec spec;
    pid_t shepherd = -1;
    bool our_child = true;       // false when adopted from another agent process
    bool reaped = false;
    int shepherd_status = 0;
    bool suspended = false;
    std::int64_t acc_ms = 0;          // walltime used before run_started_ms
    std::int64_t run_started_ms = 0;  // when it last started running (valid if !suspended)
    std::optional<EndReason> kill_reason;
    std::string kill_message;
    std::int64_t ckpt_deadline_ms = -1;  // >= 0 while a checkpoint is in progress
    std::string jobfs_dir, ckpt_dir;
    bool own_ckpt_dir = false;           // under ckpt_root: removed when the job ends for good
    std::int64_t jobfs_checked_ms = -1, jobfs_mb_now = 0;
    // Started through the shepherd server: its pid is known once it reports (running/failed).
    bool pid_known = true;
    bool launch_failed = false;
    int pidfd = -1;  // the served job's main process: readable once it has exited (no cgroup reads per poll)
    // Started by the shepherd server, which is the job's parent and reaper: `shepherd` is then the
    // job's own pid (not a separate shepherd process in the slot).
    bool served = false;
    bool end_seen = false;  // the server's "ended" record came (the exit file is written)
    std::optional<int> end_status;  // the wait status that record carried (no exit-file read)
    bool rec_written = false;       // its record exists (later writes go through a temp file)
    std::int64_t requested_ms = 0;
    std::string binary, cwd, out_path, err_path;  // for a launch failure's message
  };

  Topology topo;
  LauncherConfig cfg;
  std::unique_ptr<CgroupBackend> cg;
  std::map<std::uint64_t, Job> jobs;
  int wake_r = -1, wake_w = -1;
  std::vector<int> real_cpus;
  std::string shepherd;  // shepherd server binary, "" = fork in-process
  int srv_fd = -1;       // request socket to the shepherd server
  pid_t srv_pid = -1;
  std::vector<pid_t> old_servers;  // servers let go while they still had jobs: reaped once they exit
  bool nudge_owed = false;  // a wake-up was consumed outside poll(): put one back
  std::map<std::string, std::pair<std::int64_t, UserInfo>> users;  // lookups, with their time
  NewFileOwner ckpt_owner;  // no chown of a checkpoint dir already the job user's
  // Ended jobs whose cleanup() waits for tidy() (LauncherConfig::defer_cleanup).
  struct Untidy {
    std::uint64_t id;
    bool terminal;
    Job job;
  };
  std::vector<Untidy> untidy;

  // Runs the deferred cleanups (all, or only job `only`); returns the failures.
  std::vector<std::string> tidy(std::uint64_t only = 0) {
    std::vector<std::string> errs;
    for (auto it = untidy.begin(); it != untidy.end();) {
      if (only != 0 && it->id != only) {
        ++it;
        continue;
      }
      std::string err = cleanup(it->id, it->job, it->terminal);
      if (!err.empty()) errs.push_back("job " + std::to_string(it->id) + ": cleanup: " + err);
      it = untidy.erase(it);
    }
    return errs;
  }

  std::string record_path(std::uint64_t id) const { return cfg.state_dir + "/job." + std::to_string(id) + ".rec"; }
  std::string exit_path(std::uint64_t id) const { return cfg.state_dir + "/job." + std::to_string(id) + ".exit"; }
  std::string fail_path(std::uint64_t id) const { return cfg.state_dir + "/job." + std::to_string(id) + ".fail"; }

  // The shepherd server, (re)started when needed: posix_spawn once, then one fork per job in it.
  // A dead server shows as EPIPE on the next request (start() then restarts it once).
  std::string ensure_server() {
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

  void stop_server() {
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

  // One wake record: a shepherd's pid once it runs, or its failure.
  void take(const WakeRecord& r) {
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
  bool drain(std::uint64_t want = 0, int timeout_ms = 0) {
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
  void nudge() {
    if (!nudge_owed) return;
    nudge_owed = false;
    struct pollfd p {wake_w, POLLOUT, 0};
    if (::poll(&p, 1, 0) == 1) send_wake(wake_w, 0, 0, kWakeNudge);  // full: it is readable anyway
  }

  // Before acting on a job's processes: its shepherd must be in its cgroups (it has reported).
  void settle(std::uint64_t id, Job& j) {
    if (!j.pid_known) drain(id, 5000);
    nudge();
  }
  std::string slot(std::uint64_t id) const { return slot_name(id); }

  std::int64_t used_ms(const Job& j, std::int64_t now) const {
    return j.acc_ms + (j.suspended ? 0 : std::max<std::int64_t>(0, now - j.run_started_ms));
  }

  void save_record(std::uint64_t id, Job& j) const {
    std::string text;
    text.reserve(320);
    auto kv = [&text](const char* k, const std::string& v) {
      text += k;
      text += '=';
      text += v;
      text += '\n';
    };
    kv("id", std::to_string(id));
    kv("pid", std::to_string(j.shepherd));
    kv("uid", std::to_string(j.spec.uid));
    kv("gid", std::to_string(j.spec.gid));
    kv("user", esc(j.spec.user));
    kv("walltime_s", std::to_string(j.spec.walltime_s));
    kv("mem_mb", std::to_string(j.spec.mem_mb));
    kv("jobfs_mb", std::to_string(j.spec.jobfs_mb));
    kv("jobfs_dir", esc(j.jobfs_dir));
    kv("ckpt_dir", esc(j.ckpt_dir));
    kv("own_ckpt_dir", j.own_ckpt_dir ? "1" : "0");
    kv("ckpt_signal", std::to_string(j.spec.ckpt_signal));
    kv("ckpt_grace_s", std::to_string(j.spec.ckpt_grace_s));
    kv("suspended", j.suspended ? "1" : "0");
    kv("acc_ms", std::to_string(j.acc_ms));
    kv("run_started_ms", std::to_string(j.run_started_ms));
    kv("ckpt_deadline_ms", std::to_string(j.ckpt_deadline_ms));
    kv("served", j.served ? "1" : "0");
    std::string final_path = record_path(id);
    // The first record of a run is created whole by one write (O_EXCL: no earlier file there). A
    // reader can see no file or an empty or cut one only if the agent died inside these calls,
    // and load_record() refuses those, which is what a missing record gives (the slot is
    // cleaned, not adopted): no temp file and rename needed. A later record replaces an existing
    // one, so it is written whole to a temp file, then renamed: a reader never sees half of it.
    if (!j.rec_written) {
      int fd = ::open(final_path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
      if (fd >= 0) {
        bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
        ::close(fd);
        if (ok) {
          j.rec_written = true;
          return;
        }
      }
    }
    std::string tmp = final_path + ".tmp";
    int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) return;
    bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
    ::close(fd);
    if (ok) {
      ::rename(tmp.c_str(), final_path.c_str());
      j.rec_written = true;
    } else {
      ::unlink(tmp.c_str());
    }
  }

  std::optional<Job> load_record(std::uint64_t id) const {
    std::ifstream in(record_path(id));
    if (!in) return std::nullopt;
    std::map<std::string, std::string> kv;
    std::string line;
    while (std::getline(in, line)) {
      auto eq = line.find('=');
      if (eq != std::string::npos) kv[line.substr(0, eq)] = unesc(line.substr(eq + 1));
    }
    Job j;
    try {
      j.spec.id = id;
      j.shepherd = std::stoi(kv.at("pid"));
      j.spec.uid = static_cast<uid_t>(std::stoul(kv.at("uid")));
      j.spec.gid = static_cast<gid_t>(std::stoul(kv.at("gid")));
      j.spec.user = kv["user"];
      j.spec.walltime_s = std::stoll(kv.at("walltime_s"));
      j.spec.mem_mb = std::stoll(kv.at("mem_mb"));
      j.spec.jobfs_mb = std::stoll(kv.at("jobfs_mb"));
      j.jobfs_dir = kv["jobfs_dir"];
      j.ckpt_dir = kv["ckpt_dir"];
      j.own_ckpt_dir = kv["own_ckpt_dir"] == "1";
      j.spec.ckpt_signal = std::stoi(kv.at("ckpt_signal"));
      j.spec.ckpt_grace_s = std::stoi(kv.at("ckpt_grace_s"));
      j.suspended = kv["suspended"] == "1";
      j.acc_ms = std::stoll(kv.at("acc_ms"));
      j.run_started_ms = std::stoll(kv.at("run_started_ms"));
      // A checkpoint in progress when the agent died still ends at its deadline.
      if (kv.count("ckpt_deadline_ms")) j.ckpt_deadline_ms = std::stoll(kv["ckpt_deadline_ms"]);
      // The last line: a record cut short (the agent died inside its first write) is refused.
      j.served = kv.at("served") == "1";
      j.rec_written = true;
    } catch (const std::exception&) {
      return std::nullopt;  // unreadable record: the job is cleaned up instead of adopted
    }
    return j;
  }

  // Remove everything a job left: cgroups, jobfs, (ckpt dir if terminal), record, exit file.
  std::string cleanup(std::uint64_t id, const Job& j, bool terminal) {
    std::string err;
    try {
      cg->destroy(slot(id));
    } catch (const std::exception& e) {
      err = e.what();
    }
    // A served job just killed: its server writes the exit file before it reaps the job; wait
    // (briefly) for that, so the file is not written after it was removed here.
    if (j.served && j.pid_known && !j.launch_failed && j.shepherd > 0 && !j.end_seen && !read_exit(id))
      for (int i = 0; i < 500 && !served_gone(j); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    std::error_code ec;
    remove_tree(j.jobfs_dir);
    if (terminal && j.own_ckpt_dir && !cfg.keep_ckpt_on_end) remove_tree(j.ckpt_dir);
    fs::remove(record_path(id), ec);
    fs::remove(exit_path(id), ec);
    if (j.launch_failed) fs::remove(fail_path(id), ec);
    return err;
  }

  // A served job's process is gone (reaped by its server, which wrote its status first; or by
  // init if the server died). Through a pidfd when there is one: immune to pid reuse.
  static bool served_gone(const Job& j) {
    if (j.pidfd >= 0) return ::syscall(SYS_pidfd_send_signal, j.pidfd, 0, nullptr, 0) != 0 && errno == ESRCH;
    return ::kill(j.shepherd, 0) != 0 && errno == ESRCH;
  }

  // The job's raw wait status as the shepherd recorded it, if it did.
  std::optional<int> read_exit(std::uint64_t id) const {
    int fd = ::open(exit_path(id).c_str(), O_RDONLY | O_CLOEXEC);  // read once per job end: no stream
    if (fd < 0) return std::nullopt;
    char buf[32];
    ssize_t n;
    while ((n = ::read(fd, buf, sizeof buf - 1)) < 0 && errno == EINTR) {}
    ::close(fd);
    if (n <= 0) return std::nullopt;
    buf[n] = '\0';
    char* end = nullptr;
    errno = 0;
    long st = std::strtol(buf, &end, 10);
    if (end == buf || errno != 0 || st < INT_MIN || st > INT_MAX) return std::nullopt;
    return static_cast<int>(st);
  }

  void kill_job(std::uint64_t id, Job& j, EndReason why, std::string msg) {
    settle(id, j);
    if (!j.kill_reason) {
      j.kill_reason = why;
      j.kill_message = std::move(msg);
    }
    try {
      // The shepherd (if any in the slot) reaps them, records the status, exits; the server is
      // outside the slot and does the same for its jobs.
      cg->kill_all(slot(id), 5000, j.served ? 0 : j.shepherd);
    } catch (const std::exception&) {
    }
    if (j.suspended) j.suspended = false;
  }

  // After the job's main process ended: stop what it left behind, let the shepherd reap it and
  // exit (no zombies), reap the shepherd if it is ours.
  void wind_down(std::uint64_t id, Job& j) {
    if (j.reaped && j.our_child) return;
    try {
      cg->kill_all(slot(id), 2000, j.shepherd);
    } catch (const std::exception&) {
    }
    // Wait for the shepherd to exit (it does so as soon as its job's processes are gone): a
    // pidfd wakes us at that moment instead of a 5 ms sleep per try. Not our child (the server's):
    // only while it is still in the slot (its pid cannot have been reused then).
    bool in_slot = false;
    if (!j.our_child && j.shepherd > 0 && !j.reaped) {
      try {
        auto p = cg->pids(slot(id));
        in_slot = std::find(p.begin(), p.end(), j.shepherd) != p.end();
      } catch (const std::exception&) {
      }
    }
    if ((j.our_child || in_slot) && !j.reaped) {
      int pfd = static_cast<int>(::syscall(SYS_pidfd_open, j.shepherd, 0));
      if (pfd >= 0) {
        struct pollfd p {pfd, POLLIN, 0};
        while (::poll(&p, 1, 1000) < 0 && errno == EINTR) {}
        ::close(pfd);
      }
    }
    for (int i = 0; i < 200 && j.our_child && !j.reaped; ++i) {
      int st = 0;
      pid_t r = ::waitpid(j.shepherd, &st, WNOHANG);
      if (r == j.shepherd || (r < 0 && errno == ECHILD)) {
        j.reaped = true;
        j.shepherd_status = st;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }

  // Has the shepherd ended? Reaps it if it is our child.
  bool ended(std::uint64_t id, Job& j) {
    if (!j.pid_known) return false;  // not started yet (poll() times such a launch out)
    if (j.launch_failed) return true;
    if (j.reaped) return true;
    // Served: the server wrote the status before it reported the end or reaped the job, so the
    // end record (or, for an adopted job, the pid gone) says it all; no exit-file open per poll.
    if (j.served && j.end_seen) return true;
    if (!j.served && read_exit(id)) return true;  // the job's main process ended; finish() winds the rest down
    if (j.served) {
      // Adopted: a pidfd from now on (the record's pid could be reused once the job is reaped).
      if (j.pidfd < 0 && (j.pidfd = static_cast<int>(::syscall(SYS_pidfd_open, j.shepherd, 0))) < 0 && errno == ESRCH)
        return j.reaped = true;
      return j.reaped = served_gone(j);  // gone without a status: its server died
    }
    if (j.pidfd >= 0) {
      struct pollfd p {j.pidfd, POLLIN, 0};
      return j.reaped = ::poll(&p, 1, 0) == 1;  // the shepherd has exited (its pid is not reused)
    }
    if (j.our_child) {
      int st = 0;
      pid_t r = ::waitpid(j.shepherd, &st, WNOHANG);
      if (r == j.shepherd) {
        j.reaped = true;
        j.shepherd_status = st;
        return true;
      }
      if (r == 0) return false;
      j.our_child = false;  // ECHILD: not ours after all (e.g. reaped elsewhere); watch it from outside
    }
    if (::kill(j.shepherd, 0) != 0 && errno == ESRCH) return j.reaped = true;
    // A pid can be reused: an empty cgroup means the shepherd is gone whatever the pid says.
    if (cg->pids(slot(id)).empty()) return j.reaped = true;
    return false;
  }

  JobEnd finish(std::uint64_t id, Job& j) {
    JobEnd e;
    e.id = id;
    if (j.pidfd >= 0) ::close(j.pidfd);
    j.pidfd = -1;
    if (j.launch_failed) {
      std::ifstream in(fail_path(id));
      std::string report;
      std::getline(in, report);
      e.reason = EndReason::LaunchFailed;
      e.exit_code = -1;
      e.message = report.empty() ? "cannot start job " + std::to_string(id) + ": no report from its shepherd"
                                 : launch_fail_message(id, report, j.binary, j.cwd, j.out_path, j.err_path,
                                                       j.spec.user);
      std::string err = cleanup(id, j, !j.spec.restart);
      if (!err.empty()) e.message += "; cleanup: " + err;
      return e;
    }
    // Our own (fork fallback) shepherd is reaped here. A served job's status was written before
    // its server reported the end or reaped it; what the job left is stopped by cleanup().
    if (j.our_child) wind_down(id, j);
    // Only the memory figures are used here (was it the limit that killed it?): no reads without one.
    SlotUsage u;
    try {
      if (j.spec.mem_mb > 0) u = cg->usage(slot(id));
    } catch (const std::exception&) {
    }
    std::optional<int> st = j.end_status ? j.end_status : read_exit(id);
    std::string how;
    if (st) {
      e.exit_code = exit_code_of(*st);
      how = describe_status(*st);
    } else if (j.kill_reason) {
      e.exit_code = 128 + SIGKILL;
      how = "killed by signal 9";
    } else {
      e.exit_code = -1;
      how = "exit status lost (shepherd " + (j.our_child && WIFSIGNALED(j.shepherd_status)
                                                 ? describe_status(j.shepherd_status)
                                                 : std::string("gone")) + ")";
    }
    bool oom = u.oom_kills > 0 || (st && WIFSIGNALED(*st) && WTERMSIG(*st) == SIGKILL && u.failcnt > 0 &&
                                   j.spec.mem_mb > 0);
    std::string mem_msg = "killed: memory limit " + std::to_string(j.spec.mem_mb) + " MB exceeded (" +
                          std::to_string(u.oom_kills) + " OOM kill(s), limit hit " + std::to_string(u.failcnt) +
                          " times)";
    if (j.kill_reason) {
      e.reason = *j.kill_reason;
      e.message = j.kill_message;
      if (*j.kill_reason == EndReason::Checkpointed && e.message.empty()) e.message = "checkpointed (" + how + ")";
    } else if (j.ckpt_deadline_ms >= 0) {
      e.reason = EndReason::Checkpointed;
      e.message = "checkpointed: exited after the checkpoint signal (" + how + ")";
    } else if (oom) {
      e.reason = EndReason::Memory;
      e.message = mem_msg;
    } else if (st && e.exit_code == 0) {
      e.reason = EndReason::Completed;
      e.message = "completed (exit 0)";
    } else {
      e.reason = EndReason::Failed;
      e.message = "failed: " + how;
    }
    bool terminal = e.reason != EndReason::Preempted && e.reason != EndReason::Checkpointed;
    if (cfg.defer_cleanup) {
      untidy.push_back(Untidy{id, terminal, std::move(j)});
      return e;
    }
    std::string err = cleanup(id, j, terminal);
    if (!err.empty()) e.message += "; cleanup: " + err;
    return e;
  }

  std::vector<int> map_cpus(const std::vector<int>& pus) const {
    if (topo.real() || real_cpus.empty()) return pus;
    // Stand-in topology: fold its PUs onto the real CPUs (enforcement is approximate).
    std::vector<int> out;
    for (int p : pus) out.push_back(real_cpus[static_cast<std::size_t>(p) % real_cpus.size()]);
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
  }
};

// ---- public -----------------------------------------------------------------------------------

std::int64_t Launcher::now_ms() {
  struct timespec ts {};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

Launcher::Launcher(Topology topo, LauncherConfig cfg, std::unique_ptr<CgroupBackend> cg) : impl_(new Impl) {
  impl_->topo = std::move(topo);
  impl_->cfg = std::move(cfg);
  if (impl_->cfg.hostname.empty()) impl_->cfg.hostname = impl_->topo.hostname;
  impl_->cg = cg ? std::move(cg) : make_cgroup(impl_->cfg.cgroup_parent, impl_->cfg.cgroup_version);
  std::error_code ec;
  fs::create_directories(impl_->cfg.state_dir, ec);
  if (ec) throw std::runtime_error("state dir " + impl_->cfg.state_dir + ": " + ec.message());
  ::chmod(impl_->cfg.state_dir.c_str(), 0700);
  int p[2];
  if (::pipe2(p, O_CLOEXEC | O_NONBLOCK) != 0) throw std::runtime_error("pipe: " + errstr(errno));
  impl_->wake_r = p[0];
  impl_->wake_w = p[1];
  // Shepherds block rather than lose a record when the pipe is full; room for many records.
  ::fcntl(p[1], F_SETFL, 0);
  ::fcntl(p[0], F_SETPIPE_SZ, 1 << 20);
  if (impl_->cfg.shepherd != "fork") {
    std::vector<std::string> cand;
    if (!impl_->cfg.shepherd.empty()) {
      cand.push_back(impl_->cfg.shepherd);
    } else {
      std::error_code ec2;
      fs::path self = fs::read_symlink("/proc/self/exe", ec2);
      if (!ec2) {
        cand.push_back((self.parent_path() / "corral-shepherd").string());
        cand.push_back((self.parent_path() / "node" / "corral-shepherd").string());
      }
#ifdef CORRAL_SHEPHERD_BUILD
      cand.push_back(CORRAL_SHEPHERD_BUILD);
#endif
#ifdef CORRAL_SHEPHERD_INSTALL
      cand.push_back(CORRAL_SHEPHERD_INSTALL);
#endif
    }
    for (auto& c : cand)
      if (executable_file(c)) {
        impl_->shepherd = c;
        break;
      }
    if (impl_->shepherd.empty() && !impl_->cfg.shepherd.empty())
      throw std::runtime_error("shepherd " + impl_->cfg.shepherd + " is not an executable file");
  }
  std::ifstream online("/sys/devices/system/cpu/online");
  std::string list;
  if (std::getline(online, list)) {
    try {
      impl_->real_cpus = parse_cpu_list(list);
    } catch (...) {
    }
  }
}

Launcher::~Launcher() {
  impl_->tidy();
  impl_->stop_server();
  for (auto& [id, j] : impl_->jobs)
    if (j.pidfd >= 0) ::close(j.pidfd);
  if (impl_->wake_r >= 0) ::close(impl_->wake_r);
  if (impl_->wake_w >= 0) ::close(impl_->wake_w);
}

const Topology& Launcher::topology() const { return impl_->topo; }
CgroupBackend& Launcher::cgroups() { return *impl_->cg; }
int Launcher::wake_fd() const { return impl_->wake_r; }
bool Launcher::has(std::uint64_t id) const { return impl_->jobs.count(id) > 0; }

std::vector<std::uint64_t> Launcher::jobs() const {
  std::vector<std::uint64_t> v;
  for (auto& [id, j] : impl_->jobs) v.push_back(id);
  return v;
}

std::string Launcher::start(const LaunchSpec& spec_in) {
  Impl& I = *impl_;
  LaunchSpec spec = spec_in;
  const std::uint64_t id = spec.id;
  if (I.jobs.count(id)) return "job " + std::to_string(id) + " is already running here";
  // Its previous run (requeued) ended in this loop iteration: that slot goes first.
  if (!I.untidy.empty()) I.tidy(id);
  if (spec.argv.empty() || spec.argv[0].empty()) return "job " + std::to_string(id) + ": empty command";
  if (spec.mem_mb < 0 || spec.jobfs_mb < 0 || spec.walltime_s < 0 || spec.ckpt_grace_s < 0)
    return "job " + std::to_string(id) + ": negative memory, jobfs, walltime or grace";
  if (spec.ckpt_signal <= 0 || spec.ckpt_signal >= NSIG) return "bad checkpoint signal " + std::to_string(spec.ckpt_signal);

  // The user database is read once per user per 30 s, not for every job (passwd + group files).
  UserInfo u;
  std::string ukey = spec.user.empty() ? "#" + std::to_string(spec.uid) + ":" + std::to_string(spec.gid) : spec.user;
  auto cached = I.users.find(ukey);
  if (cached != I.users.end() && now_ms() - cached->second.first < 30000) {
    u = cached->second.second;
  } else {
    if (auto err = lookup_user(spec, u); !err.empty()) return err;
    if (I.users.size() > 1024) I.users.clear();
    I.users[ukey] = {now_ms(), u};
  }
  spec.uid = u.uid;
  spec.gid = u.gid;
  spec.user = u.name;

  std::string cwd = spec.cwd.empty() ? u.home : spec.cwd;
  struct stat cst {};
  if (::stat(cwd.c_str(), &cst) != 0 || !S_ISDIR(cst.st_mode)) {
    if (!spec.cwd.empty()) return "working directory " + cwd + " does not exist";
    cwd = "/";
  }

  std::vector<int> cpus, mems;
  try {
    cpus = I.map_cpus(pus_of(I.topo, spec.cores));
    if (I.topo.real()) mems = numas_of(I.topo, spec.cores);
  } catch (const std::exception& e) {
    return std::string("job ") + std::to_string(id) + ": " + e.what();
  }

  // Moved out: the Job keeps its spec for the job's life, not a copy of its environment.
  std::map<std::string, std::string> env = std::move(spec.env);
  spec.env.clear();
  if (!env.count("PATH")) env["PATH"] = "/usr/local/bin:/usr/bin:/bin";
  std::string bin_err;
  std::string binary = resolve_binary(spec.argv[0], env["PATH"], cwd, bin_err);
  if (binary.empty()) return bin_err;

  Impl::Job j;
  std::error_code ec;
  // Private jobfs dir (NCI: per-job local scratch), owned by the user.
  if (spec.jobfs_mb > 0) {
    std::string root = spec.jobfs_root.empty() ? I.cfg.jobfs_root : spec.jobfs_root;
    fs::create_directories(root, ec);
    j.jobfs_dir = root + "/" + std::to_string(id);
    fs::remove_all(j.jobfs_dir, ec);
    if (::mkdir(j.jobfs_dir.c_str(), 0700) != 0 || ::chown(j.jobfs_dir.c_str(), u.uid, u.gid) != 0)
      return "cannot create jobfs " + j.jobfs_dir + ": " + errstr(errno);
  }
  // Checkpoint dir: kept across requeue so a restarted job finds what it wrote.
  if (spec.ckpt_dir.empty()) {
    j.ckpt_dir = I.cfg.ckpt_root + "/" + std::to_string(id);
    j.own_ckpt_dir = true;
  } else {
    j.ckpt_dir = spec.ckpt_dir;
  }
  // A fresh (non-restart) start must not see an earlier run's checkpoint. The common case (no
  // such dir, the root exists) is one mkdir; the root is made and leftovers removed only when needed.
  ec.clear();  // (the jobfs steps above may have left it set)
  bool made = ::mkdir(j.ckpt_dir.c_str(), 0700) == 0;
  if (!made && errno == EEXIST && j.own_ckpt_dir && !spec.restart) {
    fs::remove_all(j.ckpt_dir, ec);
    made = ::mkdir(j.ckpt_dir.c_str(), 0700) == 0;
  }
  if (!made) fs::create_directories(j.ckpt_dir, ec);
  // A dir this call made is already the agent's user's, and its group too unless the root is
  // setgid (checked once): no chown for a job of that user (root's, in corrald's usual setup).
  bool owned = made && j.own_ckpt_dir && I.ckpt_owner.owned_by(I.cfg.ckpt_root, u.uid, u.gid);
  if (ec || (!owned && ::chown(j.ckpt_dir.c_str(), u.uid, u.gid) != 0)) {
    std::string why = ec ? ec.message() : errstr(errno);
    fs::remove_all(j.jobfs_dir, ec);
    return "cannot create checkpoint dir " + j.ckpt_dir + ": " + why;
  }
  if (!made) ::chmod(j.ckpt_dir.c_str(), 0700);

  std::string hostname = spec.hosts.empty() ? I.cfg.hostname : spec.hosts;
  env.try_emplace("HOME", u.home);
  env.try_emplace("USER", u.name);
  env.try_emplace("LOGNAME", u.name);
  env.try_emplace("SHELL", u.shell);
  env["CORRAL_JOBID"] = std::to_string(id);
  env["CORRAL_NCPUS"] = std::to_string(spec.cores.empty() ? I.topo.cores.size() : spec.cores.size());
  env["CORRAL_HOSTS"] = hostname;
  env["CORRAL_JOBFS"] = j.jobfs_dir;
  env["CORRAL_CKPT_DIR"] = j.ckpt_dir;
  env["CORRAL_RESTART"] = spec.restart ? "1" : "0";
  if (!j.jobfs_dir.empty()) env.try_emplace("TMPDIR", j.jobfs_dir);

  // Leftover slot of the same id from an earlier life: it is not a running job of ours.
  try {
    I.cg->create_fresh(I.slot(id), SlotLimits{cpus, mems, spec.mem_mb});
  } catch (const std::exception& e) {
    fs::remove_all(j.jobfs_dir, ec);
    if (j.own_ckpt_dir && !spec.restart) remove_tree(j.ckpt_dir);
    return std::string("cannot set up cgroups: ") + e.what();
  }
  j.spec = spec;

  // Everything the children need, prepared now: after fork only async-signal-safe calls.
  std::vector<std::string> envs;
  for (auto& [k, v] : env) envs.push_back(k + "=" + v);
  std::vector<char*> argvp, envp;
  for (auto& a : spec.argv) argvp.push_back(const_cast<char*>(a.c_str()));
  argvp.push_back(nullptr);
  for (auto& e : envs) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  std::string out_path = spec.stdout_path.empty() ? "/dev/null" : spec.stdout_path;
  std::string err_path = spec.stderr_path.empty() ? "/dev/null" : spec.stderr_path;
  std::string exit_file = I.exit_path(id), exit_tmp = exit_file + ".tmp";
  fs::remove(exit_file, ec);
  const bool same_out = out_path == err_path;
  // A restart appends: the output of the run before the checkpoint stays.
  const int out_flags = O_WRONLY | O_CREAT | (spec.restart ? O_APPEND : O_TRUNC);
  const bool drop = u.uid != 0 || u.gid != 0;

  j.binary = binary;
  j.cwd = cwd;
  j.out_path = out_path;
  j.err_path = err_path;

  std::vector<std::string> procs;
  if (!I.shepherd.empty()) procs = I.cg->procs_files(I.slot(id));
  if (!procs.empty()) {
    // Through the shepherd server: one request, no fork or exec in the agent, no wait for them.
    std::string fail_file = I.fail_path(id);
    fs::remove(fail_file, ec);
    std::string groups;
    for (gid_t g : u.groups) groups += (groups.empty() ? "" : ",") + std::to_string(g);
    std::string req(4, '\0');
    auto put = [&req](const std::string& x) {
      auto l = static_cast<std::uint32_t>(x.size());
      req.append(reinterpret_cast<const char*>(&l), 4);
      req += x;
    };
    for (const std::string& f : {std::to_string(id), exit_file, fail_file, std::to_string(u.uid), std::to_string(u.gid),
                                 groups, std::string(drop ? "1" : "0"), cwd, out_path, err_path,
                                 std::to_string(out_flags), binary})
      put(f);
    put(std::to_string(procs.size()));
    for (auto& p : procs) put(p);
    put(std::to_string(spec.argv.size()));
    for (auto& a : spec.argv) put(a);
    put(std::to_string(envs.size()));
    for (auto& e : envs) put(e);
    put(std::to_string(cpus.size()));  // where the server vforks it (no migration at its cpuset join)
    for (int c : cpus) put(std::to_string(c));
    auto total = static_cast<std::uint32_t>(req.size() - 4);
    std::memcpy(req.data(), &total, 4);
    std::string send_err;
    for (int attempt = 0; attempt < 2; ++attempt) {  // a dead server is restarted once
      send_err = I.ensure_server();
      if (!send_err.empty()) break;
      std::size_t off = 0;
      while (off < req.size()) {
        ssize_t n = ::send(I.srv_fd, req.data() + off, req.size() - off, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        off += static_cast<std::size_t>(n);
      }
      if (off == req.size()) break;
      send_err = "shepherd server: " + errstr(errno);
      if (off > 0) break;  // half a request went out: not safe to resend on the same server
      I.stop_server();
    }
    if (!send_err.empty()) {
      I.cleanup(id, j, !spec.restart);
      return "cannot start job " + std::to_string(id) + ": " + send_err;
    }
    j.pid_known = false;
    j.our_child = false;
    j.served = true;
    j.requested_ms = j.run_started_ms = now_ms();
    I.jobs.emplace(id, std::move(j));
    if (I.cfg.async_start) return {};
    I.drain(id, 30000);
    Impl::Job& jj = I.jobs.at(id);
    if (!jj.pid_known) {
      jj.pid_known = jj.launch_failed = true;  // finish(): "no report from its shepherd"
    }
    std::string why;
    if (jj.launch_failed) {
      why = I.finish(id, jj).message;
      I.jobs.erase(id);
    }
    I.nudge();
    return why;
  }

  int go[2], errp[2];
  if (::pipe2(go, O_CLOEXEC) != 0) return "pipe: " + errstr(errno);
  if (::pipe2(errp, O_CLOEXEC) != 0) {
    ::close(go[0]);
    ::close(go[1]);
    return "pipe: " + errstr(errno);
  }
  int devnull = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  const int wake_w = I.wake_w;

  pid_t sp = ::fork();
  if (sp < 0) {
    int e = errno;
    for (int f : {go[0], go[1], errp[0], errp[1], devnull}) ::close(f);
    I.cleanup(id, j, !spec.restart);
    return "fork: " + errstr(e);
  }
  if (sp == 0) {
    // ---- shepherd ----
    reset_signals();
    ::setsid();  // off the agent's terminal and process group
    if (devnull >= 0) { ::dup2(devnull, 0); ::dup2(devnull, 1); ::dup2(devnull, 2); }
    close_fds_except(go[0], errp[1], wake_w);
    char b;
    if (::read(go[0], &b, 1) != 1) ::_exit(126);  // the agent died before attaching us
    ::close(go[0]);
    ::prctl(PR_SET_CHILD_SUBREAPER, 1);  // orphans of the job are reaped here, not left as zombies
    pid_t jp = ::_Fork();
    if (jp < 0) child_fail(errp[1], "fork");
    if (jp == 0) {
      // ---- job ----
      ::setsid();  // its own session and process group: every descendant can be found and signalled
      ::umask(022);
      if (drop) {
        if (::setgroups(u.groups.size(), u.groups.data()) != 0) child_fail(errp[1], "setgroups");
        if (::setgid(u.gid) != 0) child_fail(errp[1], "setgid");
        if (::setuid(u.uid) != 0) child_fail(errp[1], "setuid");
      }
      if (::chdir(cwd.c_str()) != 0) child_fail(errp[1], "chdir");
      // Opened as the user: the files are theirs, and they can only write where they may.
      // O_NONBLOCK: a FIFO without a reader fails (ENXIO) instead of hanging start().
      int o = ::open(out_path.c_str(), out_flags | O_NONBLOCK, 0644);
      if (o < 0) child_fail(errp[1], "open stdout");
      int e = same_out ? o : ::open(err_path.c_str(), out_flags | O_NONBLOCK, 0644);
      if (e < 0) child_fail(errp[1], "open stderr");
      ::fcntl(o, F_SETFL, ::fcntl(o, F_GETFL) & ~O_NONBLOCK);
      ::fcntl(e, F_SETFL, ::fcntl(e, F_GETFL) & ~O_NONBLOCK);
      ::dup2(o, 1);
      ::dup2(e, 2);
      if (o > 2) ::close(o);
      if (e > 2 && e != o) ::close(e);
      ::close(wake_w);
      ::execve(binary.c_str(), argvp.data(), envp.data());
      child_fail(errp[1], "execve");
    }
    ::close(errp[1]);
    int st = 0, jst = 0;
    while (true) {
      pid_t r = ::waitpid(-1, &st, 0);
      if (r == jp) { jst = st; break; }
      if (r < 0 && errno != EINTR) break;
    }
    write_exit_status(exit_tmp.c_str(), exit_file.c_str(), jst);
    send_wake(wake_w, id, static_cast<std::int32_t>(::getpid()), kWakeEnded);
    // Reap whatever the job left until the agent has killed it all (we are its subreaper).
    while (true) {
      pid_t r = ::waitpid(-1, &st, 0);
      if (r < 0 && errno != EINTR) break;
    }
    ::_exit(0);
  }

  // ---- agent ----
  ::close(go[0]);
  ::close(errp[1]);
  if (devnull >= 0) ::close(devnull);
  j.shepherd = sp;
  j.run_started_ms = now_ms();
  std::string attach_err;
  try {
    I.cg->attach(I.slot(id), sp);  // before the job exists, so it is born inside its slot
  } catch (const std::exception& e) {
    attach_err = e.what();
  }
  if (attach_err.empty()) {
    I.save_record(id, j);
    [[maybe_unused]] auto w = ::write(go[1], "g", 1);
  }
  ::close(go[1]);
  std::string child_err;
  char buf[256];
  ssize_t n;
  while ((n = ::read(errp[0], buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR))
    if (n > 0) child_err.append(buf, static_cast<std::size_t>(n));
  ::close(errp[0]);
  if (!attach_err.empty() || !child_err.empty()) {
    if (!attach_err.empty()) ::kill(sp, SIGKILL);
    int st;
    while (::waitpid(sp, &st, 0) < 0 && errno == EINTR) {}
    std::string why = attach_err;
    if (!child_err.empty()) why = launch_fail_message(id, child_err, binary, cwd, out_path, err_path, u.name);
    I.cleanup(id, j, !spec.restart);
    return why;  // its shepherd's wake record names no job of ours: poll() ignores it
  }
  I.jobs.emplace(id, std::move(j));
  return {};
}

std::string Launcher::suspend(std::uint64_t id) {
  auto it = impl_->jobs.find(id);
  if (it == impl_->jobs.end()) return "no job " + std::to_string(id) + " here";
  auto& j = it->second;
  if (j.suspended) return "job " + std::to_string(id) + " is already suspended";
  impl_->settle(id, j);
  try {
    impl_->cg->freeze(impl_->slot(id));
  } catch (const std::exception& e) {
    return std::string("suspend: ") + e.what();
  }
  j.acc_ms = impl_->used_ms(j, now_ms());
  j.suspended = true;
  impl_->save_record(id, j);
  return {};
}

std::string Launcher::resume(std::uint64_t id) {
  auto it = impl_->jobs.find(id);
  if (it == impl_->jobs.end()) return "no job " + std::to_string(id) + " here";
  auto& j = it->second;
  if (!j.suspended) return "job " + std::to_string(id) + " is not suspended";
  try {
    impl_->cg->thaw(impl_->slot(id));
  } catch (const std::exception& e) {
    return std::string("resume: ") + e.what();
  }
  j.suspended = false;
  j.run_started_ms = now_ms();
  impl_->save_record(id, j);
  return {};
}

std::string Launcher::cancel(std::uint64_t id) {
  auto it = impl_->jobs.find(id);
  if (it == impl_->jobs.end()) return "no job " + std::to_string(id) + " here";
  impl_->kill_job(id, it->second, EndReason::Cancelled, "cancelled");
  return {};
}

std::string Launcher::requeue(std::uint64_t id) {
  auto it = impl_->jobs.find(id);
  if (it == impl_->jobs.end()) return "no job " + std::to_string(id) + " here";
  impl_->kill_job(id, it->second, EndReason::Preempted, "preempted: stopped and requeued");
  return {};
}

std::string Launcher::checkpoint(std::uint64_t id) {
  auto it = impl_->jobs.find(id);
  if (it == impl_->jobs.end()) return "no job " + std::to_string(id) + " here";
  auto& j = it->second;
  if (j.ckpt_deadline_ms >= 0) return "job " + std::to_string(id) + " is already checkpointing";
  impl_->settle(id, j);
  if (j.suspended) {
    if (auto err = resume(id); !err.empty()) return err;
  }
  // Signal every process of the job (not the shepherd): the job decides who writes what.
  for (pid_t p : impl_->cg->pids(impl_->slot(id)))
    if (j.served || p != j.shepherd) ::kill(p, j.spec.ckpt_signal);
  j.ckpt_deadline_ms = now_ms() + static_cast<std::int64_t>(j.spec.ckpt_grace_s) * 1000;
  impl_->save_record(id, j);
  return {};
}

std::vector<JobEnd> Launcher::poll(std::int64_t now) {
  Impl& I = *impl_;
  if (now < 0) now = now_ms();
  I.drain();
  I.nudge_owed = false;  // this poll looks at every job
  for (auto it = I.old_servers.begin(); it != I.old_servers.end();) {
    pid_t r = ::waitpid(*it, nullptr, WNOHANG);
    it = r == 0 ? it + 1 : I.old_servers.erase(it);
  }
  std::vector<JobEnd> out;
  for (auto it = I.jobs.begin(); it != I.jobs.end();) {
    const std::uint64_t id = it->first;
    auto& j = it->second;
    if (!j.pid_known) {
      // Asked of the shepherd server, no report yet: normally a few ms; a lost one fails the job.
      if (now - j.requested_ms < 30000) {
        ++it;
        continue;
      }
      j.pid_known = j.launch_failed = true;
    }
    if (!j.reaped && !j.kill_reason) {
      // Enforce the limits (NCI policy: walltime, memory, jobfs; cpus are the cpuset's job).
      // Only the OOM count is needed here (one file); the full usage is read once, at the end.
      SlotUsage u;
      try {
        if (j.spec.mem_mb > 0) u.oom_kills = I.cg->oom_kills(I.slot(id));
        if (u.oom_kills > 0) u = I.cg->usage(I.slot(id));
      } catch (const std::exception&) {
      }
      std::int64_t used = I.used_ms(j, now);
      if (u.oom_kills > 0 && j.spec.mem_mb > 0) {
        I.kill_job(id, j, EndReason::Memory,
                   "killed: memory limit " + std::to_string(j.spec.mem_mb) + " MB exceeded (" +
                       std::to_string(u.oom_kills) + " OOM kill(s), limit hit " + std::to_string(u.failcnt) +
                       " times)");
      } else if (j.spec.walltime_s > 0 && used > j.spec.walltime_s * 1000) {
        I.kill_job(id, j, EndReason::Walltime,
                   "killed: walltime " + std::to_string(j.spec.walltime_s) + " s exceeded (ran " +
                       std::to_string(used) + " ms, suspended time not counted)");
      } else if (j.ckpt_deadline_ms >= 0 && now >= j.ckpt_deadline_ms) {
        I.kill_job(id, j, EndReason::Checkpointed,
                   "checkpoint: job did not exit within the " + std::to_string(j.spec.ckpt_grace_s) +
                       " s grace after signal " + std::to_string(j.spec.ckpt_signal) + "; stopped");
      } else if (j.spec.jobfs_mb > 0 && !j.jobfs_dir.empty() &&
                 (j.jobfs_checked_ms < 0 || now - j.jobfs_checked_ms >= I.cfg.jobfs_check_ms)) {
        j.jobfs_checked_ms = now;
        j.jobfs_mb_now = du_mb(j.jobfs_dir);
        if (j.jobfs_mb_now > j.spec.jobfs_mb)
          I.kill_job(id, j, EndReason::Jobfs,
                     "killed: jobfs " + std::to_string(j.jobfs_mb_now) + " MB used, above its " +
                         std::to_string(j.spec.jobfs_mb) + " MB");
      }
    }
    bool done = I.ended(id, j);
    if (!done && j.kill_reason) {
      // We killed it: the shepherd dies with the slot; wait for it briefly so the end is reported now.
      for (int i = 0; i < 200 && !done; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
        done = I.ended(id, j);
      }
    }
    if (!done) {
      ++it;
      continue;
    }
    out.push_back(I.finish(id, j));
    it = I.jobs.erase(it);
  }
  return out;
}

std::optional<JobUsage> Launcher::usage(std::uint64_t id) const {
  auto it = impl_->jobs.find(id);
  if (it == impl_->jobs.end()) return std::nullopt;
  auto& j = it->second;
  JobUsage r;
  SlotUsage u;
  try {
    u = impl_->cg->usage(impl_->slot(id));
  } catch (const std::exception&) {
  }
  r.cpu_s = u.cpu_s;
  r.rss_mb = u.mem_mb;
  r.max_rss_mb = u.max_mem_mb;
  // The size poll() measured last (walking a big jobfs on every status query would be costly).
  r.jobfs_mb = j.jobfs_dir.empty() ? 0 : j.jobfs_checked_ms >= 0 ? j.jobfs_mb_now : du_mb(j.jobfs_dir);
  r.suspended = j.suspended;
  r.running = !j.suspended && !j.reaped;
  r.walltime_used_ms = impl_->used_ms(j, now_ms());
  return r;
}

std::vector<std::string> Launcher::tidy() { return impl_->tidy(); }

std::vector<Recovered> Launcher::recover(RecoverMode mode) {
  Impl& I = *impl_;
  I.tidy();  // slots of jobs already reported ended are not leftovers
  std::vector<Recovered> out;
  std::set<std::uint64_t> seen;
  for (std::uint64_t id : list_existing(*I.cg)) {
    if (I.jobs.count(id)) continue;
    seen.insert(id);
    auto rec = I.load_record(id);
    bool alive = !I.cg->pids(I.slot(id)).empty();
    bool has_exit = I.read_exit(id).has_value();
    if (mode == RecoverMode::Adopt && rec && (alive || has_exit)) {
      Impl::Job j = std::move(*rec);
      int st = 0;
      pid_t r = ::waitpid(j.shepherd, &st, WNOHANG);  // still our child if this process started it
      j.our_child = r == 0;
      if (r == j.shepherd) {
        j.reaped = true;
        j.shepherd_status = st;
      }
      if (j.suspended && I.cg->freezer_state(I.slot(id)) != FreezeState::Frozen) {
        j.suspended = false;
        j.run_started_ms = now_ms();
      }
      I.jobs.emplace(id, std::move(j));
      out.push_back({id, true, alive ? "adopted: still running" : "adopted: ended while unwatched"});
      continue;
    }
    Impl::Job j = rec ? std::move(*rec) : Impl::Job{};
    std::string err = I.cleanup(id, j, true);
    if (j.our_child && j.shepherd > 0) ::waitpid(j.shepherd, nullptr, WNOHANG);
    out.push_back({id, false,
                   std::string(rec ? "killed and removed" : "no record: killed and removed") +
                       (err.empty() ? "" : "; " + err)});
  }
  // Records without a slot (agent died between writing the record and creating cgroups).
  std::error_code ec;
  for (auto& e : fs::directory_iterator(I.cfg.state_dir, ec)) {
    std::string n = e.path().filename().string();
    if (n.rfind("job.", 0) != 0) continue;
    auto dot = n.find('.', 4);
    if (dot == std::string::npos) continue;
    auto id = slot_jobid(n.substr(0, dot));
    if (!id || I.jobs.count(*id) || seen.count(*id)) continue;
    if (auto rec = I.load_record(*id)) {
      std::error_code ec2;
      if (!rec->jobfs_dir.empty()) fs::remove_all(rec->jobfs_dir, ec2);
    }
    fs::remove(e.path(), ec);
  }
  return out;
}

void Launcher::stop_all() {
  for (auto& [id, j] : impl_->jobs) impl_->kill_job(id, j, EndReason::Cancelled, "cancelled: agent shutting down");
  for (int i = 0; i < 100 && !impl_->jobs.empty(); ++i) {
    poll();
    if (!impl_->jobs.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  impl_->tidy();
}

}  // namespace corral::node
