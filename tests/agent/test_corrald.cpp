// End-to-end: a real corrald --standalone, the real corral binary.
#include <catch2/catch.hpp>

#include <sys/socket.h>
#include <sys/un.h>

#include <cstdio>
#include <fstream>

#include <set>

#include "harness.hpp"
#include "harness_proto.hpp"
#include "proto/proto.hpp"

using harness::Agent;
using harness::json_field;
using harness::stat_json;
using harness::trim;

namespace {
constexpr int kNobody = 65534;
constexpr int kOther = 65533;  // a second unprivileged uid (no passwd entry needed)
}  // namespace

TEST_CASE("submit, wait, stat: a job runs as its user with its exit code", "[agent]") {
  SKIP_UNLESS_ROOT();
  Agent a("run");
  a.start();
  auto s = a.submit({"-N", "hello", "-l", "walltime=00:01:00,ncpus=1,mem=64mb", "--wrap",
                     "echo out-$CORRAL_JOBID; echo env=$MYVAR; pwd; id -u; exit 3"},
                    -1);
  INFO(s.err << a.log());
  REQUIRE(s.rc == 0);
  std::string id = trim(s.out);
  REQUIRE(id == "1");  // the id alone on stdout
  auto w = a.cli({"wait", id});
  INFO(w.err << a.log());
  CHECK(w.rc == 3);
  std::string js = stat_json(a, id);
  CHECK(json_field(js, "id") == "1");
  CHECK(json_field(js, "state") == "ended");
  CHECK(json_field(js, "exit_code") == "3");
  CHECK(json_field(js, "end_reason") == "failed");
  CHECK(json_field(js, "name") == "hello");
  std::string out = harness::slurp(a.dir + "/work/hello.o1");
  CHECK(out.find("out-1") != std::string::npos);
  CHECK(out.find(a.dir + "/work") != std::string::npos);  // the submitter's cwd

  // A non-root user: the job keeps the submitter's environment and runs as them.
  auto s2 = harness::run({a.corral(), "submit", "-o", "mine.out", "--wrap", "echo env=$MYVAR; id -u"},
                         kNobody, a.dir + "/work",
                         {"CORRAL_SOCKET=" + a.socket, "MYVAR=kept"});
  INFO(s2.err);
  REQUIRE(s2.rc == 0);
  auto w2 = a.cli({"wait", trim(s2.out)}, kNobody);
  CHECK(w2.rc == 0);
  std::string out2 = harness::slurp(a.dir + "/work/mine.out");
  CHECK(out2.find("env=kept") != std::string::npos);
  CHECK(out2.find(std::to_string(kNobody)) != std::string::npos);
  std::string js2 = stat_json(a, trim(s2.out));
  CHECK(json_field(js2, "end_reason") == "completed");
  CHECK(json_field(js2, "user") == "nobody");

  // node: topology, slots, recent ends with reasons.
  auto n = a.cli({"node", "--json"});
  REQUIRE(n.rc == 0);
  CHECK(n.out.find("\"slots_total\":") != std::string::npos);
  CHECK(n.out.find("\"end_reason\":\"failed\"") != std::string::npos);
  auto nh = a.cli({"node"});
  CHECK(nh.rc == 0);
  CHECK(nh.out.find("recent ends") != std::string::npos);
}

TEST_CASE("cancel: owners and root only; a cancelled job ends with its reason", "[agent]") {
  SKIP_UNLESS_ROOT();
  Agent a("cancel");
  a.start();
  auto s = a.submit({"-l", "walltime=600", "--wrap", "sleep 300"}, kNobody);
  REQUIRE(s.rc == 0);
  std::string id = trim(s.out);
  auto r = a.submit({"--wrap", "sleep 300"});  // root's job
  REQUIRE(r.rc == 0);
  std::string rid = trim(r.out);

  auto other = a.cli({"cancel", id}, kOther);
  CHECK(other.rc != 0);
  CHECK(other.err.find("belongs to nobody") != std::string::npos);
  auto nb = a.cli({"cancel", rid}, kNobody);
  CHECK(nb.rc != 0);
  CHECK(nb.err.find("belongs to root") != std::string::npos);
  CHECK(json_field(stat_json(a, id), "state") != "ended");

  auto own = a.cli({"cancel", id}, kNobody);
  INFO(own.err << a.log());
  CHECK(own.rc == 0);
  auto w = a.cli({"wait", id});
  CHECK(w.rc != 0);
  std::string js = stat_json(a, id);
  CHECK(json_field(js, "state") == "ended");
  CHECK(json_field(js, "end_reason") == "cancelled");
  auto rc = a.cli({"cancel", rid});  // root may cancel anyone's
  CHECK(rc.rc == 0);
  a.cli({"wait", rid});
  CHECK(json_field(stat_json(a, rid), "end_reason") == "cancelled");
}

TEST_CASE("bad input: clear errors, non-zero exits, nothing lost", "[agent]") {
  SKIP_UNLESS_ROOT();
  Agent a("bad");
  a.start();
  auto ok = a.submit({"-l", "walltime=600", "--wrap", "sleep 300"});
  REQUIRE(ok.rc == 0);
  struct Case {
    std::vector<std::string> args;
    std::string msg;
  };
  std::vector<Case> cases = {
      {{"--bogus", "--wrap", "true"}, "unknown option"},
      {{"-x", "--wrap", "true"}, "unknown option"},
      {{"-l", "walltime=abc", "--wrap", "true"}, "invalid walltime"},
      {{"-l", "walltime=1:99:00", "--wrap", "true"}, "below 60"},
      {{"-l", "ncpus=", "--wrap", "true"}, "empty value"},
      {{"-l", "ncpus", "--wrap", "true"}, "no value"},
      {{"-l", "ncpus=0", "--wrap", "true"}, "invalid ncpus"},
      {{"-l", "mem=4xb", "--wrap", "true"}, "unparsable size"},
      {{"-l", "mem=lots", "--wrap", "true"}, "unparsable size"},
      {{"-l", "gpus=2", "--wrap", "true"}, "unknown resource"},
      {{"-l"}, "needs a value"},
      {{"-R", "maybe", "--wrap", "true"}, "-R takes y or n"},
      {{}, "missing job script"},
      {{"/nonexistent/job.sh"}, "cannot read script"},
      {{"-l", "ncpus=4096", "--wrap", "true"}, "exceeds this node"},
      {{"-q", "nosuchq", "--wrap", "true"}, "unknown queue"},
  };
  for (const auto& c : cases) {
    auto r = a.submit(c.args);
    INFO("args: " << (c.args.empty() ? "" : c.args[0]) << " err: " << r.err);
    CHECK(r.rc != 0);
    CHECK(r.err.find(c.msg) != std::string::npos);
    CHECK(r.out.empty());
  }
  auto u1 = a.cli({"stat", "999"});
  CHECK(u1.rc != 0);
  CHECK(u1.err.find("unknown job id 999") != std::string::npos);
  auto u2 = a.cli({"cancel", "999"});
  CHECK(u2.rc != 0);
  CHECK(u2.err.find("unknown job id") != std::string::npos);
  auto u3 = a.cli({"wait", "abc"});
  CHECK(u3.rc == 2);
  CHECK(u3.err.find("invalid job id") != std::string::npos);
  auto u4 = a.cli({"stat", "--frobnicate"});
  CHECK(u4.rc == 2);

  // Garbage and a wrong protocol version straight at the socket: refused, the
  // daemon lives on.
  {
    int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", a.socket.c_str());
    REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
    std::string junk = corral::proto::frame("hello");
    REQUIRE(::write(fd, junk.data(), junk.size()) == static_cast<ssize_t>(junk.size()));
    std::string reply;
    char b[4096];
    ssize_t n;
    while ((n = ::read(fd, b, sizeof b)) > 0) reply.append(b, static_cast<std::size_t>(n));
    ::close(fd);
    REQUIRE(reply.size() > 4);
    auto m = corral::proto::decode(reply.substr(4));
    REQUIRE(std::holds_alternative<corral::proto::ErrorRep>(m));
    CHECK(std::get<corral::proto::ErrorRep>(m).message.find("not a Corral message") != std::string::npos);
  }
  CHECK(a.cli({"node"}).rc == 0);  // still serving
  // Every job is still there: one (the good one).
  auto all = a.cli({"stat", "--json"});
  REQUIRE(all.rc == 0);
  CHECK(json_field(all.out, "id") == "1");
  CHECK(all.out.find("\"id\":2") == std::string::npos);
  a.cli({"cancel", "1"});
}

TEST_CASE("SIGKILL and restart: pending jobs kept, running job adopted", "[agent]") {
  SKIP_UNLESS_ROOT();
  Agent a("restart");
  a.start();
  // One job takes every core; the others wait.
  auto n = a.cli({"node", "--json"});
  std::string cores = json_field(n.out, "slots_total");
  auto big = a.submit({"-l", "ncpus=" + cores + ",walltime=600", "--wrap", "sleep 300"});
  REQUIRE(big.rc == 0);
  std::vector<std::string> ids;
  for (int i = 0; i < 3; ++i) {
    auto s = a.submit({"-N", "p" + std::to_string(i), "--wrap", "echo done-" + std::to_string(i)});
    REQUIRE(s.rc == 0);
    ids.push_back(trim(s.out));
  }
  // Wait until the big one runs.
  harness::wait_state(a, "1", "running", 2000);
  REQUIRE(json_field(stat_json(a, "1"), "state") == "running");
  for (const auto& id : ids) CHECK(json_field(stat_json(a, id), "state") == "pending");

  auto old_server = harness::children_of(a.pid);  // the shepherd server, parent of job 1
  REQUIRE(old_server.size() == 1);
  a.stop(SIGKILL);
  a.start();
  INFO(a.log());
  CHECK(json_field(stat_json(a, "1"), "state") == "running");  // adopted
  for (const auto& id : ids) CHECK(json_field(stat_json(a, id), "state") == "pending");
  // Ids continue after the restart.
  auto s = a.submit({"--wrap", "true"});
  CHECK(trim(s.out) == "5");

  REQUIRE(a.cli({"cancel", "1"}).rc == 0);
  for (const auto& id : ids) {
    auto w = a.cli({"wait", id});
    CHECK(w.rc == 0);
  }
  CHECK(a.cli({"wait", "5"}).rc == 0);
  CHECK(harness::slurp(a.dir + "/work/p2.o4").find("done-2") != std::string::npos);
  // Nothing left before the harness sweeps: no slot group under the test's parent, no process
  // in one, and the killed agent's shepherd server gone with its last job.
  CHECK(harness::leftovers(a, old_server) == "");
}

TEST_CASE("ZeroMQ subscriber gets numbered job events", "[agent]") {
  SKIP_UNLESS_ROOT();
  Agent a("pub", {"--set", "heartbeat_interval=0.2", "--set", "usage_interval=0.3", "--set", "poll_interval=0.2"});
  a.start();
  harness::Events ev(a);
  auto& got = ev.got;
  auto find = [&](const std::string& kind, std::uint64_t job) { return ev.find(kind, job); };
  auto await = [&](const std::string& kind, std::uint64_t job) { return ev.await(kind, job); };

  // A running job, suspended, resumed (usage sampled meanwhile), requeued, cancelled.
  auto l = a.submit({"-N", "long", "-l", "ncpus=1,walltime=600", "--wrap", "sleep 300"});
  REQUIRE(l.rc == 0);
  std::uint64_t lid = std::stoull(trim(l.out));
  REQUIRE(harness::wait_state(a, trim(l.out), "running") == "running");
  REQUIRE(await("started", lid));
  REQUIRE(a.cli({"suspend", trim(l.out)}).rc == 0);
  REQUIRE(a.cli({"resume", trim(l.out)}).rc == 0);
  const corral::proto::Event* u = await("usage", lid);
  REQUIRE(u);
  CHECK(u->cpu_seconds >= 0);
  CHECK(!u->cores.empty());
  REQUIRE(a.cli({"requeue", trim(l.out)}).rc == 0);
  const corral::proto::Event* rq = await("requeued", lid);
  REQUIRE(rq);
  CHECK(rq->end_reason == "preempted");  // the run's end; the job waits again
  CHECK(rq->run == 1);
  CHECK(rq->start_time > 0);
  CHECK(rq->reason.find("requeued") != std::string::npos);
  REQUIRE(harness::wait_state(a, trim(l.out), "running") == "running");
  REQUIRE(a.cli({"cancel", trim(l.out)}).rc == 0);

  auto s = a.submit({"--wrap", "exit 7"});
  REQUIRE(s.rc == 0);
  std::uint64_t sid = std::stoull(trim(s.out));
  REQUIRE(a.cli({"wait", trim(s.out)}).rc == 7);
  const corral::proto::Event* end = await("ended", sid);
  REQUIRE(end);
  CHECK(end->exit_code == 7);
  CHECK(end->reason == "failed");
  CHECK(end->end_reason == "failed");
  CHECK(end->run == 1);

  const corral::proto::Event* sus = find("suspended", lid);
  const corral::proto::Event* res = find("resumed", lid);
  REQUIRE(sus);
  REQUIRE(res);
  CHECK(sus->seq < res->seq);
  CHECK(!sus->cores.empty());
  CHECK(sus->reason.find("suspended by root") != std::string::npos);
  CHECK(res->reason.find("resumed by root") != std::string::npos);
  const corral::proto::Event* lend = find("ended", lid);
  REQUIRE(lend);
  CHECK(lend->reason == "cancelled");
  CHECK(lend->run == 2);
  CHECK(find("submitted", lid)->seq < find("started", lid)->seq);
  std::set<std::string> kinds;
  for (std::size_t i = 1; i < got.size(); ++i) CHECK(got[i].seq == got[i - 1].seq + 1);  // no gap
  for (const auto& e : got) {
    kinds.insert(e.kind);
    CHECK(e.boot == got.front().boot);
  }
  for (const char* k : {"heartbeat", "submitted", "started", "suspended", "resumed", "usage", "requeued", "ended"}) {
    INFO("kind " << k);
    CHECK(kinds.count(k));
  }
}

TEST_CASE("a job that ends while corrald is down keeps its real exit code", "[agent]") {
  SKIP_UNLESS_ROOT();
  Agent a("downend");
  a.start();
  auto s = a.submit({"--wrap", "echo $$ > downend.pid; sleep 1; exit 5"});
  REQUIRE(s.rc == 0);
  std::string id = trim(s.out);
  harness::wait_state(a, id, "running", 2000);
  REQUIRE(json_field(stat_json(a, id), "state") == "running");
  auto old_server = harness::children_of(a.pid);
  REQUIRE(old_server.size() == 1);
  const pid_t job = static_cast<pid_t>(std::stol(trim(harness::wait_file(a.dir + "/work/downend.pid"))));
  a.stop(SIGKILL);
  for (int i = 0; i < 500 && harness::alive(job); ++i)  // it ends meanwhile
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  REQUIRE(!harness::alive(job));
  a.start();
  INFO(a.log());
  auto w = a.cli({"wait", id});
  CHECK(w.rc == 5);
  std::string js = stat_json(a, id);
  CHECK(json_field(js, "state") == "ended");
  CHECK(json_field(js, "exit_code") == "5");
  CHECK(harness::leftovers(a, old_server) == "");
}

TEST_CASE("a launch that fails as the user ends launch_failed with its reason; the agent goes on", "[agent]") {
  SKIP_UNLESS_ROOT();
  Agent a("lfail");
  a.start();
  // stdout in a directory only root may enter: the open fails as nobody, after start() returned
  // (corrald starts jobs asynchronously); the end carries the reason.
  std::string priv = a.dir + "/private";
  REQUIRE(::mkdir(priv.c_str(), 0700) == 0);
  auto s = harness::run({a.corral(), "submit", "-o", priv + "/out", "--wrap", "echo never"}, kNobody,
                        a.dir + "/work", {"CORRAL_SOCKET=" + a.socket});
  INFO(s.err << a.log());
  REQUIRE(s.rc == 0);
  std::string id = trim(s.out);
  a.cli({"wait", id}, kNobody);
  std::string js = stat_json(a, id);
  CHECK(json_field(js, "state") == "ended");
  CHECK(json_field(js, "end_reason") == "launch_failed");
  CHECK(json_field(js, "exit_code") == "null");  // no exit status: it never ran
  CHECK_THAT(json_field(js, "comment"), Catch::Contains("open stdout " + priv + "/out") &&
                                            Catch::Contains("Permission denied") &&
                                            Catch::Contains("as user nobody"));
  // The next job runs normally.
  auto s2 = a.submit({"--wrap", "exit 0"}, -1);
  REQUIRE(s2.rc == 0);
  CHECK(a.cli({"wait", trim(s2.out)}).rc == 0);
  CHECK(json_field(stat_json(a, trim(s2.out)), "end_reason") == "completed");
}

// corrald keeps its pass's Snapshot between passes (pending jobs synced with the queue, not
// rebuilt from the store). With CORRAL_CHECK_SNAPSHOT (and CORRAL_TRACE) it compares it with a
// freshly built one on every pass and logs the verdict: submits, a cancel in the middle of the
// queue, a running job requeued back to its place, and starts in between.
TEST_CASE("the kept scheduling snapshot always matches a fresh one", "[agent]") {
  SKIP_UNLESS_ROOT();
  SKIP_UNLESS_ENFORCED();
  ::setenv("CORRAL_TRACE", "1", 1);
  ::setenv("CORRAL_CHECK_SNAPSHOT", "1", 1);
  // nci: its stage updates every waiting job's policy state each pass (refreshed in place).
  Agent a("snap", {"--set", "declare_cores=1", "--set", "poll_interval=0.2", "--set", "nci=yes",
                   "--set", "nci_require=walltime"});
  a.start();
  ::unsetenv("CORRAL_TRACE");
  ::unsetenv("CORRAL_CHECK_SNAPSHOT");
  auto sub = [&](const std::string& cmd) {
    auto s = a.submit({"-l", "ncpus=1,walltime=600", "--wrap", cmd});
    INFO(s.err);
    REQUIRE(s.rc == 0);
    return trim(s.out);
  };
  std::string first = sub("sleep 300");
  REQUIRE(harness::wait_state(a, first, "running") == "running");
  std::vector<std::string> rest;
  for (int i = 0; i < 5; ++i) rest.push_back(sub("true"));
  REQUIRE(a.cli({"cancel", rest[1]}).rc == 0);  // leaves the middle of the queue
  REQUIRE(a.cli({"requeue", first}).rc == 0);   // back to the queue, ahead of the rest
  std::string js;
  for (int i = 0; i < 500; ++i) {
    js = stat_json(a, first);
    if (json_field(js, "requeues") == "1" && json_field(js, "state") == "running") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  CHECK(json_field(js, "state") == "running");  // it went first again: one core
  rest.push_back(sub("true"));
  REQUIRE(a.cli({"cancel", first}).rc == 0);
  for (std::size_t i = 0; i < rest.size(); ++i) {
    if (i == 1) continue;
    auto w = a.cli({"wait", rest[i]});
    INFO(w.err);
    CHECK(w.rc == 0);
  }
  std::string log = a.log();
  INFO(log);
  CHECK(log.find("trace: snapshot check ok") != std::string::npos);
  CHECK(log.find("snapshot check FAILED") == std::string::npos);
}

// CRIU, used only where `criu check` passes and never depended on: corrald runs `criu check`
// once at start when a criu binary is on its PATH and reports the outcome in `corral node
// --json` and its log; a checkpoint stays cooperative even when the check passes. Fake criu
// scripts stand in: one passes, one fails as this kernel does, one hangs (killed after 3 s),
// and none at all.
TEST_CASE("criu check is probed at start and reported; checkpoints stay cooperative", "[agent]") {
  SKIP_UNLESS_ROOT();
  std::string fake = harness::make_tmpdir("criu");
  auto write_criu = [&](const std::string& dir, const std::string& body) {
    ::mkdir(dir.c_str(), 0755);
    std::ofstream(dir + "/criu") << "#!/bin/sh\necho \"$@\" >> " << dir << "/criu.calls\n" << body;
    ::chmod((dir + "/criu").c_str(), 0755);
  };
  write_criu(fake + "/pass", "echo 'Looks good.'\nexit 0\n");
  write_criu(fake + "/fail",
             "echo 'Warn  (criu/kerndat.c:1103): CRIU was built without libnftables support' >&2\n"
             "echo 'Error (criu/cr-check.c:1223): Kernel does not support PTRACE_O_SUSPEND_SECCOMP' >&2\n"
             "echo 'Looks bad.' >&2\nexit 1\n");
  write_criu(fake + "/hang", "echo $$ > " + fake + "/hang/pid\nexec /bin/sleep 60\n");
  ::mkdir((fake + "/none").c_str(), 0755);
  // Only the fake's dir: a real criu elsewhere must not answer (corrald itself needs no PATH).
  auto with_path = [&](const std::string& dir) { return "PATH=" + dir; };

  struct Case {
    std::string dir;
    bool available;
    std::string why;
  };
  std::vector<Case> cases = {
      {fake + "/pass", true, "criu check passed: Looks good."},
      {fake + "/fail", false, "criu check failed (exit 1): Error (criu/cr-check.c:1223): Kernel does not support PTRACE_O_SUSPEND_SECCOMP"},
      {fake + "/hang", false, "criu check did not finish within 3.0 s (killed)"},
      {fake + "/none", false, "no criu binary on PATH"},
  };
  for (const auto& c : cases) {
    INFO("criu: " << c.dir);
    Agent a("criu", {"--set", "declare_cores=1", "--set", "poll_interval=0.2"});
    a.env = {with_path(c.dir)};
    auto t0 = std::chrono::steady_clock::now();
    a.start();
    double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    CHECK(took < 8.0);
    auto n = a.cli({"node", "--json"});
    REQUIRE(n.rc == 0);
    std::string want = std::string("\"criu\":{\"available\":") + (c.available ? "true" : "false") +
                       ",\"why\":\"" + c.why + "\"}";
    INFO(n.out);
    CHECK(n.out.find(want) != std::string::npos);
    CHECK(a.log().find("criu: " + c.why) != std::string::npos);
    auto text = a.cli({"node"});
    CHECK(text.out.find(std::string("criu      ") + (c.available ? "available" : "not available")) != std::string::npos);
    if (c.dir == fake + "/hang") {
      std::string hp = trim(harness::slurp(fake + "/hang/pid"));
      REQUIRE(!hp.empty());
      CHECK_FALSE(harness::alive(static_cast<pid_t>(std::stol(hp))));  // killed, not left behind
    }
    if (c.available) {
      // Even with a passing check the checkpoint is the cooperative one: the job gets the
      // signal, and criu is never run again (no dump).
      auto s = a.submit({"-N", "coop", "-l", "ncpus=1,walltime=600", "--wrap",
                         "if [ \"$CORRAL_RESTART\" = 1 ]; then cat \"$CORRAL_CKPT_DIR/s\" > coop.seen; exit 0; fi; "
                         "trap 'echo signalled > \"$CORRAL_CKPT_DIR/s\"; exit 0' USR1; echo $$ > coop.pid; "
                         "while :; do sleep 0.1; done"});
      REQUIRE(s.rc == 0);
      std::string id = trim(s.out);
      REQUIRE(!trim(harness::wait_file(a.dir + "/work/coop.pid")).empty());
      REQUIRE(a.cli({"checkpoint", id}).rc == 0);
      CHECK(harness::wait_state(a, id, "ended", 15000) == "ended");
      CHECK(harness::slurp(a.dir + "/work/coop.seen") == "signalled\n");
      CHECK(harness::slurp(c.dir + "/criu.calls") == "check\n");
    }
  }
  (void)!std::system(("rm -rf '" + fake + "'").c_str());
}

TEST_CASE("limits end to end: memory, walltime and jobfs kills say why in stat, wait and node", "[agent]") {
  // nci-pbs-policy.txt ("strictly enforced" walltime / vmem / jobfs): the
  // Launcher's kills (tested there) reach the user through corrald: the
  // job's end_reason, its exit code from `corral wait`, and node's recent ends.
  SKIP_UNLESS_ROOT();
  SKIP_UNLESS_ENFORCED();
  Agent a("limits", {"--set", "poll_interval=0.2"});
  a.start();
  auto hog = a.submit({"-N", "hog", "-l", "walltime=60,ncpus=1,mem=32mb", "--wrap", "head -c 200m /dev/zero | tail"});
  auto over = a.submit({"-N", "over", "-l", "walltime=1,ncpus=1", "--wrap", "sleep 30"});
  REQUIRE(hog.rc == 0);
  REQUIRE(over.rc == 0);
  const std::string hid = trim(hog.out), oid = trim(over.out);
  auto wh = a.cli({"wait", hid});
  auto wo = a.cli({"wait", oid});
  INFO(a.log());
  CHECK(wh.rc == 137);
  CHECK(wh.err.find("killed: memory limit 32 MB exceeded") != std::string::npos);
  CHECK(json_field(stat_json(a, hid), "end_reason") == "mem");
  CHECK(wo.rc == 137);
  CHECK(wo.err.find("walltime 1 s exceeded") != std::string::npos);
  CHECK(json_field(stat_json(a, oid), "end_reason") == "walltime");
  // jobfs: 8 MB asked, 40 MB written into $CORRAL_JOBFS, then it waits.
  auto fs = a.submit({"-N", "fill", "-l", "walltime=60,ncpus=1,jobfs=8mb", "--wrap",
                      "head -c 40m /dev/zero > $CORRAL_JOBFS/blob; sleep 30"});
  REQUIRE(fs.rc == 0);
  const std::string fid = trim(fs.out);
  auto wf = a.cli({"wait", fid});
  CHECK(wf.rc == 137);
  CHECK(json_field(stat_json(a, fid), "end_reason") == "jobfs");
  auto n = a.cli({"node", "--json"});
  CHECK(n.out.find("\"end_reason\":\"mem\"") != std::string::npos);
  CHECK(n.out.find("\"end_reason\":\"walltime\"") != std::string::npos);
  CHECK(n.out.find("\"end_reason\":\"jobfs\"") != std::string::npos);
}
