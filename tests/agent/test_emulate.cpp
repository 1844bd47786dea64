// The emulated node (corrald --emulate SPEC): its SPEC and run-time directive, its timers on a
// clock the test drives, and whole corrald agents on it, run as an unprivileged user when the
// test is root (it must need no root), scheduling with the real daemon.
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "agent/node/emulated.hpp"
#include "tests/agent/harness.hpp"
#include "tests/effort.hpp"

using corral::node::EmulatedNode;
using corral::node::EmulatedRun;
using corral::node::EndReason;
using corral::node::LaunchSpec;
using Json = nlohmann::json;

namespace {

constexpr int kNobody = 65534;

double wall_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string write_file(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
  ::chmod(path.c_str(), 0644);
  return path;
}

struct Node {
  std::int64_t t = 0;
  std::string dir = harness::make_tmpdir("emulated");
  EmulatedNode node{corral::node::emulated_topology(corral::node::parse_emulate_spec("cores=8,sockets=2"), "emu"),
                    [this] { return t; }};
  ~Node() { std::filesystem::remove_all(dir); }

  LaunchSpec job(std::uint64_t id, const std::string& directive, std::vector<int> cores = {0},
                 std::int64_t walltime_s = 0) {
    LaunchSpec s;
    s.id = id;
    s.argv = {"/bin/sh", write_file(dir + "/" + std::to_string(id), "#!/bin/sh\n" + directive + "\ntrue\n")};
    s.cores = std::move(cores);
    s.walltime_s = walltime_s;
    return s;
  }
};

std::string spec_error(const std::string& text) {
  try {
    corral::node::parse_emulate_spec(text);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

// An agent on an emulated node; corrald runs as nobody when the test is root.
std::unique_ptr<harness::Agent> emulated_agent(const std::string& tag, const std::string& spec,
                                               std::vector<std::string> more = {}) {
  std::vector<std::string> extra = {"--emulate", spec, "--set", "fsync=no"};
  extra.insert(extra.end(), more.begin(), more.end());
  auto a = std::make_unique<harness::Agent>(tag, extra);
  if (::geteuid() == 0) {
    a->uid = kNobody;
    REQUIRE(::chown(a->dir.c_str(), kNobody, kNobody) == 0);
  }
  a->start();
  return a;
}

Json stat_all(const harness::Agent& a) {
  harness::Result r = a.cli({"stat", "--json"});
  REQUIRE(r.rc == 0);
  return Json::parse(r.out);
}

// Waits (up to 120 s) until `n` jobs have ended; returns them by id.
std::map<std::uint64_t, Json> await_ended(const harness::Agent& a, std::size_t n) {
  std::map<std::uint64_t, Json> out;
  for (int i = 0; i < 1200; ++i) {
    out.clear();
    for (const Json& j : stat_all(a))
      if (j["state"] == "ended") out[j["id"].get<std::uint64_t>()] = j;
    if (out.size() >= n) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  REQUIRE(out.size() == n);
  return out;
}

// Waits (up to 20 s) until job `id` is in `state`.
Json await_state(const harness::Agent& a, std::uint64_t id, const std::string& state) {
  Json j;
  for (int i = 0; i < 200; ++i) {
    j = Json::parse(a.cli({"stat", std::to_string(id), "--json"}).out);
    if (j["state"] == state) return j;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  FAIL("job " << id << " never " << state << ": " << j.dump());
  return j;
}

}  // namespace

TEST_CASE("emulate SPEC: the node it describes, and bad SPECs named", "[emulate]") {
  auto s = corral::node::parse_emulate_spec("cores=64,sockets=2,mem=256G,jobfs=1T");
  CHECK(s.cores == 64);
  CHECK(s.sockets == 2);
  CHECK(s.mem_mb == 262144);
  CHECK(s.jobfs_mb == 1048576);
  auto t = corral::node::emulated_topology(s, "n1");
  CHECK(t.cores.size() == 64);
  CHECK(t.packages == 2);
  CHECK(t.numa_nodes == 2);
  CHECK(t.hostname == "n1");
  CHECK(corral::node::describe(t) == "n1: 2 packages, 2 NUMA, 64 cores, 64 PUs, 262144 MB, jobfs 1048576 MB (emulated)");
  CHECK(corral::node::parse_emulate_spec("cores=4").mem_mb == 4 * 4096);  // 4 GB a core by default

  CHECK(spec_error("") == "emulate '': empty (e.g. cores=64,sockets=2,mem=256G,jobfs=1T)");
  CHECK(spec_error("sockets=2") == "emulate 'sockets=2': cores is required (e.g. cores=64)");
  CHECK(spec_error("cores=0") == "emulate 'cores=0': cores: expected 1 to 65536, got '0'");
  CHECK(spec_error("cores=-4") == "emulate 'cores=-4': cores: expected 1 to 65536, got '-4'");
  CHECK(spec_error("cores=64,gpus=4") == "emulate 'cores=64,gpus=4': unknown key 'gpus' (keys: cores, sockets, mem, jobfs)");
  CHECK(spec_error("cores=64,mem=12zb") ==
        "emulate 'cores=64,mem=12zb': mem: unparsable size '12zb' (unknown unit 'zb'; use b, kb, mb, gb, tb)");
  CHECK(spec_error("cores=64,jobfs=0") == "emulate 'cores=64,jobfs=0': jobfs: size must be positive, got '0'");
  CHECK(spec_error("cores=64,sockets=3") == "emulate 'cores=64,sockets=3': 64 cores do not split evenly into 3 sockets");
  CHECK(spec_error("cores=64,cores=8") == "emulate 'cores=64,cores=8': cores given twice");
  CHECK(spec_error("cores") == "emulate 'cores': 'cores' is not KEY=VALUE (keys: cores, sockets, mem, jobfs)");
  CHECK(spec_error("cores=64,") == "emulate 'cores=64,': trailing ','");
}

TEST_CASE("#CORRAL_EMULATE: the run time and exit code a script states", "[emulate]") {
  EmulatedRun r;
  CHECK(corral::node::parse_emulated_run("#!/bin/sh\n#CORRAL -l ncpus=2\n#CORRAL_EMULATE runtime=90s exit=3\necho\n", r).empty());
  CHECK(r.runtime_ms == 90000);
  CHECK(r.exit_code == 3);
  r = {};
  CHECK(corral::node::parse_emulated_run("#CORRAL_EMULATE runtime=250ms\n", r).empty());
  CHECK(r.runtime_ms == 250);
  r = {};
  CHECK(corral::node::parse_emulated_run("echo first\n#CORRAL_EMULATE runtime=1h\n", r).empty());
  CHECK(r.runtime_ms == 0);  // after the first command: not a directive
  CHECK(corral::node::parse_emulated_run("#CORRAL_EMULATE runtime=soon\n", r) ==
        "#CORRAL_EMULATE: runtime: expected 250ms or a duration (3600, 90s, 30m, 12h, 7d or 2w), got 'soon'");
  CHECK(corral::node::parse_emulated_run("#CORRAL_EMULATE exit=256\n", r) ==
        "#CORRAL_EMULATE: exit: expected 0 to 255, got '256'");
  CHECK(corral::node::parse_emulated_run("#CORRAL_EMULATE sleep=4\n", r) ==
        "#CORRAL_EMULATE: unexpected 'sleep=4' (expected runtime=DURATION exit=CODE)");
}

TEST_CASE("emulated timers: run time, exit, walltime, suspend, cancel, checkpoint", "[emulate]") {
  Node n;
  REQUIRE(n.node.start(n.job(1, "#CORRAL_EMULATE runtime=500ms", {0})).empty());
  REQUIRE(n.node.start(n.job(2, "#CORRAL_EMULATE runtime=100ms exit=3", {1})).empty());
  REQUIRE(n.node.start(n.job(3, "#CORRAL_EMULATE runtime=5s", {2}, 1)).empty());
  REQUIRE(n.node.start(n.job(4, "", {3})).empty());  // no directive: ends at once, exit 0
  CHECK(n.node.start(n.job(5, "", {0})) == "job 5: core 0 is held by a running job");
  CHECK(n.node.start(n.job(6, "", {8})) == "job 6: core 8 is not on this node (8 cores)");
  CHECK(n.node.start(n.job(7, "#CORRAL_EMULATE runtime=x", {4})).find("job 7: #CORRAL_EMULATE: runtime:") == 0);
  CHECK(n.node.start(n.job(1, "", {5})) == "job 1 is already running here");

  auto ends = n.node.poll(0);
  REQUIRE(ends.size() == 1);
  CHECK(ends[0].id == 4);
  CHECK(ends[0].reason == EndReason::Completed);
  n.t = 99;
  CHECK(n.node.poll(99).empty());
  ends = n.node.poll(100);
  REQUIRE(ends.size() == 1);
  CHECK(ends[0].reason == EndReason::Failed);
  CHECK(ends[0].exit_code == 3);

  // Suspended from 200 to 1200 ms: 1 s later than its 500 ms.
  n.t = 200;
  REQUIRE(n.node.suspend(1).empty());
  CHECK(n.node.usage(1)->suspended);
  n.t = 1200;
  ends = n.node.poll(1200);  // job 3: 5 s of run time, ended at its walltime (1 s)
  REQUIRE(ends.size() == 1);
  CHECK(ends[0].id == 3);
  CHECK(ends[0].reason == EndReason::Walltime);
  REQUIRE(n.node.resume(1).empty());
  CHECK(n.node.usage(1)->walltime_used_ms == 200);
  CHECK(n.node.poll(1499).empty());
  ends = n.node.poll(1500);
  REQUIRE(ends.size() == 1);
  CHECK(ends[0].id == 1);
  CHECK(ends[0].message == "completed (exit 0)");
  CHECK(n.node.jobs().empty());

  // The walltime's end: just past it, as the Launcher sees it.
  n.t = 2000;
  REQUIRE(n.node.start(n.job(3, "#CORRAL_EMULATE runtime=5s", {2}, 1)).empty());
  CHECK(n.node.poll(3000).empty());
  ends = n.node.poll(3001);
  REQUIRE(ends.size() == 1);
  CHECK(ends[0].reason == EndReason::Walltime);
  CHECK(ends[0].message.find("killed: walltime 1 s exceeded") == 0);

  // Cancel ends at once; checkpoint keeps the run time so far for the restart.
  n.t = 3001;
  REQUIRE(n.node.start(n.job(8, "#CORRAL_EMULATE runtime=1h", {0})).empty());
  REQUIRE(n.node.start(n.job(9, "#CORRAL_EMULATE runtime=1s", {1})).empty());
  n.t = 3300;
  REQUIRE(n.node.cancel(8).empty());
  REQUIRE(n.node.checkpoint(9).empty());
  ends = n.node.poll(3300);
  REQUIRE(ends.size() == 2);
  CHECK(ends[0].reason == EndReason::Cancelled);
  CHECK(ends[1].reason == EndReason::Checkpointed);
  LaunchSpec again = n.job(9, "#CORRAL_EMULATE runtime=1s", {1});
  again.restart = true;
  REQUIRE(n.node.start(again).empty());
  CHECK(n.node.poll(4000).empty());
  CHECK(n.node.poll(4001).size() == 1);  // 1 s minus the 299 ms done before the checkpoint
  CHECK(n.node.cancel(9) == "no job 9 here");
}

TEST_CASE("emulated timers wake the daemon's loop at their end", "[emulate]") {
  auto topo = corral::node::emulated_topology(corral::node::parse_emulate_spec("cores=2"), "emu");
  EmulatedNode node(topo);
  std::string dir = harness::make_tmpdir("emulated-wake");
  LaunchSpec s;
  s.id = 1;
  s.argv = {write_file(dir + "/job", "#CORRAL_EMULATE runtime=200ms\n")};
  s.cores = {0};
  const auto t0 = std::chrono::steady_clock::now();
  REQUIRE(node.start(s).empty());
  pollfd p{node.wake_fd(), POLLIN, 0};
  REQUIRE(::poll(&p, 1, 5000) == 1);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
  CHECK(ms >= 199);
  auto ends = node.poll();
  REQUIRE(ends.size() == 1);
  CHECK(ends[0].reason == EndReason::Completed);
  p.revents = 0;
  CHECK(::poll(&p, 1, 0) == 0);  // drained, and no timer left
  std::filesystem::remove_all(dir);
}

TEST_CASE("corrald refuses a bad --emulate SPEC, naming the bad part", "[emulate]") {
  const std::string corrald = harness::env_or("CORRALD", "build/agent/corrald");
  for (const auto& [spec, why] : std::vector<std::pair<std::string, std::string>>{
           {"cores=64,sockets=2,mem=lots", "corrald: emulate 'cores=64,sockets=2,mem=lots': mem: unparsable size 'lots'"},
           {"cores=0", "corrald: emulate 'cores=0': cores: expected 1 to 65536, got '0'"},
           {"cpus=64", "corrald: emulate 'cpus=64': unknown key 'cpus' (keys: cores, sockets, mem, jobfs)"}}) {
    harness::Result r = harness::run({corrald, "--no-config", "--emulate", spec, "--state-dir", "/nonexistent/x"});
    CHECK(r.rc == 2);
    CHECK(r.err.rfind(why, 0) == 0);
  }
}

TEST_CASE("an emulated 64-core node runs 200 jobs (60 with the sanitizers) as the real agent schedules them",
          "[emulate]") {
  // fcfs, and a scheduling pass every 30 s unless an event calls for one: a start that waits for
  // the pass timer instead of the end (or submit) that made room would show.
  auto a = emulated_agent("emulate200", "cores=64,sockets=2,mem=256G,jobfs=1T",
                          {"--policy", "fcfs", "--set", "cycle_interval=30"});
  harness::Result node = a->cli({"node"});
  REQUIRE(node.rc == 0);
  CHECK(node.out.find("64 cores, 64 PUs, 262144 MB, jobfs 1048576 MB (emulated)") != std::string::npos);
  CHECK(node.out.find("slots     0 of 64 cores busy") != std::string::npos);
  if (a->uid >= 0)  // needs no root: corrald runs as nobody
    CHECK(harness::slurp("/proc/" + std::to_string(a->pid) + "/status").find("\nUid:\t65534\t65534\t65534\t65534\n") !=
          std::string::npos);

  const int kJobs = corral_test::scaled(200, 60);  // the sanitizer build runs fewer (tests/effort.hpp)
  std::map<std::uint64_t, std::int64_t> runtime_ms;
  std::map<std::uint64_t, int> ncpus;
  for (int i = 0; i < kJobs; ++i) {
    const int cpus = std::vector<int>{1, 2, 4, 8, 16}[static_cast<std::size_t>(i % 5)];
    const std::int64_t rt = 100 + (i * 37) % 300;
    const std::string script = a->dir + "/work/job" + std::to_string(i) + ".sh";
    write_file(script, "#!/bin/sh\n#CORRAL_EMULATE runtime=" + std::to_string(rt) + "ms\nsleep 1000\n");
    harness::Result r = a->submit({"-l", "ncpus=" + std::to_string(cpus), script}, a->uid);
    REQUIRE(r.rc == 0);
    const std::uint64_t id = std::stoull(r.out);
    runtime_ms[id] = rt;
    ncpus[id] = cpus;
  }
  auto ended = await_ended(*a, kJobs);

  std::vector<Json> jobs;
  for (auto& [id, j] : ended) {
    CHECK(j["end_reason"] == "completed");
    CHECK(j["exit_code"] == 0);
    CHECK(j["cores"].size() == static_cast<std::size_t>(ncpus.at(id)));
    const double ran = j["end_time"].get<double>() - j["start_time"].get<double>();
    // start_time is stamped once the start has returned, a few ms after the timer was armed
    // (more under the sanitizers): the job may look that much shorter, never more.
    CHECK(ran >= runtime_ms.at(id) / 1000.0 - 0.020);
    CHECK(ran < runtime_ms.at(id) / 1000.0 + 2.0);
    jobs.push_back(j);
  }
  // Cores: no core held by two jobs at once, never more than 64 busy.
  std::vector<double> ends;
  for (const Json& j : jobs) ends.push_back(j["end_time"].get<double>());
  std::sort(ends.begin(), ends.end());
  for (const Json& j : jobs) {
    const double s = j["start_time"].get<double>();
    int busy = 0;
    std::set<int> held;
    for (const Json& k : jobs) {
      if (k["start_time"].get<double>() > s || k["end_time"].get<double>() <= s) continue;
      busy += static_cast<int>(k["cores"].size());
      for (int c : k["cores"]) CHECK(held.insert(c).second);
    }
    CHECK(busy <= 64);
  }
  // fcfs: in submit order; each start soon after the event that let it start (its submit, the
  // start before it, or the end that freed its cores), never after the 30 s pass timer.
  double prev_start = 0;
  for (auto& [id, j] : ended) {
    const double s = j["start_time"].get<double>();
    CHECK(s >= prev_start);
    double cause = std::max(prev_start, j["submit_time"].get<double>());
    auto e = std::upper_bound(ends.begin(), ends.end(), s);
    if (e != ends.begin()) cause = std::max(cause, *(e - 1));
    CHECK(s - cause < 2.0);
    prev_start = s;
  }
}

TEST_CASE("emulated jobs: walltime, cancel, suspend and checkpoint act on the timers", "[emulate]") {
  auto a = emulated_agent("emulate-ctl", "cores=4", {"--set", "poll_interval=30"});
  const std::string dir = a->dir + "/work/";
  write_file(dir + "long.sh", "#CORRAL_EMULATE runtime=1h\n");
  write_file(dir + "six.sh", "#CORRAL_EMULATE runtime=6s\n");
  write_file(dir + "fails.sh", "#CORRAL_EMULATE runtime=10ms exit=7\n");
  auto submit = [&](std::vector<std::string> args) {
    harness::Result r = a->submit(args, a->uid);
    REQUIRE(r.rc == 0);
    return std::stoull(r.out);
  };
  const auto over = submit({"-l", "walltime=1", dir + "long.sh"});
  const auto cancelled = submit({dir + "long.sh"});
  const auto suspended = submit({dir + "six.sh"});
  const auto failed = submit({dir + "fails.sh"});
  Json j = await_state(*a, over, "ended");
  CHECK(j["end_reason"] == "walltime");
  const double ran = j["end_time"].get<double>() - j["start_time"].get<double>();
  CHECK(ran >= 1.0);
  CHECK(ran < 3.0);
  j = await_state(*a, failed, "ended");
  CHECK(j["end_reason"] == "failed");
  CHECK(j["exit_code"] == 7);

  await_state(*a, cancelled, "running");
  REQUIRE(a->cli({"cancel", std::to_string(cancelled)}, a->uid).rc == 0);
  j = await_state(*a, cancelled, "ended");
  CHECK(j["end_reason"] == "cancelled");

  // Suspended, its timer stops: it ends 6 s of running after its start, plus the suspension (6 s:
  // still running when the steps above end on a loaded machine).
  await_state(*a, suspended, "running");
  REQUIRE(a->cli({"suspend", std::to_string(suspended)}).rc == 0);
  await_state(*a, suspended, "suspended");
  const auto t0 = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(2500)) {
    CHECK(Json::parse(a->cli({"stat", std::to_string(suspended), "--json"}).out)["state"] == "suspended");
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  REQUIRE(a->cli({"resume", std::to_string(suspended)}).rc == 0);
  j = await_state(*a, suspended, "ended");
  CHECK(j["end_reason"] == "completed");
  CHECK(j["end_time"].get<double>() - j["start_time"].get<double>() >= 6.0 + j["suspended_seconds"].get<double>() - 0.01);
  CHECK(j["suspended_seconds"].get<double>() >= 2.5);

  // Checkpointed, it is requeued, restarts and finishes the time it had left.
  write_file(dir + "three.sh", "#CORRAL_EMULATE runtime=3s\n");
  const auto ckpt = submit({dir + "three.sh"});
  j = await_state(*a, ckpt, "running");
  const double started = j["start_time"].get<double>();
  while (wall_seconds() < started + 1.5) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  REQUIRE(a->cli({"checkpoint", std::to_string(ckpt)}, a->uid).rc == 0);
  j = await_state(*a, ckpt, "ended");
  CHECK(j["end_reason"] == "completed");
  REQUIRE(j["runs"].size() == 2);
  CHECK(j["runs"][0]["comment"].get<std::string>().rfind("checkpointed: ", 0) == 0);
  // Its second run had only the time left: both runs together about its 3 s (not 4.5 s).
  double total = 0;
  for (const Json& r : j["runs"]) total += r["end"].get<double>() - r["start"].get<double>();
  CHECK(total >= 3.0 - 0.01);
  CHECK(total < 4.0);
}

TEST_CASE("several emulated agents on one machine, each its own node", "[emulate]") {
  auto a = emulated_agent("emulate-a", "cores=16", {"--set", "node_name=emu-a"});
  auto b = emulated_agent("emulate-b", "cores=32,sockets=2", {"--set", "node_name=emu-b"});
  harness::Result na = a->cli({"node"}), nb = b->cli({"node"});
  CHECK(na.out.find("emu-a: 1 package, 1 NUMA, 16 cores") != std::string::npos);
  CHECK(nb.out.find("emu-b: 2 packages, 2 NUMA, 32 cores") != std::string::npos);
  write_file(a->dir + "/work/j.sh", "#CORRAL_EMULATE runtime=10ms\n");
  write_file(b->dir + "/work/j.sh", "#CORRAL_EMULATE runtime=10ms\n");
  REQUIRE(a->submit({"-l", "ncpus=16", a->dir + "/work/j.sh"}, a->uid).rc == 0);
  REQUIRE(b->submit({"-l", "ncpus=32", b->dir + "/work/j.sh"}, b->uid).rc == 0);
  CHECK(await_ended(*a, 1).begin()->second["end_reason"] == "completed");
  CHECK(await_ended(*b, 1).begin()->second["end_reason"] == "completed");
  CHECK(b->submit({"-l", "ncpus=33", b->dir + "/work/j.sh"}, b->uid).err.find("exceeds this node's 32 cores") !=
        std::string::npos);
}
