// The cgroup v1 backend on the real hierarchy: create a slot, pin, limit, freeze, kill, list, remove.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include "agent/node/cgroup.hpp"
#include "helpers.hpp"

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

TEST_CASE("bad slot limits are refused with a message and leave nothing", "[node][cgroup]") {
  if (!nodetest::need_cgroups()) return;
  nodetest::CgroupGuard guard("corral_t_cgroup2");
  auto b = make_cgroup_v1("corral_t_cgroup2");
  CHECK_THROWS_WITH(b->create("job.1", SlotLimits{{9999}, {}, 0}), Catch::Contains("not all available"));
  CHECK(b->list().empty());
  CHECK_THROWS_AS(b->create("../escape", SlotLimits{}), CgroupError);
  CHECK_THROWS_AS(make_cgroup_v1("/abs"), CgroupError);
}

TEST_CASE("the cgroup v2 backend freezes, kills and lists (hybrid: limits may stay on v1)", "[node][cgroup]") {
  std::string why;
  if (!cgroup_v2_available(&why)) {
    CORRAL_SKIP(why);
    return;
  }
  auto b = make_cgroup_v2("corral_t_v2");
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
  if (!b->limitations().empty()) WARN("v2 here: " << b->limitations());
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
