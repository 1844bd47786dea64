// Test harness: a real corrald --standalone in a temp dir, and the real
// `corral` binary run as any uid (paths come from the meson test env:
// CORRALD, CORRAL). CORRAL_TEST_CGROUP=v2 runs every agent on the cgroup v2
// backend (meson registers each suite a second time so).
#pragma once

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "agent/node/cgroup.hpp"
#include "tests/skip.hpp"

namespace harness {

inline std::string env_or(const char* k, const char* def) {
  const char* v = std::getenv(k);
  return v && *v ? v : def;
}

// The cgroup backend the agents under test use: "v1" (default) or "v2".
inline std::string cgroup_mode() { return env_or("CORRAL_TEST_CGROUP", "v1"); }
inline bool on_v2() { return cgroup_mode() == "v2"; }

// The first cgroup2 mount ("" when none).
inline std::string v2_mount() {
  std::ifstream in("/proc/self/mounts");
  std::string dev, mnt, type, rest;
  while (in >> dev >> mnt >> type && std::getline(in, rest))
    if (type == "cgroup2") return mnt;
  return {};
}

struct Result {
  int rc = -1;
  std::string out, err;
};

inline std::string slurp_fd(int fd) {
  std::string s;
  char b[4096];
  ssize_t n;
  while ((n = ::read(fd, b, sizeof b)) > 0) s.append(b, static_cast<std::size_t>(n));
  return s;
}

inline std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Runs argv (argv[0] a path) as uid/gid (-1: as we are) in cwd, env + extra.
inline Result run(std::vector<std::string> argv, int uid = -1, const std::string& cwd = "",
                  const std::vector<std::string>& extra_env = {}) {
  int out[2], err[2];
  if (::pipe(out) != 0 || ::pipe(err) != 0) throw std::runtime_error("pipe");
  pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(out[1], 1);
    ::dup2(err[1], 2);
    ::close(out[0]);
    ::close(err[0]);
    if (!cwd.empty() && ::chdir(cwd.c_str()) != 0) _exit(126);
    for (const auto& e : extra_env) ::putenv(const_cast<char*>(e.c_str()));
    if (uid >= 0) {
      if (::setgroups(0, nullptr) != 0 || ::setgid(static_cast<gid_t>(uid)) != 0 ||
          ::setuid(static_cast<uid_t>(uid)) != 0)
        _exit(125);
    }
    std::vector<char*> a;
    for (auto& s : argv) a.push_back(s.data());
    a.push_back(nullptr);
    ::execv(a[0], a.data());
    _exit(127);
  }
  ::close(out[1]);
  ::close(err[1]);
  Result r;
  // Read both pipes without deadlocking on a full one.
  pollfd fds[2] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}};
  int open = 2;
  while (open > 0) {
    ::poll(fds, 2, -1);
    for (auto& f : fds) {
      if (f.fd < 0 || !(f.revents & (POLLIN | POLLHUP))) continue;
      char b[4096];
      ssize_t n = ::read(f.fd, b, sizeof b);
      if (n <= 0) {
        ::close(f.fd);
        f.fd = -1;
        --open;
      } else {
        (f.fd == out[0] ? r.out : r.err).append(b, static_cast<std::size_t>(n));
      }
    }
  }
  int st = 0;
  ::waitpid(pid, &st, 0);
  r.rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  return r;
}

inline std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

// A temp dir every test user can enter (the socket lives in it).
inline std::string make_tmpdir(const std::string& tag) {
  std::string t = "/tmp/corral-" + tag + "-XXXXXX";
  if (!::mkdtemp(t.data())) throw std::runtime_error("mkdtemp");
  ::chmod(t.c_str(), 0755);
  std::string work = t + "/work";
  ::mkdir(work.c_str(), 0777);
  ::chmod(work.c_str(), 01777);
  return t;
}

struct Agent {
  std::string dir, socket, pub, cgparent;
  std::string cgbase;  // v2: the group holding cgparent ("" = the root; a delegated group's path)
  std::string start_in;
  bool v2 = false;  // on the cgroup v2 backend (CORRAL_TEST_CGROUP=v2, or --set cgroup=v2 given)  // a cgroup.procs file corrald joins before it starts (as systemd places it)
  std::vector<std::string> extra;
  std::vector<std::string> env;  // KEY=VALUE set in corrald's environment (e.g. PATH)
  bool standalone = true;          // false: a mesh member (the mesh keys in `extra`)
  int uid = -1;                    // >= 0: corrald runs as this user (and group of that number)
  std::vector<std::string> wrap;   // argv before corrald's, e.g. nsenter --net=... (tests/mesh_net.hpp)
  pid_t pid = -1;

  explicit Agent(const std::string& tag, std::vector<std::string> more = {}) : extra(std::move(more)) {
    dir = make_tmpdir(tag);
    socket = dir + "/corrald.sock";
    pub = "ipc://" + dir + "/events";
    cgparent = "corral-test-" + tag + "-" + std::to_string(::getpid());
    v2 = on_v2() || std::find(extra.begin(), extra.end(), "cgroup=v2") != extra.end();
  }
  ~Agent() {
    stop(SIGTERM);
    // Leave nothing behind: kill leftovers of this test's cgroup parent.
    try {
      auto b = v2 ? corral::node::make_cgroup_v2(cgparent, "", cgbase) : corral::node::make_cgroup_v1(cgparent);
      for (const auto& s : b->list()) b->destroy(s);
      b->remove_parent();
    } catch (...) {
    }
    std::string cmd = "rm -rf '" + dir + "'";
    (void)!std::system(cmd.c_str());
  }

  std::string corral() const { return env_or("CORRAL", "build/tools/corral"); }

  void start() {
    std::vector<std::string> argv = {env_or("CORRALD", "build/agent/corrald"), "--no-config",
                                     "--foreground", "--state-dir", dir + "/state", "--socket", socket, "--pub", pub, "--cgroup-parent", cgparent,
                                     "--node-state-dir", dir + "/node", "--jobfs-root",
                                     dir + "/jobfs", "--ckpt-root", dir + "/ckpt", "--log",
                                     dir + "/corrald.log"};
    if (standalone) argv.insert(argv.begin() + 1, "--standalone");
    if (on_v2()) argv.insert(argv.end(), {"--set", "cgroup=v2"});
    argv.insert(argv.end(), extra.begin(), extra.end());
    argv.insert(argv.begin(), wrap.begin(), wrap.end());
    pid = ::fork();
    if (pid == 0) {
      if (uid >= 0 && (::setgroups(0, nullptr) != 0 || ::setgid(static_cast<gid_t>(uid)) != 0 ||
                       ::setuid(static_cast<uid_t>(uid)) != 0))
        _exit(125);
      ::prctl(PR_SET_PDEATHSIG, SIGTERM);  // never outlive a crashed test (after setuid, which clears it)
      for (auto& e : env) ::putenv(e.data());
      if (!start_in.empty()) {
        std::ofstream procs(start_in);
        procs << "0" << std::flush;
        if (!procs) _exit(126);
      }
      std::vector<char*> a;
      for (auto& s : argv) a.push_back(s.data());
      a.push_back(nullptr);
      ::execv(a[0], a.data());
      _exit(127);
    }
    for (int i = 0; i < 1000; ++i) {
      if (cli({"node"}).rc == 0) return;
      int st;
      if (::waitpid(pid, &st, WNOHANG) == pid) {
        pid = -1;
        throw std::runtime_error("corrald exited at start: " + slurp(dir + "/corrald.log"));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    throw std::runtime_error("corrald did not come up: " + slurp(dir + "/corrald.log"));
  }

  void stop(int sig) {
    if (pid <= 0) return;
    ::kill(pid, sig);
    int st;
    ::waitpid(pid, &st, 0);
    pid = -1;
  }

  Result cli(std::vector<std::string> args, int uid = -1) const {
    args.insert(args.begin(), corral());
    args.push_back("--socket");
    args.push_back(socket);
    return run(args, uid, dir + "/work");
  }
  // `corral submit ARGS` (socket via env, since submit takes a script last).
  Result submit(std::vector<std::string> args, int uid = -1) const {
    args.insert(args.begin(), "submit");
    args.insert(args.begin(), corral());
    return run(args, uid, dir + "/work", {"CORRAL_SOCKET=" + socket});
  }
  std::string log() const { return slurp(dir + "/corrald.log"); }
};

// A connection to `socket` (blocking), or -1.
inline int connect_unix(const std::string& socket) {
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", socket.c_str());
  if (fd >= 0 && ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) return fd;
  if (fd >= 0) ::close(fd);
  return -1;
}

// Children of `parent` (from /proc/*/stat), e.g. corrald's shepherd server.
inline std::vector<pid_t> children_of(pid_t parent) {
  std::vector<pid_t> out;
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    std::string name = e.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string st = slurp("/proc/" + name + "/stat");
    std::size_t rp = st.rfind(')');
    if (rp == std::string::npos) continue;
    std::istringstream in(st.substr(rp + 2));
    char state;
    long ppid = 0;
    in >> state >> ppid;
    if (ppid == parent) out.push_back(static_cast<pid_t>(std::stol(name)));
  }
  return out;
}

// Alive and not a zombie.
inline bool alive(pid_t pid) {
  std::string st = slurp("/proc/" + std::to_string(pid) + "/stat");
  std::size_t rp = st.rfind(')');
  return rp != std::string::npos && rp + 2 < st.size() && st[rp + 2] != 'Z';
}

// What a test's agent left behind, or "" (waits up to `ms` for the agent to tidy): slot groups
// under its cgroup parent in any v1 controller, processes in those groups, and any process of
// `gone` (e.g. the shepherd server of an agent killed with SIGKILL, which must leave once its
// last job is reaped) still running.
inline std::string leftovers(const Agent& a, const std::vector<pid_t>& gone = {}, int ms = 10000) {
  std::string what;
  for (int t = 0; t <= ms; t += 50) {
    what.clear();
    std::vector<std::string> dirs;
    if (a.v2) dirs.push_back(v2_mount() + a.cgbase + "/" + a.cgparent);
    else
      for (const char* c : {"cpuset", "memory", "freezer", "cpuacct"})
        dirs.push_back(std::string("/sys/fs/cgroup/") + c + "/" + a.cgparent);
    for (const auto& dir : dirs) {
      std::error_code ec;
      for (const auto& e : std::filesystem::directory_iterator(dir, ec))
        if (e.is_directory()) what += "cgroup " + dir + "/" + e.path().filename().string() + "; ";
    }
    for (const auto& e : std::filesystem::directory_iterator("/proc")) {
      std::string name = e.path().filename();
      if (name.find_first_not_of("0123456789") != std::string::npos) continue;
      if (slurp("/proc/" + name + "/cgroup").find("/" + a.cgparent + "/") != std::string::npos)
        what += "process " + name + " (" + trim(slurp("/proc/" + name + "/comm")) + ") in " + a.cgparent + "; ";
    }
    for (pid_t p : gone)
      if (alive(p)) what += "process " + std::to_string(p) + " (" + trim(slurp("/proc/" + std::to_string(p) + "/comm")) + ") still running; ";
    if (what.empty()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return what;
}

// Whether the end-to-end tests can run here; else why not.
inline bool can_run(std::string* why) {
  if (::geteuid() != 0) {
    *why = "needs root (switching users, cgroups)";
    return false;
  }
  return on_v2() ? corral::node::cgroup_v2_available(why) : corral::node::cgroup_v1_available(why);
}

// What the agents' backend cannot enforce here ("" = every limit), from a probe group.
inline std::string unenforced() {
  if (!on_v2()) return {};
  std::string parent = "corral-test-probe-" + std::to_string(::getpid()), out;
  auto b = corral::node::make_cgroup_v2(parent);
  for (const auto& g : b->unenforced()) out += (out.empty() ? "" : "; ") + g;
  b->remove_parent();
  return out;
}

// The freezer state of the cgroup a process is in ("FROZEN", "THAWED"), v1 or v2.
inline std::string freezer_state(const std::string& pid) {
  std::string cg = slurp("/proc/" + pid + "/cgroup");
  bool v2 = on_v2();
  std::size_t p = cg.find(v2 ? "0::" : ":freezer:");
  if (p == std::string::npos) return "<no freezer cgroup>";
  std::size_t start = p + (v2 ? 3 : 9), e = cg.find('\n', p);
  std::string path = cg.substr(start, e - start);
  if (!v2) return trim(slurp("/sys/fs/cgroup/freezer" + path + "/freezer.state"));
  std::string ev = slurp(v2_mount() + path + "/cgroup.events");
  return ev.find("frozen 1") != std::string::npos ? "FROZEN" : "THAWED";
}

// Value of "key": in a flat JSON object (numbers and strings; enough for tests).
inline std::string json_field(const std::string& js, const std::string& key) {
  std::string k = "\"" + key + "\":";
  std::size_t p = js.find(k);
  if (p == std::string::npos) return "<missing>";
  p += k.size();
  if (js[p] == '"') {
    std::size_t e = js.find('"', p + 1);
    return js.substr(p + 1, e - p - 1);
  }
  std::size_t e = js.find_first_of(",}", p);
  return js.substr(p, e - p);
}

// The objects of the "runs" array of a `corral stat --json` job (flat objects, no '}' in them).
inline std::vector<std::string> runs_of(const std::string& js) {
  std::vector<std::string> out;
  std::size_t p = js.find("\"runs\":[");
  if (p == std::string::npos) return out;
  for (p += 8; p < js.size() && js[p] == '{';) {
    std::size_t e = js.find('}', p);
    if (e == std::string::npos) break;
    out.push_back(js.substr(p, e - p + 1));
    p = e + 1;
    if (p < js.size() && js[p] == ',') ++p;
  }
  return out;
}

// `corral stat ID --json`, required to succeed.
inline std::string stat_json(const Agent& a, const std::string& id) {
  auto r = a.cli({"stat", id, "--json"});
  INFO(r.err);
  REQUIRE(r.rc == 0);
  return r.out;
}

// Waits (up to `ms`) until the job's state is `want`; returns the last state.
inline std::string wait_state(const Agent& a, const std::string& id, const std::string& want, int ms = 10000) {
  std::string st;
  for (int t = 0; t < ms; t += 20) {
    st = json_field(stat_json(a, id), "state");
    if (st == want) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return st;
}

// Waits until `path` has content (a job wrote it).
inline std::string wait_file(const std::string& path, int ms = 10000) {
  std::string s;
  for (int t = 0; t < ms && (s = slurp(path)).empty(); t += 20)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  return s;
}

}  // namespace harness

// Returns from the test case with a printed reason where corrald cannot run
// (not root, no cgroups), and counts it as skipped (the suite is SKIP, exit 77, when every case
// skipped: tests/catch_main.cpp).
#define SKIP_UNLESS_ROOT()                                      \
  do {                                                          \
    std::string why;                                            \
    if (!harness::can_run(&why)) {                              \
      CORRAL_SKIP(why);                                         \
      return;                                                   \
    }                                                           \
  } while (0)

// Returns from the test case, counted as skipped, where the agents' backend cannot enforce cpus
// and memory (cgroup v2 without those controllers): what it checks needs them, or it runs with
// nci = yes, which refuses to start there.
#define SKIP_UNLESS_ENFORCED()                                  \
  do {                                                          \
    std::string gaps = harness::unenforced();                   \
    if (!gaps.empty()) {                                        \
      CORRAL_SKIP("cgroup " + harness::cgroup_mode() + " here: " + gaps); \
      return;                                                   \
    }                                                           \
  } while (0)
