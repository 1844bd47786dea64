// Starting a job: the checks made in the agent (user, working directory,
// binary, cores), its private jobfs and checkpoint dirs, its environment and
// slot cgroups, then its process — through the shepherd server (one request),
// or forked here (a shepherd, then the job: setsid, the user's identity, its
// working directory and output files, execve).
#include "launcher_impl.hpp"

#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <sstream>

namespace corral::node {
namespace fs = std::filesystem;
using namespace detail;

namespace {

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

// The job itself, in the shepherd's child: its own session, the user's identity, its working
// directory and output files, then execve. Only async-signal-safe calls.
[[noreturn]] void exec_job(const ChildSetup& c, int err_fd, int wake_w) {
  ::setsid();  // its own session and process group: every descendant can be found and signalled
  ::umask(c.umask);
  if (c.drop) {
    if (::setgroups(c.user.groups.size(), c.user.groups.data()) != 0) child_fail(err_fd, "setgroups");
    if (::setgid(c.user.gid) != 0) child_fail(err_fd, "setgid");
    if (::setuid(c.user.uid) != 0) child_fail(err_fd, "setuid");
  }
  if (::chdir(c.cwd.c_str()) != 0) child_fail(err_fd, "chdir");
  // Opened as the user: the files are theirs, and they can only write where they may.
  // O_NONBLOCK: a FIFO without a reader fails (ENXIO) instead of hanging start().
  int o = ::open(c.out_path.c_str(), c.out_flags | O_NONBLOCK, 0644);
  if (o < 0) child_fail(err_fd, "open stdout");
  int e = c.same_out ? o : ::open(c.err_path.c_str(), c.out_flags | O_NONBLOCK, 0644);
  if (e < 0) child_fail(err_fd, "open stderr");
  ::fcntl(o, F_SETFL, ::fcntl(o, F_GETFL) & ~O_NONBLOCK);
  ::fcntl(e, F_SETFL, ::fcntl(e, F_GETFL) & ~O_NONBLOCK);
  ::dup2(o, 1);
  ::dup2(e, 2);
  if (o > 2) ::close(o);
  if (e > 2 && e != o) ::close(e);
  ::close(wake_w);
  ::execve(c.binary.c_str(), c.argvp.data(), c.envp.data());
  child_fail(err_fd, "execve");
}

// The forked shepherd: waits for the agent to attach it to the job's slot (`go`), forks the job,
// records its exit status, then reaps whatever the job left until the agent has killed it all.
[[noreturn]] void run_shepherd(const ChildSetup& c, std::uint64_t id, int go_r, int err_w,
                               int wake_w, int devnull) {
  reset_signals();
  ::setsid();  // off the agent's terminal and process group
  if (devnull >= 0) { ::dup2(devnull, 0); ::dup2(devnull, 1); ::dup2(devnull, 2); }
  close_fds_except(go_r, err_w, wake_w);
  char b;
  if (::read(go_r, &b, 1) != 1) ::_exit(126);  // the agent died before attaching us
  ::close(go_r);
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);  // orphans of the job are reaped here, not left as zombies
  pid_t jp = ::_Fork();
  if (jp < 0) child_fail(err_w, "fork");
  if (jp == 0) exec_job(c, err_w, wake_w);
  ::close(err_w);
  int st = 0, jst = 0;
  while (true) {
    pid_t r = ::waitpid(-1, &st, 0);
    if (r == jp) { jst = st; break; }
    if (r < 0 && errno != EINTR) break;
  }
  write_exit_status(c.exit_tmp.c_str(), c.exit_file.c_str(), jst);
  send_wake(wake_w, id, static_cast<std::int32_t>(::getpid()), kWakeEnded);
  while (true) {
    pid_t r = ::waitpid(-1, &st, 0);
    if (r < 0 && errno != EINTR) break;
  }
  ::_exit(0);
}

}  // namespace


// "cannot start job N: <stage> <what>: <reason> (as user U)" from a child's "<stage>:<errno>".
std::string detail::launch_fail_message(std::uint64_t id, const std::string& report, const std::string& binary,
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

std::vector<int> Launcher::Impl::map_cpus(const std::vector<int>& pus) const {
  if (topo.real() || real_cpus.empty()) return pus;
  // Stand-in topology: fold its PUs onto the real CPUs (enforcement is approximate).
  std::vector<int> out;
  for (int p : pus) out.push_back(real_cpus[static_cast<std::size_t>(p) % real_cpus.size()]);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

// ---- start() ---------------------------------------------------------------------------------

// The user database is read once per user per 30 s, not for every job (passwd + group files).
std::string Launcher::Impl::user_of(const LaunchSpec& spec, UserInfo& u) {
  std::string ukey = spec.user.empty() ? "#" + std::to_string(spec.uid) + ":" + std::to_string(spec.gid) : spec.user;
  auto cached = users.find(ukey);
  if (cached != users.end() && now_ms() - cached->second.first < 30000) {
    u = cached->second.second;
  } else {
    if (auto err = lookup_user(spec, u); !err.empty()) return err;
    if (users.size() > 1024) users.clear();
    users[ukey] = {now_ms(), u};
  }
  return {};
}

// The job's private jobfs dir and its checkpoint dir, owned by the user. On failure nothing is
// left behind.
std::string Launcher::Impl::make_dirs(const LaunchSpec& spec, const UserInfo& u, Job& j) {
  const std::uint64_t id = spec.id;
  std::error_code ec;
  // Private jobfs dir (NCI: per-job local scratch), owned by the user.
  if (spec.jobfs_mb > 0) {
    std::string root = spec.jobfs_root.empty() ? cfg.jobfs_root : spec.jobfs_root;
    fs::create_directories(root, ec);
    j.jobfs_dir = root + "/" + std::to_string(id);
    fs::remove_all(j.jobfs_dir, ec);
    if (::mkdir(j.jobfs_dir.c_str(), 0700) != 0 || ::chown(j.jobfs_dir.c_str(), u.uid, u.gid) != 0)
      return "cannot create jobfs " + j.jobfs_dir + ": " + errstr(errno);
  }
  // Checkpoint dir: kept across requeue so a restarted job finds what it wrote.
  if (spec.ckpt_dir.empty()) {
    j.ckpt_dir = cfg.ckpt_root + "/" + std::to_string(id);
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
  bool owned = made && j.own_ckpt_dir && ckpt_owner.owned_by(cfg.ckpt_root, u.uid, u.gid);
  if (ec || (!owned && ::chown(j.ckpt_dir.c_str(), u.uid, u.gid) != 0)) {
    std::string why = ec ? ec.message() : errstr(errno);
    fs::remove_all(j.jobfs_dir, ec);
    return "cannot create checkpoint dir " + j.ckpt_dir + ": " + why;
  }
  if (!made) ::chmod(j.ckpt_dir.c_str(), 0700);
  return {};
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

  ChildSetup c;
  UserInfo& u = c.user;
  if (auto err = I.user_of(spec, u); !err.empty()) return err;
  spec.uid = u.uid;
  spec.gid = u.gid;
  spec.user = u.name;

  std::string cwd = spec.cwd.empty() ? u.home : spec.cwd;
  struct stat cst {};
  if (::stat(cwd.c_str(), &cst) != 0 || !S_ISDIR(cst.st_mode)) {
    if (!spec.cwd.empty()) return "working directory " + cwd + " does not exist";
    cwd = "/";
  }

  std::vector<int> mems;
  try {
    c.cpus = I.map_cpus(pus_of(I.topo, spec.cores));
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
  if (auto err = I.make_dirs(spec, u, j); !err.empty()) return err;

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
  std::error_code ec;
  try {
    I.cg->create_fresh(I.slot(id), SlotLimits{c.cpus, mems, spec.mem_mb});
  } catch (const std::exception& e) {
    fs::remove_all(j.jobfs_dir, ec);
    if (j.own_ckpt_dir && !spec.restart) remove_tree(j.ckpt_dir);
    return std::string("cannot set up cgroups: ") + e.what();
  }
  j.spec = spec;

  // Everything the children need, prepared now: after fork only async-signal-safe calls.
  for (auto& [k, v] : env) c.envs.push_back(k + "=" + v);
  for (auto& a : spec.argv) c.argvp.push_back(const_cast<char*>(a.c_str()));
  c.argvp.push_back(nullptr);
  for (auto& e : c.envs) c.envp.push_back(const_cast<char*>(e.c_str()));
  c.envp.push_back(nullptr);
  c.binary = binary;
  c.cwd = cwd;
  c.out_path = spec.stdout_path.empty() ? "/dev/null" : spec.stdout_path;
  c.err_path = spec.stderr_path.empty() ? "/dev/null" : spec.stderr_path;
  c.exit_file = I.exit_path(id);
  c.exit_tmp = c.exit_file + ".tmp";
  fs::remove(c.exit_file, ec);
  c.same_out = c.out_path == c.err_path;
  // A restart appends: the output of the run before the checkpoint stays.
  c.out_flags = O_WRONLY | O_CREAT | (spec.restart ? O_APPEND : O_TRUNC);
  c.drop = u.uid != 0 || u.gid != 0;
  c.umask = spec.umask & 0777;

  j.binary = binary;
  j.cwd = cwd;
  j.out_path = c.out_path;
  j.err_path = c.err_path;

  std::vector<std::string> procs;
  if (!I.shepherd.empty()) procs = I.cg->procs_files(I.slot(id));
  if (!procs.empty()) return I.start_served(spec, j, c, procs);
  return I.start_forked(spec, j, c);
}

// Through the shepherd server: one request, no fork or exec in the agent, no wait for them.
std::string Launcher::Impl::start_served(const LaunchSpec& spec, Job& j, const ChildSetup& c,
                                         const std::vector<std::string>& procs) {
  const std::uint64_t id = spec.id;
  const UserInfo& u = c.user;
  std::error_code ec;
  std::string fail_file = fail_path(id);
  fs::remove(fail_file, ec);
  // Recorded before it is asked for (pid 0: not reported yet): an agent that dies before it reads
  // the server's report finds the record, and adopts the job instead of killing it as a leftover
  // (and then starting it a second time). The request names the record: a server that gets to it
  // only after a restarted agent gave the job up (and removed the record) drops it.
  j.our_child = false;
  j.served = true;
  j.shepherd = 0;
  if (ensure_server().empty()) j.server = srv_pid;
  // Its walltime counts from here, also for an agent that adopts it from this record.
  j.requested_ms = j.run_started_ms = now_ms();
  save_record(id, j);
  std::string groups;
  for (gid_t g : u.groups) groups += (groups.empty() ? "" : ",") + std::to_string(g);
  std::string req(4, '\0');
  auto put = [&req](const std::string& x) {
    auto l = static_cast<std::uint32_t>(x.size());
    req.append(reinterpret_cast<const char*>(&l), 4);
    req += x;
  };
  for (const std::string& f : {std::to_string(id), c.exit_file, fail_file, std::to_string(u.uid), std::to_string(u.gid),
                               groups, std::string(c.drop ? "1" : "0"), c.cwd, c.out_path, c.err_path,
                               std::to_string(c.out_flags), c.binary})
    put(f);
  put(std::to_string(procs.size()));
  for (auto& p : procs) put(p);
  put(std::to_string(spec.argv.size()));
  for (auto& a : spec.argv) put(a);
  put(std::to_string(c.envs.size()));
  for (auto& e : c.envs) put(e);
  put(std::to_string(c.cpus.size()));  // where the server vforks it (no migration at its cpuset join)
  for (int cpu : c.cpus) put(std::to_string(cpu));
  put(std::to_string(c.umask));
  if (j.rec_written) {
    put(record_path(id));
    for (std::int64_t v : {j.rec_sec, j.rec_nsec}) put(std::to_string(v));
  }
  auto total = static_cast<std::uint32_t>(req.size() - 4);
  std::memcpy(req.data(), &total, 4);
  if (std::string send_err = send_request(req); !send_err.empty()) {
    cleanup(id, j, !spec.restart);
    return "cannot start job " + std::to_string(id) + ": " + send_err;
  }
  j.pid_known = false;
  jobs.emplace(id, std::move(j));
  if (cfg.async_start) return {};
  drain(id, 30000);
  Job& jj = jobs.at(id);
  if (!jj.pid_known) {
    jj.pid_known = jj.launch_failed = true;  // finish(): "no report from its shepherd"
  }
  std::string why;
  if (jj.launch_failed) {
    why = finish(id, jj).message;
    jobs.erase(id);
  }
  nudge();
  return why;
}

// Without the server: a shepherd forked from the agent, attached to the job's slot before it
// forks the job (so the job is born inside its cgroups); waits until the job has exec'd.
std::string Launcher::Impl::start_forked(const LaunchSpec& spec, Job& j, const ChildSetup& c) {
  const std::uint64_t id = spec.id;
  int go[2], errp[2];
  if (::pipe2(go, O_CLOEXEC) != 0) return "pipe: " + errstr(errno);
  if (::pipe2(errp, O_CLOEXEC) != 0) {
    ::close(go[0]);
    ::close(go[1]);
    return "pipe: " + errstr(errno);
  }
  int devnull = ::open("/dev/null", O_RDWR | O_CLOEXEC);

  pid_t sp = ::fork();
  if (sp < 0) {
    int e = errno;
    for (int f : {go[0], go[1], errp[0], errp[1], devnull}) ::close(f);
    cleanup(id, j, !spec.restart);
    return "fork: " + errstr(e);
  }
  if (sp == 0) run_shepherd(c, id, go[0], errp[1], wake_w, devnull);

  ::close(go[0]);
  ::close(errp[1]);
  if (devnull >= 0) ::close(devnull);
  j.shepherd = sp;
  j.run_started_ms = now_ms();
  std::string attach_err;
  try {
    cg->attach(slot(id), sp);  // before the job exists, so it is born inside its slot
  } catch (const std::exception& e) {
    attach_err = e.what();
  }
  if (attach_err.empty()) {
    save_record(id, j);
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
    if (!child_err.empty())
      why = launch_fail_message(id, child_err, c.binary, c.cwd, c.out_path, c.err_path, c.user.name);
    cleanup(id, j, !spec.restart);
    return why;  // its shepherd's wake record names no job of ours: poll() ignores it
  }
  jobs.emplace(id, std::move(j));
  return {};
}

}  // namespace corral::node
