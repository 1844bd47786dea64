// The cgroup backends: v1 on the real hierarchy (create a slot, pin, limit, freeze, kill, list,
// remove); v2 on a real cgroup2 mount (freezing, killing, the hierarchy, delegation) and on a fake
// file tree laid out like /sys/fs/cgroup for the files that need the cpuset and memory controllers.
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include "agent/node/cgroup.hpp"
#include "helpers.hpp"
#include "tests/agent/cgroup2.hpp"

using namespace corral::node;
using nodetest::slurp;

namespace {
std::string status_field(pid_t pid, const std::string& key) {
  std::istringstream in(slurp("/proc/" + std::to_string(pid) + "/status"));
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(key + ":", 0) == 0) {
      auto v = line.substr(key.size() + 1);
      v.erase(0, v.find_first_not_of(" \t"));
      return v;
    }
  return {};
}
struct Child {  // a paused child process, killed and reaped on scope exit
  pid_t pid = -1;
  Child() {
    pid = fork();
    if (pid == 0) {
      for (;;) pause();
    }
  }
  ~Child() {
    if (pid > 0) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
  }
};
}  // namespace

TEST_CASE("slot names map to job ids", "[node][cgroup]") {
  CHECK(slot_name(42) == "job.42");
  CHECK(slot_jobid("job.42") == 42u);
  CHECK(!slot_jobid("job."));
  CHECK(!slot_jobid("job.4x"));
  CHECK(!slot_jobid("other"));
}

TEST_CASE("a slot pins, limits, freezes and kills through cgroup v1", "[node][cgroup]") {
  if (!nodetest::need_cgroups()) return;
  nodetest::CgroupGuard guard("corral_t_cgroup");
  auto b = make_cgroup_v1("corral_t_cgroup");
  CHECK(b->version() == "v1");
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  int cpu = static_cast<int>(ncpu - 1);
  SlotCgroups slot(*b, 7);
  slot.create({cpu}, {0}, 64);
  CHECK(list_existing(*b) == std::vector<std::uint64_t>{7});
  CHECK(slurp(b->cpuset_path("job.7") + "/cpuset.cpus") == std::to_string(cpu) + "\n");
  CHECK(std::stoll(slurp("/sys/fs/cgroup/memory/corral_t_cgroup/job.7/memory.limit_in_bytes")) == 64ll << 20);

  Child c;
  REQUIRE(c.pid > 0);
  slot.attach(c.pid);
  CHECK(status_field(c.pid, "Cpus_allowed_list") == std::to_string(cpu));
  CHECK(slot.pids() == std::vector<pid_t>{c.pid});

  slot.freeze();
  CHECK(slot.state() == FreezeState::Frozen);
  CHECK(status_field(c.pid, "State").rfind("D", 0) == 0);  // frozen tasks sit in D (uninterruptible)
  slot.thaw();
  CHECK(slot.state() == FreezeState::Thawed);

  auto u = slot.usage();
  CHECK(u.failcnt == 0);
  CHECK(u.oom_kills == 0);

  CHECK(slot.kill_all(2000));
  int st = 0;
  REQUIRE(waitpid(c.pid, &st, 0) == c.pid);
  c.pid = -1;
  CHECK(WIFSIGNALED(st));
  CHECK(WTERMSIG(st) == SIGKILL);
  CHECK(slot.pids().empty());
  slot.destroy();
  CHECK(b->list().empty());
}

TEST_CASE("a cpuset parent left without cpus by a killed corrald gets them back", "[node][cgroup]") {
  if (!nodetest::need_cgroups()) return;
  nodetest::CgroupGuard guard("corral_t_cgroup3");
  // As libcgroup leaves it when corrald is killed between its mkdir and its writes.
  const std::string parent = "/sys/fs/cgroup/cpuset/corral_t_cgroup3";
  REQUIRE(::mkdir(parent.c_str(), 0755) == 0);
  REQUIRE(slurp(parent + "/cpuset.cpus") == "\n");
  auto b = make_cgroup_v1("corral_t_cgroup3");
  const int cpu = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN) - 1);
  SlotCgroups slot(*b, 3);
  slot.create({cpu}, {0}, 64);
  CHECK(slurp(b->cpuset_path("job.3") + "/cpuset.cpus") == std::to_string(cpu) + "\n");
  CHECK(slurp(parent + "/cpuset.cpus") != "\n");
  slot.destroy();
}

TEST_CASE("bad slot limits are refused with a message and leave nothing", "[node][cgroup]") {
  if (!nodetest::need_cgroups()) return;
  nodetest::CgroupGuard guard("corral_t_cgroup2");
  auto b = make_cgroup_v1("corral_t_cgroup2");
  CHECK_THROWS_WITH(b->create("job.1", SlotLimits{{9999}, {}, 0}), Catch::Contains("not all available"));
  CHECK(b->list().empty());
  CHECK_THROWS_AS(b->create("../escape", SlotLimits{}), CgroupError);
  CHECK_THROWS_AS(make_cgroup_v1("/abs"), CgroupError);
}

TEST_CASE("the cgroup v2 backend freezes, kills and lists on a real cgroup2 mount", "[node][cgroup]") {
  cgtest::Cgroup2Mount m;
  if (!m.ok()) {
    CORRAL_SKIP(m.why);
    return;
  }
  auto b = make_cgroup_v2("corral_t_v2_" + std::to_string(::getpid()), m.path);
  struct Sweep {  // cleanup even on failure
    CgroupBackend& b;
    ~Sweep() {
      try {
        for (auto& s : b.list()) b.destroy(s);
        b.remove_parent();
      } catch (const std::exception& e) {
        WARN("v2 cleanup: " << e.what());
      }
    }
  } sweep{*b};
  CHECK(b->version() == "v2");
  for (const auto& g : b->unenforced()) WARN("v2 here: " << g);
  b->create("job.3", SlotLimits{{0}, {}, 64});
  CHECK(list_existing(*b) == std::vector<std::uint64_t>{3});
  Child c;
  REQUIRE(c.pid > 0);
  b->attach("job.3", c.pid);
  CHECK(b->pids("job.3") == std::vector<pid_t>{c.pid});
  CHECK(b->freezer_state("job.3") == FreezeState::Thawed);
  b->freeze("job.3");
  CHECK(b->freezer_state("job.3") == FreezeState::Frozen);
  b->thaw("job.3");
  CHECK(b->freezer_state("job.3") == FreezeState::Thawed);
  CHECK(b->kill_all("job.3", 2000));
  int st = 0;
  REQUIRE(waitpid(c.pid, &st, 0) == c.pid);
  c.pid = -1;
  CHECK(WTERMSIG(st) == SIGKILL);
  b->destroy("job.3");
  CHECK(b->list().empty());
}

namespace {
namespace fs = std::filesystem;
void put(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

// A fake cgroup2 root: the root offers `offered`; the parent group and one slot exist with their
// (empty) control files, as the kernel makes them at mkdir.
void fake_tree(const std::string& root, const std::string& parent, const std::string& offered) {
  put(root + "/cgroup.controllers", offered + "\n");
  put(root + "/cgroup.subtree_control", "");
  std::string p = root + "/" + parent, s = p + "/job.5";
  fs::create_directories(s);
  put(p + "/cgroup.controllers", offered + "\n");
  put(p + "/cgroup.subtree_control", "");
  for (const char* f : {"cpuset.cpus", "cpuset.mems", "memory.max", "memory.swap.max", "memory.oom.group",
                        "cgroup.procs", "cgroup.freeze", "cgroup.events"})
    put(s + "/" + f, "");
  put(s + "/memory.events", "low 0\nhigh 0\nmax 4\noom 1\noom_kill 2\noom_group_kill 0\n");
  put(s + "/memory.current", "67108864\n");
  put(s + "/memory.peak", "134217728\n");
  put(s + "/cpu.stat", "usage_usec 2500000\nuser_usec 2000000\nsystem_usec 500000\n");
}
}  // namespace

TEST_CASE("the cgroup v2 backend writes cpuset and memory limits and reads usage (fake tree)", "[node][cgroup]") {
  nodetest::TempDir t;
  fake_tree(t.path, "corral_f", "cpuset cpu io memory pids");
  auto b = make_cgroup_v2("corral_f", t.path);
  // The controllers a slot needs, enabled in one write at each level.
  CHECK(slurp(t.path + "/cgroup.subtree_control") == "+cpuset +memory +cpu");
  CHECK(slurp(t.path + "/corral_f/cgroup.subtree_control") == "+cpuset +memory +cpu");
  CHECK(b->unenforced().empty());
  CHECK(check_enforcement(*b, true).empty());
  CHECK(b->describe().find(t.path + "/corral_f") != std::string::npos);
  b->create("job.5", SlotLimits{{2, 3}, {0}, 64});
  std::string s = t.path + "/corral_f/job.5/";
  CHECK(slurp(s + "cpuset.cpus") == "2-3");
  CHECK(slurp(s + "cpuset.mems") == "0");
  CHECK(slurp(s + "memory.max") == std::to_string(64ll << 20));
  CHECK(slurp(s + "memory.swap.max") == "0");
  CHECK(slurp(s + "memory.oom.group") == "1");
  auto u = b->usage("job.5");
  CHECK(u.cpu_s == Approx(2.5));
  CHECK(u.mem_mb == 64);
  CHECK(u.max_mem_mb == 128);
  CHECK(u.failcnt == 4);
  CHECK(u.oom_kills == 2);
  CHECK(b->oom_kills("job.5") == 2);
  CHECK(list_existing(*b) == std::vector<std::uint64_t>{5});
  CHECK(b->procs_files("job.5") == std::vector<std::string>{s + "cgroup.procs"});
}

TEST_CASE("without cpuset and memory the v2 backend says what it cannot enforce; strict refuses", "[node][cgroup]") {
  nodetest::TempDir t;
  fake_tree(t.path, "corral_f", "cpu io pids");
  auto b = make_cgroup_v2("corral_f", t.path);
  CHECK(slurp(t.path + "/cgroup.subtree_control") == "+cpu");
  auto gaps = b->unenforced();
  REQUIRE(gaps.size() == 2);
  CHECK(gaps[0].rfind("cpus: the cpuset controller is not enabled for " + t.path + "/corral_f", 0) == 0);
  CHECK(gaps[1].rfind("memory: the memory controller is not enabled", 0) == 0);
  CHECK(gaps[1].find("offers: cpu io pids") != std::string::npos);
  CHECK_THROWS_WITH(check_enforcement(*b, true), Catch::Contains("refusing to start") && Catch::Contains("cpus: "));
  CHECK(check_enforcement(*b, false).rfind("job limits not enforced on this node: cpus: ", 0) == 0);
  // Limits it cannot enforce are not written (the files would not exist on a real tree).
  b->create("job.5", SlotLimits{{1}, {0}, 64});
  CHECK(slurp(t.path + "/corral_f/job.5/cpuset.cpus").empty());
  CHECK(slurp(t.path + "/corral_f/job.5/memory.max").empty());
}

TEST_CASE("a process's own cgroup v2 path comes from the 0:: line", "[node][cgroup]") {
  CHECK(own_cgroup_v2("12:pids:/x\n0::/system.slice/corrald.service\n") == "/system.slice/corrald.service");
  CHECK(own_cgroup_v2("0::/\n") == "/");
  CHECK(own_cgroup_v2("4:memory:/a\n").empty());
  CHECK(!own_cgroup_v2().empty());  // this process, on a kernel with cgroup2
}

TEST_CASE("a delegated group's processes move into its leaf; slots go beside it (real cgroup2)", "[node][cgroup]") {
  cgtest::Cgroup2Mount m;
  if (!m.ok()) {
    CORRAL_SKIP(m.why);
    return;
  }
  std::string own = "/corral_t_deleg_" + std::to_string(::getpid()), top = m.path + own;
  REQUIRE(::mkdir(top.c_str(), 0755) == 0);
  struct Rm {
    std::string top;
    ~Rm() {
      ::rmdir((top + "/jobs").c_str());
      ::rmdir((top + "/corrald").c_str());
      ::rmdir(top.c_str());
    }
  } rm{top};
  CHECK(!cgroup_delegated(top));
  if (::setxattr(top.c_str(), "trusted.delegate", "1", 1, 0) == 0) CHECK(cgroup_delegated(top));
  Child c;
  REQUIRE(c.pid > 0);
  put(top + "/cgroup.procs", std::to_string(c.pid));
  REQUIRE(slurp(top + "/cgroup.procs") == std::to_string(c.pid) + "\n");
  enter_delegated_leaf(m.path, own);
  CHECK(slurp(top + "/cgroup.procs").empty());
  CHECK(slurp(top + "/corrald/cgroup.procs") == std::to_string(c.pid) + "\n");
  {
    auto b = make_cgroup_v2("jobs", m.path, own);
    CHECK(b->describe() == "v2: " + top + "/jobs");
    b->create("job.9", SlotLimits{});
    CHECK(b->list() == std::vector<std::string>{"job.9"});
    b->destroy("job.9");
    b->remove_parent();
  }
  kill(c.pid, SIGKILL);
  waitpid(c.pid, nullptr, 0);
  c.pid = -1;
}
