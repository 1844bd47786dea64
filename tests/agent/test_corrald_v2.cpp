// corrald on cgroup v2 as systemd starts it with Delegate=yes: in a group marked delegated
// (trusted.delegate, as systemd marks it), it moves itself into the leaf <group>/corrald and makes
// the jobs' groups inside its own subtree. And the start check: strict = yes refuses a node that
// cannot enforce cpus or memory, saying why; without it corrald warns once.
#include <sys/stat.h>
#include <sys/xattr.h>

#include <catch2/catch.hpp>

#include "cgroup2.hpp"
#include "harness.hpp"

using harness::Agent;
using harness::trim;

namespace {

// A group as systemd makes a Delegate=yes service's: <mount>/<top>/corrald.service, marked.
struct DelegatedGroup {
  std::string mount, top, base;  // base: the service's group path under the mount
  std::string why;
  DelegatedGroup(const std::string& m, const std::string& tag) : mount(m) {
    top = "/corral-test-" + tag + "-" + std::to_string(::getpid());
    base = top + "/corrald.service";
    ::mkdir((mount + top).c_str(), 0755);
    ::mkdir((mount + base).c_str(), 0755);
    if (::setxattr((mount + base).c_str(), "trusted.delegate", "1", 1, 0) != 0)
      why = "cannot set trusted.delegate on a cgroup here: " + std::string(std::strerror(errno));
  }
  ~DelegatedGroup() {
    // The agent has stopped; its shepherd server leaves the leaf once it notices.
    for (int i = 0; i < 500 && ::rmdir((mount + base + "/corrald").c_str()) != 0 && errno == EBUSY; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    ::rmdir((mount + base).c_str());
    ::rmdir((mount + top).c_str());
  }
};

std::string cgroup_of(pid_t pid) {
  std::string cg = harness::slurp("/proc/" + std::to_string(pid) + "/cgroup");
  std::size_t p = cg.find("0::");
  return p == std::string::npos ? "" : trim(cg.substr(p + 3, cg.find('\n', p) - p - 3));
}

}  // namespace

TEST_CASE("under Delegate=yes corrald moves into a leaf and runs jobs inside its own subtree", "[agent][v2]") {
  std::string why;
  cgtest::Cgroup2Mount m;
  if (!m.ok() || !corral::node::cgroup_v2_available(&why)) {
    CORRAL_SKIP(m.ok() ? why : m.why);
    return;
  }
  DelegatedGroup g(m.path, "deleg");
  if (!g.why.empty()) {
    CORRAL_SKIP(g.why);
    return;
  }
  {
    Agent a("deleg", {"--set", "cgroup=v2"});
    a.cgbase = g.base;
    a.start_in = m.path + g.base + "/cgroup.procs";
    a.start();
    CHECK(cgroup_of(a.pid) == g.base + "/corrald");
    CHECK(trim(harness::slurp(m.path + g.base + "/cgroup.procs")).empty());  // an inner node now
    CHECK(a.log().find("cgroups v2: ") != std::string::npos);
    CHECK(a.log().find("delegated " + g.base) != std::string::npos);
    auto s = a.submit({"-l", "walltime=60", "--wrap", "cat /proc/self/cgroup"});
    REQUIRE(s.rc == 0);
    std::string id = trim(s.out);
    auto w = a.cli({"wait", id});
    INFO(w.err << a.log());
    CHECK(w.rc == 0);
    std::string out = harness::wait_file(a.dir + "/work/wrap.o" + id);
    CHECK(out.find("0::" + g.base + "/" + a.cgparent + "/job." + id + "\n") != std::string::npos);
    a.stop(SIGTERM);
    CHECK(harness::leftovers(a) == "");
  }
}

TEST_CASE("strict = yes refuses a node that cannot enforce cpus or memory; otherwise one warning", "[agent][v2]") {
  std::string why;
  if (::geteuid() != 0 || !corral::node::cgroup_v2_available(&why)) {
    CORRAL_SKIP(::geteuid() != 0 ? "needs root" : why);
    return;
  }
  std::string gaps;
  {
    auto probe = corral::node::make_cgroup_v2("corral-test-strictprobe-" + std::to_string(::getpid()));
    for (const auto& x : probe->unenforced()) gaps += x + "\n";
    probe->remove_parent();
  }
  Agent strict("strict", {"--set", "cgroup=v2", "--set", "strict=yes"});
  Agent nci("strictnci", {"--set", "cgroup=v2", "--set", "nci=yes"});
  Agent lax("lax", {"--set", "cgroup=v2"});
  if (gaps.empty()) {  // a v2 with cpuset and memory: every mode starts, no warning
    strict.start();
    lax.start();
    CHECK(lax.log().find("not enforced") == std::string::npos);
    return;
  }
  for (Agent* a : {&strict, &nci}) {
    std::string err;
    try {
      a->start();
    } catch (const std::exception& e) {
      err = e.what();
    }
    INFO(err);
    CHECK(err.find("refusing to start with strict = yes or nci = yes") != std::string::npos);
    CHECK(err.find(gaps.find("cpus:") != std::string::npos ? "cpus: " : "memory: ") != std::string::npos);
  }
  lax.start();
  std::string log = lax.log();
  std::size_t first = log.find("warning: job limits not enforced on this node: ");
  CHECK(first != std::string::npos);
  CHECK(log.find("warning: job limits not enforced", first + 1) == std::string::npos);
}
