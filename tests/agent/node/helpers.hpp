// Shared fixtures for the node suite: temp dirs, a Launcher under a test-only cgroup parent,
// and guards that remove every slot and the parent group even when a test fails.
#pragma once

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>

#include "agent/node/launcher.hpp"
#include "tests/skip.hpp"

namespace nodetest {
namespace fs = std::filesystem;
using namespace corral::node;

inline std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline void nap(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

template <class F>
bool wait_until(F pred, int timeout_ms) {
  for (int t = 0; t < timeout_ms; t += 10) {
    if (pred()) return true;
    nap(10);
  }
  return pred();
}

#ifdef NODE_HELPER
// A ticker in no slot (node_test_helper tick FILE, a count every 10 ms): the clock of a "nothing
// happened meanwhile" check, which then waits on ticks it sees rather than a fixed sleep.
struct ControlTicker {
  std::string file;
  pid_t pid = -1;
  explicit ControlTicker(std::string f) : file(std::move(f)) {
    pid = ::fork();
    if (pid == 0) {
      ::execl(NODE_HELPER, NODE_HELPER, "tick", file.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
  }
  ~ControlTicker() {
    if (pid > 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
  }
  long now() const {
    std::string s = slurp(file);
    return s.empty() ? -1 : std::stol(s);
  }
  // Waits until it has counted n more ticks (false after 10 s).
  bool advance(long n) {
    if (!wait_until([&] { return now() >= 0; }, 10000)) return false;
    long from = now();
    return wait_until([&] { return now() >= from + n; }, 10000);
  }
};
#endif

struct TempDir {
  std::string path;
  TempDir() {
    char tmpl[] = "/tmp/corral-node-test-XXXXXX";
    path = mkdtemp(tmpl);
    ::chmod(path.c_str(), 0755);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

// Removes every slot under a parent and the parent itself (runs even if the test failed).
struct CgroupGuard {
  std::string parent;
  explicit CgroupGuard(std::string p) : parent(std::move(p)) { sweep(); }
  ~CgroupGuard() { sweep(); }
  void sweep() {
    try {
      auto b = make_cgroup_v1(parent);
      for (auto& s : b->list()) b->destroy(s);
      b->remove_parent();
    } catch (const std::exception& e) {
      WARN("cgroup cleanup of " << parent << ": " << e.what());
    }
  }
  std::vector<std::string> leftovers() const { return make_cgroup_v1(parent)->list(); }
};

// False (and the test case counted as skipped, tests/skip.hpp) where cgroups v1 cannot be used.
inline bool need_cgroups() {
  std::string why;
  if (!cgroup_v1_available(&why)) {
    CORRAL_SKIP(why);
    return false;
  }
  return true;
}

// A Launcher on the real machine, under a test-only parent group, all state in a temp dir.
struct Node {
  TempDir dir;
  CgroupGuard guard;
  std::unique_ptr<Launcher> L;
  LauncherConfig cfg;
  // The parent group is made unique per test process: several build dirs may run this suite at once.
  explicit Node(const std::string& parent) : guard(parent + "_" + std::to_string(::getpid())) {
    cfg.cgroup_parent = guard.parent;
    cfg.jobfs_root = dir.path + "/jobfs";
    cfg.ckpt_root = dir.path + "/ckpt";
    cfg.state_dir = dir.path + "/state";
    cfg.jobfs_check_ms = 100;
    L = std::make_unique<Launcher>(discover(cfg.jobfs_root), cfg);
  }
  ~Node() {
    if (L) L->stop_all();
  }
  // A new Launcher with the (changed) cfg, the old one gone first.
  void relaunch() {
    L.reset();
    L = std::make_unique<Launcher>(discover(cfg.jobfs_root), cfg);
  }
  LaunchSpec spec(std::uint64_t id, std::vector<std::string> argv) const {
    LaunchSpec s;
    s.id = id;
    s.user = "root";
    s.argv = std::move(argv);
    s.cwd = dir.path;
    s.stdout_path = dir.path + "/" + std::to_string(id) + ".out";
    s.stderr_path = dir.path + "/" + std::to_string(id) + ".err";
    return s;
  }
  std::string out(std::uint64_t id) const { return slurp(dir.path + "/" + std::to_string(id) + ".out"); }
  // Poll until job id ends (or timeout); other ends are kept in `others`.
  std::optional<JobEnd> wait_end(std::uint64_t id, int timeout_ms) {
    for (int t = 0; t <= timeout_ms; t += 20) {
      for (auto& e : L->poll())
        if (e.id == id) return e;
      nap(20);
    }
    return std::nullopt;
  }
  std::vector<std::string> leftovers() const { return L->cgroups().list(); }
};

}  // namespace nodetest
