// The launcher with real processes in real cgroups: pinning, limits (memory, walltime, jobfs),
// freezer suspend/resume, checkpoint/restart, running as a user, cancel of a process tree,
// launch faults, and recovery after the agent is destroyed or killed.
#include <grp.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "helpers.hpp"

using namespace corral::node;
using nodetest::nap;
using nodetest::Node;
using nodetest::slurp;
using nodetest::wait_until;

static const std::string kHelper = NODE_HELPER;

namespace {
bool process_alive(pid_t p) {
  // A zombie is dead for our purposes: it holds no resources and is in no cgroup.
  std::string st = slurp("/proc/" + std::to_string(p) + "/stat");
  if (st.empty()) return false;
  auto close = st.rfind(')');
  return close != std::string::npos && close + 2 < st.size() && st[close + 2] != 'Z';
}
std::vector<pid_t> read_pids(const std::string& path) {
  std::vector<pid_t> v;
  std::istringstream in(slurp(path));
  pid_t p;
  while (in >> p) v.push_back(p);
  return v;
}
// A non-root user for the tests: corraltest (created if missing), else nobody.
std::string test_user() {
  if (!getpwnam("corraltest")) {
    int rc = std::system("useradd --system --no-create-home --shell /usr/sbin/nologin corraltest >/dev/null 2>&1");
    (void)rc;
  }
  return getpwnam("corraltest") ? "corraltest" : "nobody";
}
}  // namespace

TEST_CASE("a job runs pinned to its cores and completes", "[node][launcher]") {
  if (!nodetest::need_cgroups()) return;
  Node n("corral_t_launch");
  int last = static_cast<int>(n.L->topology().cores.size()) - 1;
  auto s = n.spec(1, {"/bin/sh", "-c", "grep Cpus_allowed_list /proc/self/status; echo ncpus=$CORRAL_NCPUS"});
  s.cores = {last};
  REQUIRE(n.L->start(s) == "");
  auto e = n.wait_end(1, 10000);
  REQUIRE(e);
  CHECK(e->reason == EndReason::Completed);
  CHECK(e->exit_code == 0);
  std::string want = nodetest::slurp("/dev/null");
  auto pus = n.L->topology().cores[static_cast<std::size_t>(last)].pus;
  CHECK(n.out(1).find("Cpus_allowed_list:\t" + to_cpu_list(pus) + "\n") != std::string::npos);
  CHECK(n.out(1).find("ncpus=1") != std::string::npos);
  CHECK(n.leftovers().empty());
}

TEST_CASE("exit codes are reported as failed with the code", "[node][launcher]") {
  if (!nodetest::need_cgroups()) return;
  Node n("corral_t_launch");
  REQUIRE(n.L->start(n.spec(2, {"/bin/sh", "-c", "echo oops >&2; exit 3"})) == "");
  auto e = n.wait_end(2, 10000);
  REQUIRE(e);
  CHECK(e->reason == EndReason::Failed);
  CHECK(e->exit_code == 3);
  CHECK(e->message.find("exit 3") != std::string::npos);
  CHECK(slurp(n.dir.path + "/2.err") == "oops\n");
  CHECK(n.leftovers().empty());
}

TEST_CASE("a job above its memory limit is killed and the end says memory", "[node][launcher]") {
  if (!nodetest::need_cgroups()) return;
  Node n("corral_t_launch");
  auto s = n.spec(3, {kHelper, "hog", "200"});
  s.mem_mb = 32;
  REQUIRE(n.L->start(s) == "");
  auto e = n.wait_end(3, 15000);
  REQUIRE(e);
  CHECK(e->reason == EndReason::Memory);
  CHECK(e->message.find("memory limit 32 MB") != std::string::npos);
  CHECK(n.out(3).find("allocated") == std::string::npos);  // it never got its 200 MB
  CHECK(n.leftovers().empty());
}

TEST_CASE("suspend freezes the job, resume thaws it", "[node][launcher]") {
  if (!nodetest::need_cgroups()) return;
  Node n("corral_t_launch");
  std::string tick = n.dir.path + "/tick";
  REQUIRE(n.L->start(n.spec(4, {kHelper, "tick", tick})) == "");
  REQUIRE(wait_until([&] { return !slurp(tick).empty(); }, 5000));
  REQUIRE(n.L->suspend(4) == "");
  CHECK(n.L->cgroups().freezer_state("job.4") == FreezeState::Frozen);
  CHECK(n.L->usage(4)->suspended);
  std::string frozen_at = slurp(tick);
  nodetest::ControlTicker clock(n.dir.path + "/clock");
  REQUIRE(clock.advance(20));       // 20 ticks of a ticker that is not frozen...
  CHECK(slurp(tick) == frozen_at);  // ... and none of the frozen job
  CHECK(n.L->suspend(4) != "");     // already suspended: an error, not a crash
  REQUIRE(n.L->resume(4) == "");
  CHECK(n.L->cgroups().freezer_state("job.4") == FreezeState::Thawed);
  CHECK(wait_until([&] { return slurp(tick) != frozen_at && !slurp(tick).empty(); }, 3000));
  CHECK(n.L->poll().empty());  // still running
  REQUIRE(n.L->cancel(4) == "");
  auto e = n.wait_end(4, 5000);
  REQUIRE(e);
  CHECK(e->reason == EndReason::Cancelled);
  CHECK(n.leftovers().empty());
}

TEST_CASE("walltime kills the job, suspended time not counted", "[node][launcher]") {
  if (!nodetest::need_cgroups()) return;
  Node n("corral_t_launch");
  auto s = n.spec(5, {"/bin/sleep", "30"});
  s.walltime_s = 1;
  auto t0 = Launcher::now_ms();
  REQUIRE(n.L->start(s) == "");
  REQUIRE(wait_until([&] { return !n.L->cgroups().pids(slot_name(5)).empty(); }, 5000));
  CHECK(n.L->poll().empty());
  REQUIRE(n.L->suspend(5) == "");
  // The wall time spent suspended is what is tested: 1.5 s, polled throughout, never counted.
  for (int i = 0; i < 15; ++i) {
    CHECK(n.L->poll().empty());
    nap(100);
  }
  REQUIRE(n.L->resume(5) == "");
  CHECK(n.L->poll().empty());
  auto u = n.L->usage(5);
  REQUIRE(u);
  CHECK(u->walltime_used_ms < 1000);
  auto e = n.wait_end(5, 5000);
  auto elapsed = Launcher::now_ms() - t0;
  REQUIRE(e);
  CHECK(e->reason == EndReason::Walltime);
  CHECK(e->message.find("walltime 1 s") != std::string::npos);
  CHECK(elapsed >= 2500);  // 1 s running + 1.5 s suspended
  CHECK(elapsed < 6000);
  CHECK(n.leftovers().empty());
}

TEST_CASE("jobfs above its size is killed; jobfs is private and removed", "[node][launcher]") {
  if (!nodetest::need_cgroups()) return;
  Node n("corral_t_launch");
  auto s = n.spec(6, {kHelper, "fill", "20"});
  s.jobfs_mb = 5;
  REQUIRE(n.L->start(s) == "");
  std::string jobfs = n.cfg.jobfs_root + "/6";
  auto e = n.wait_end(6, 10000);
  REQUIRE(e);
  CHECK(e->reason == EndReason::Jobfs);
  CHECK(e->message.find("above its 5 MB") != std::string::npos);
  CHECK(!std::filesystem::exists(jobfs));
  CHECK(n.leftovers().empty());
}

TEST_CASE("checkpoint: signal honoured, restart sees its checkpoint", "[node][launcher]") {
  if (!nodetest::need_cgroups()) return;
  Node n("corral_t_launch");
  auto s = n.spec(7, {kHelper, "ckpt", "100000"});
  s.ckpt_grace_s = 5;
  REQUIRE(n.L->start(s) == "");
  std::string ckpt = n.cfg.ckpt_root + "/7";
  // It has counted some steps: the restart below must continue from them, not from 0.
  REQUIRE(wait_until([&] { return std::atol(slurp(ckpt + "/at").c_str()) >= 10; }, 10000));
  REQUIRE(n.L->checkpoint(7) == "");
  auto e = n.wait_end(7, 6000);
  REQUIRE(e);
  CHECK(e->reason == EndReason::Checkpointed);
  CHECK(e->exit_code == 0);
  CHECK(n.out(7).find("fresh") != std::string::npos);
  std::string saved = slurp(ckpt + "/state");
  REQUIRE(!saved.empty());
  CHECK(std::stol(saved) >= 10);
  CHECK(n.leftovers().empty());

  // Requeued and restarted: same checkpoint dir, CORRAL_RESTART=1, it continues from there.
  auto r = n.spec(7, {kHelper, "ckpt", std::to_string(std::stol(saved) + 5)});
  r.restart = true;
  REQUIRE(n.L->start(r) == "");
  auto e2 = n.wait_end(7, 6000);
  REQUIRE(e2);
  CHECK(e2->reason == EndReason::Completed);
  CHECK(n.out(7).find("fresh") != std::string::npos);  // the restart appends to its output
  CHECK(n.out(7).find("restored " + saved) != std::string::npos);
  CHECK(n.out(7).find("finished") != std::string::npos);
  CHECK(!std::filesystem::exists(ckpt));  // ended for good: its checkpoint dir goes
  CHECK(n.leftovers().empty());
}

TEST_CASE("a job that ignores the checkpoint signal is stopped after the grace", "[node][launcher]") {
  if (!nodetest::need_cgroups()) return;
  Node n("corral_t_launch");
  auto s = n.spec(8, {"/bin/sh", "-c", "trap '' USR1; echo up; sleep 30"});
  s.ckpt_grace_s = 1;
  REQUIRE(n.L->start(s) == "");
  REQUIRE(wait_until([&] { return n.out(8) == "up\n"; }, 5000));
  auto t0 = Launcher::now_ms();
  REQUIRE(n.L->checkpoint(8) == "");
  auto e = n.wait_end(8, 10000);
  REQUIRE(e);
  CHECK(Launcher::now_ms() - t0 >= 1000);  // not stopped inside its grace
  CHECK(e->reason == EndReason::Checkpointed);
  CHECK(e->message.find("did not exit within") != std::string::npos);
  CHECK(n.leftovers().empty());
}

TEST_CASE("a job runs as its user, with its env, and its files belong to the user", "[node][launcher]") {
  if (!nodetest::need_cgroups()) return;
  Node n("corral_t_launch");
  std::string user = test_user();
  struct passwd* pw = getpwnam(user.c_str());
  REQUIRE(pw);
  uid_t uid = pw->pw_uid;
  gid_t gid = pw->pw_gid;
  std::string work = n.dir.path + "/work";
  std::filesystem::create_directories(work);
  ::chmod(work.c_str(), 01777);
  LaunchSpec s;
  s.id = 9;
  s.user = user;
  s.argv = {"sh", "-c",
            "id -u; id -g; pwd; echo $CORRAL_JOBID $CORRAL_NCPUS $CORRAL_HOSTS $CORRAL_RESTART $FOO; "
            "touch $CORRAL_JOBFS/x && echo jobfs-ok; touch $CORRAL_CKPT_DIR/y && echo ckpt-ok; "
            "touch /root/nope 2>/dev/null || echo not-root"};
  s.env = {{"FOO", "bar"}};
  s.cwd = work;
  s.stdout_path = work + "/9.out";
  s.stderr_path = work + "/9.err";
  s.jobfs_mb = 10;
  s.hosts = "n1,n2";
  REQUIRE(n.L->start(s) == "");
  auto e = n.wait_end(9, 10000);
  REQUIRE(e);
  CHECK(e->reason == EndReason::Completed);
  std::string out = slurp(work + "/9.out");
  CHECK(out.find(std::to_string(uid) + "\n" + std::to_string(gid) + "\n" + work + "\n") == 0);
  CHECK(out.find("9 " + std::to_string(n.L->topology().cores.size()) + " n1,n2 0 bar") != std::string::npos);
  CHECK(out.find("jobfs-ok") != std::string::npos);
  CHECK(out.find("ckpt-ok") != std::string::npos);
  CHECK(out.find("not-root") != std::string::npos);
  struct stat st {};
  REQUIRE(::stat((work + "/9.out").c_str(), &st) == 0);
  CHECK(st.st_uid == uid);
  CHECK(st.st_gid == gid);
  CHECK(n.leftovers().empty());
}

TEST_CASE("cancel kills a job's hundred children and empties its cgroup", "[node][launcher]") {
  if (!nodetest::need_cgroups()) return;
  Node n("corral_t_launch");
  std::string pidfile = n.dir.path + "/pids";
  REQUIRE(n.L->start(n.spec(10, {kHelper, "forks", "100", pidfile})) == "");
  REQUIRE(wait_until([&] { return read_pids(pidfile).size() == 100; }, 10000));
  auto pids = read_pids(pidfile);
  CHECK(n.L->cgroups().pids("job.10").size() >= 101);
  REQUIRE(n.L->cancel(10) == "");
  auto e = n.wait_end(10, 5000);
  REQUIRE(e);
  CHECK(e->reason == EndReason::Cancelled);
  int alive = 0;
  for (pid_t p : pids) alive += process_alive(p);
  CHECK(alive == 0);
  CHECK(n.leftovers().empty());
}

TEST_CASE("launch faults are refused with a reason and leave nothing", "[node][launcher]") {
  if (!nodetest::need_cgroups()) return;
  Node n("corral_t_launch");
  auto s = n.spec(11, {"/bin/true"});
  s.user = "no-such-user-corral";
  CHECK_THAT(n.L->start(s), Catch::Contains("unknown user 'no-such-user-corral'"));
  CHECK_THAT(n.L->start(n.spec(12, {"/no/such/binary"})), Catch::Contains("not found"));
  CHECK_THAT(n.L->start(n.spec(13, {"no-such-command-corral"})), Catch::Contains("command not found"));
  auto c = n.spec(14, {"/bin/true"});
  c.cores = {999};
  CHECK_THAT(n.L->start(c), Catch::Contains("not on this node"));
  auto d = n.spec(15, {"/bin/true"});
  d.cwd = "/no/such/dir";
  CHECK_THAT(n.L->start(d), Catch::Contains("does not exist"));
  // Found but not executable by the user: reported from the child, cleaned up.
  std::string script = n.dir.path + "/private.sh";
  std::ofstream(script) << "#!/bin/sh\necho hi\n";
  ::chmod(script.c_str(), 0700);
  auto p = n.spec(16, {script});
  p.user = test_user();
  p.stdout_path = p.stderr_path = "/dev/null";
  p.cwd = "/";
  CHECK_THAT(n.L->start(p), Catch::Contains("Permission denied"));
  CHECK(n.L->start(n.spec(17, {})) != "");
  // stdout into a FIFO nobody reads: an error, not a hang.
  std::string fifo = n.dir.path + "/fifo";
  REQUIRE(::mkfifo(fifo.c_str(), 0666) == 0);
  auto f = n.spec(26, {"/bin/true"});
  f.stdout_path = fifo;
  CHECK_THAT(n.L->start(f), Catch::Contains("open stdout"));
  CHECK(n.L->cancel(99) != "");
  CHECK(n.L->jobs().empty());
  CHECK(n.L->poll().empty());
  CHECK(n.leftovers().empty());
}

TEST_CASE("requeue stops the job and reports it preempted", "[node][launcher]") {
  if (!nodetest::need_cgroups()) return;
  Node n("corral_t_launch");
  REQUIRE(n.L->start(n.spec(18, {"/bin/sleep", "30"})) == "");
  REQUIRE(wait_until([&] { return !n.L->cgroups().pids(slot_name(18)).empty(); }, 5000));
  REQUIRE(n.L->suspend(18) == "");  // NCI: a suspended job may be requeued; frozen tasks die too
  REQUIRE(n.L->requeue(18) == "");
  auto e = n.wait_end(18, 5000);
  REQUIRE(e);
  CHECK(e->reason == EndReason::Preempted);
  CHECK(n.leftovers().empty());
}

TEST_CASE("a destroyed launcher's jobs are adopted by the next one, exit code kept", "[node][launcher]") {
  if (!nodetest::need_cgroups()) return;
  Node n("corral_t_launch");
  REQUIRE(n.L->start(n.spec(19, {"/bin/sh", "-c", "sleep 0.5; exit 5"})) == "");
  REQUIRE(n.L->start(n.spec(20, {"/bin/sleep", "30"})) == "");
  n.L.reset();  // the agent object goes away; the jobs keep running
  n.L = std::make_unique<Launcher>(discover(n.cfg.jobfs_root), n.cfg);
  auto rec = n.L->recover(RecoverMode::Adopt);
  REQUIRE(rec.size() == 2);
  CHECK(rec[0].adopted);
  CHECK(rec[1].adopted);
  CHECK(n.L->has(19));
  CHECK(n.L->has(20));
  auto e = n.wait_end(19, 5000);
  REQUIRE(e);
  CHECK(e->reason == EndReason::Failed);
  CHECK(e->exit_code == 5);
  REQUIRE(n.L->cancel(20) == "");
  auto e2 = n.wait_end(20, 5000);
  REQUIRE(e2);
  CHECK(e2->reason == EndReason::Cancelled);
  CHECK(n.leftovers().empty());
}

// corrald runs with async_start: it may die after the server has started a job and before it read
// the server's report. The job was started; a restarted agent must adopt it, never kill it (it
// would then run a second time).
TEST_CASE("a job started while its launcher never read the report is adopted, running or ended",
          "[node][launcher]") {
  if (!nodetest::need_cgroups()) return;
  Node n("corral_t_launch");
  n.cfg.async_start = true;
  n.relaunch();
  std::string mark = n.dir.path + "/63.ran";
  REQUIRE(n.L->start(n.spec(63, {"/bin/sh", "-c", "echo x >> " + mark + "; exec sleep 30"})) == "");
  REQUIRE(n.L->start(n.spec(64, {"/bin/sh", "-c", "exit 7"})) == "");
  // No poll(): the launcher never reads the server's reports before it goes.
  REQUIRE(wait_until([&] { return slurp(mark) == "x\n"; }, 10000));
  REQUIRE(wait_until([&] { return std::filesystem::exists(n.cfg.state_dir + "/job.64.exit"); }, 10000));
  n.L.reset();
  n.L = std::make_unique<Launcher>(discover(n.cfg.jobfs_root), n.cfg);
  auto rec = n.L->recover(RecoverMode::Adopt);
  REQUIRE(rec.size() == 2);
  for (const auto& r : rec) {
    INFO("job " << r.id << ": " << r.message);
    CHECK(r.adopted);
  }
  REQUIRE(n.L->has(63));
  REQUIRE(n.L->has(64));
  CHECK(n.L->usage(63)->running);
  CHECK(n.L->spec(63)->cores == n.spec(63, {}).cores);
  auto e64 = n.wait_end(64, 5000);
  REQUIRE(e64);
  CHECK(e64->reason == EndReason::Failed);
  CHECK(e64->exit_code == 7);
  CHECK(n.L->poll().empty());  // 63 still runs
  REQUIRE(n.L->cancel(63) == "");
  auto e63 = n.wait_end(63, 5000);
  REQUIRE(e63);
  CHECK(e63->reason == EndReason::Cancelled);
  CHECK(slurp(mark) == "x\n");  // it ran once
  CHECK(n.leftovers().empty());
}

// A run's first record is one create + write (no temp file and rename): an agent killed inside
// that write leaves a record cut short, which recovery must refuse like a missing one (the job is
// killed and its slot removed, not adopted with half its limits).
TEST_CASE("a record cut short is refused at recovery: the job is cleaned up, not adopted", "[node][launcher]") {
  if (!nodetest::need_cgroups()) return;
  Node n("corral_t_launch");
  REQUIRE(n.L->start(n.spec(23, {"/bin/sleep", "30"})) == "");
  REQUIRE(n.L->start(n.spec(24, {"/bin/sleep", "30"})) == "");
  n.L.reset();  // the jobs keep running
  const std::string path = n.cfg.state_dir + "/job.23.rec";
  std::string text = slurp(path);
  const auto last = text.rfind("served=");
  REQUIRE(last != std::string::npos);
  text.resize(last);  // everything but the last line, as a write cut short would leave it
  { std::ofstream(path, std::ios::trunc) << text; }
  n.L = std::make_unique<Launcher>(discover(n.cfg.jobfs_root), n.cfg);
  auto rec = n.L->recover(RecoverMode::Adopt);
  REQUIRE(rec.size() == 2);
  for (const auto& r : rec) CHECK(r.adopted == (r.id == 24));  // the whole record is adopted
  CHECK(!n.L->has(23));
  CHECK(n.L->has(24));
  REQUIRE(n.L->cancel(24) == "");
  REQUIRE(n.wait_end(24, 5000));
  CHECK(n.leftovers().empty());
}

TEST_CASE("after the agent is SIGKILLed a new launcher adopts or cleans up", "[node][launcher]") {
  if (!nodetest::need_cgroups()) return;
  Node n("corral_t_launch");
  n.L.reset();
  auto run_agent = [&](std::uint64_t id, const std::string& pidfile) {
    pid_t agent = fork();
    if (agent == 0) {
      try {
        Launcher l(discover(""), n.cfg);
        auto s = n.spec(id, {kHelper, "forks", "5", pidfile});
        s.walltime_s = 60;
        if (!l.start(s).empty()) _exit(1);
        for (;;) pause();
      } catch (...) {
        _exit(2);
      }
    }
    REQUIRE(agent > 0);
    REQUIRE(wait_until([&] { return read_pids(pidfile).size() == 5; }, 5000));
    kill(agent, SIGKILL);
    waitpid(agent, nullptr, 0);
  };
  SECTION("adopt") {
    run_agent(21, n.dir.path + "/p21");
    n.L = std::make_unique<Launcher>(discover(""), n.cfg);
    auto rec = n.L->recover(RecoverMode::Adopt);
    REQUIRE(rec.size() == 1);
    CHECK(rec[0].id == 21);
    CHECK(rec[0].adopted);
    auto u = n.L->usage(21);
    REQUIRE(u);
    CHECK(u->running);
    CHECK(u->walltime_used_ms > 0);
    CHECK(n.L->poll().empty());
    REQUIRE(n.L->cancel(21) == "");
    auto e = n.wait_end(21, 5000);
    REQUIRE(e);
    CHECK(e->reason == EndReason::Cancelled);
    for (pid_t p : read_pids(n.dir.path + "/p21")) CHECK(!process_alive(p));
  }
  SECTION("clean up") {
    run_agent(22, n.dir.path + "/p22");
    n.L = std::make_unique<Launcher>(discover(""), n.cfg);
    auto rec = n.L->recover(RecoverMode::Cleanup);
    REQUIRE(rec.size() == 1);
    CHECK(rec[0].id == 22);
    CHECK(!rec[0].adopted);
    CHECK(n.L->jobs().empty());
    for (pid_t p : read_pids(n.dir.path + "/p22")) CHECK(!process_alive(p));
  }
  CHECK(n.leftovers().empty());
  CHECK(std::filesystem::is_empty(n.cfg.state_dir));
}

// An agent SIGKILLed after it recorded a start but before the server reported it: the restarted
// agent adopts the job from that record, and its walltime counts from the start, not from the
// monotonic clock's zero (which ended such jobs as `walltime` at their first poll).
TEST_CASE("a job adopted before its start was reported keeps its walltime", "[node][launcher]") {
  if (!nodetest::need_cgroups()) return;
  Node n("corral_t_launch");
  n.L.reset();
  const std::string go = n.dir.path + "/go";
  pid_t agent = fork();
  if (agent == 0) {
    try {
      Launcher l(discover(""), n.cfg);
      if (!l.start(n.spec(73, {"/bin/sleep", "60"})).empty()) _exit(1);
      while (!std::filesystem::exists(go)) nap(10);
      auto s = n.spec(74, {"/bin/sleep", "60"});
      s.walltime_s = 30;
      std::string err = l.start(s);  // waits for the server's report, which the stopped server never sends
      std::ofstream(n.dir.path + "/child.err") << "start 74: " << err;
      for (;;) pause();
    } catch (const std::exception& e) {
      std::ofstream(n.dir.path + "/child.err") << "exception: " << e.what();
      _exit(2);
    }
  }
  REQUIRE(agent > 0);
  pid_t server = 0;  // job 73's parent
  struct Reap {  // also when a REQUIRE fails: the agent gone, the server running again
    pid_t& agent;
    pid_t& server;
    ~Reap() {
      if (agent > 0 && ::kill(agent, SIGKILL) == 0) ::waitpid(agent, nullptr, 0);
      if (server > 0) ::kill(server, SIGCONT);
    }
  } reap{agent, server};
  REQUIRE(wait_until([&] {
    for (pid_t p : make_cgroup_v1(n.guard.parent)->pids(slot_name(73))) {
      std::string st = slurp("/proc/" + std::to_string(p) + "/stat");
      std::istringstream in(st.substr(st.rfind(')') + 2));
      std::string state;
      pid_t parent = 0;
      in >> state >> parent;
      if (parent > 1 && parent != agent && parent != ::getpid()) server = parent;
    }
    return server > 1;
  }, 5000));
  // Stopped only once the agent has its report of job 73 (its record then names the pid).
  REQUIRE(wait_until([&] {
    std::string rec = slurp(n.cfg.state_dir + "/job.73.rec");
    return !rec.empty() && rec.find("\npid=0\n") == std::string::npos;
  }, 15000));
  REQUIRE(::kill(server, SIGSTOP) == 0);
  { std::ofstream(go) << ""; }
  INFO(slurp(n.dir.path + "/child.err"));
  REQUIRE(wait_until([&] { return std::filesystem::exists(n.cfg.state_dir + "/job.74.rec"); }, 15000));
  ::kill(agent, SIGKILL);
  ::waitpid(agent, nullptr, 0);
  agent = 0;
  n.L = std::make_unique<Launcher>(discover(""), n.cfg);
  std::thread resume([server] {
    nap(300);
    ::kill(server, SIGCONT);
  });
  auto rec = n.L->recover(RecoverMode::Adopt);
  resume.join();
  bool adopted = false;
  for (auto& r : rec) adopted |= r.id == 74 && r.adopted;
  REQUIRE(adopted);
  auto u = n.L->usage(74);
  REQUIRE(u);
  CHECK(u->walltime_used_ms < 30000);
  for (const auto& e : n.L->poll()) CHECK(e.id != 74);  // not ended as `walltime`
  for (std::uint64_t id : {73, 74}) {
    CHECK(n.L->cancel(id) == "");
    auto e = n.wait_end(id, 5000);
    REQUIRE(e);
    CHECK(e->reason == EndReason::Cancelled);
  }
  CHECK(n.leftovers().empty());
}

TEST_CASE("a stand-in topology maps its cores onto the real CPUs", "[node][launcher]") {
  if (!nodetest::need_cgroups()) return;
  nodetest::TempDir dir;
  nodetest::CgroupGuard guard("corral_t_standin_" + std::to_string(::getpid()));
  LauncherConfig cfg;
  cfg.cgroup_parent = guard.parent;
  cfg.state_dir = dir.path + "/state";
  cfg.ckpt_root = dir.path + "/ckpt";
  Launcher l(load_xml(std::string(NODE_TOPOLOGIES) + "/2socket-2x16.xml"), cfg);
  LaunchSpec s;
  s.id = 23;
  s.user = "root";
  s.argv = {"/bin/sh", "-c", "grep Cpus_allowed_list /proc/self/status"};
  s.cores = {31};  // PUs 62,63 on the recorded node
  s.stdout_path = dir.path + "/out";
  REQUIRE(l.start(s) == "");
  std::optional<JobEnd> e;
  REQUIRE(wait_until([&] {
    for (auto& x : l.poll()) e = x;
    return e.has_value();
  }, 20000));
  CHECK(e->reason == EndReason::Completed);
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  std::vector<int> want;
  for (int p : {62, 63}) want.push_back(static_cast<int>(p % ncpu));
  CHECK(slurp(dir.path + "/out") == "Cpus_allowed_list:\t" + to_cpu_list(want) + "\n");
  CHECK(l.cgroups().list().empty());
}

TEST_CASE("wake_fd turns readable when a job ends; usage reports cpu and memory", "[node][launcher]") {
  if (!nodetest::need_cgroups()) return;
  Node n("corral_t_launch");
  auto s = n.spec(24, {"/bin/sh", "-c", "i=0; while [ $i -lt 1000000 ]; do i=$((i+1)); done"});
  REQUIRE(n.L->start(s) == "");
  CHECK(wait_until([&] { return n.L->usage(24)->cpu_s > 0.05; }, 5000));
  auto u = n.L->usage(24);
  REQUIRE(u);
  CHECK(u->running);
  CHECK(u->rss_mb >= 0);
  CHECK(!n.L->usage(999));
  struct pollfd pfd {n.L->wake_fd(), POLLIN, 0};
  REQUIRE(::poll(&pfd, 1, 20000) == 1);  // woken by the end, no busy polling needed
  auto ends = n.L->poll();
  REQUIRE(ends.size() == 1);
  CHECK(ends[0].reason == EndReason::Completed);
  CHECK(::poll(&pfd, 1, 0) == 0);  // poll() drained it
  CHECK(n.leftovers().empty());
}

TEST_CASE("a checkpoint in progress still ends at its grace after the agent restarts", "[node][launcher]") {
  if (!nodetest::need_cgroups()) return;
  Node n("corral_t_launch");
  auto s = n.spec(25, {"/bin/sh", "-c", "trap '' USR1; echo up; sleep 30"});
  s.ckpt_grace_s = 1;
  REQUIRE(n.L->start(s) == "");
  REQUIRE(wait_until([&] { return n.out(25) == "up\n"; }, 5000));
  REQUIRE(n.L->checkpoint(25) == "");
  n.L.reset();
  n.L = std::make_unique<Launcher>(discover(""), n.cfg);
  REQUIRE(n.L->recover(RecoverMode::Adopt).size() == 1);
  auto e = n.wait_end(25, 5000);
  REQUIRE(e);
  CHECK(e->reason == EndReason::Checkpointed);
  CHECK(n.leftovers().empty());
}

TEST_CASE("the launcher runs on the cgroup v2 backend too", "[node][launcher]") {
  std::string why;
  if (!cgroup_v2_available(&why)) {
    CORRAL_SKIP(why);
    return;
  }
  nodetest::TempDir dir;
  LauncherConfig cfg;
  cfg.cgroup_parent = "corral_t_v2l";
  cfg.state_dir = dir.path + "/state";
  cfg.ckpt_root = dir.path + "/ckpt";
  auto l = std::make_unique<Launcher>(discover(""), cfg, make_cgroup_v2("corral_t_v2l"));
  struct Sweep {
    std::unique_ptr<Launcher>& l;
    ~Sweep() {
      if (!l) return;
      l->stop_all();
      try {
        l->cgroups().remove_parent();
      } catch (const std::exception& e) {
        WARN("v2 cleanup: " << e.what());
      }
    }
  } sweep{l};
  CHECK(l->cgroups().version() == "v2");
  std::string tick = dir.path + "/tick", pidfile = dir.path + "/pids";
  LaunchSpec s;
  s.id = 30;
  s.user = "root";
  s.cwd = dir.path;
  s.argv = {"/bin/sh", "-c", kHelper + " forks 100 " + pidfile + " & exec " + kHelper + " tick " + tick};
  REQUIRE(l->start(s) == "");
  REQUIRE(wait_until([&] { return read_pids(pidfile).size() == 100 && !slurp(tick).empty(); }, 10000));
  REQUIRE(l->suspend(30) == "");
  std::string at = slurp(tick);
  nodetest::ControlTicker clock(dir.path + "/clock");
  REQUIRE(clock.advance(20));
  CHECK(slurp(tick) == at);
  REQUIRE(l->resume(30) == "");
  CHECK(wait_until([&] { return slurp(tick) != at; }, 3000));
  REQUIRE(l->cancel(30) == "");
  std::optional<JobEnd> e;
  auto wait_end = [&] {
    return wait_until([&] {
      for (auto& x : l->poll()) e = x;
      return e.has_value();
    }, 20000);
  };
  REQUIRE(wait_end());
  CHECK(e->reason == EndReason::Cancelled);
  for (pid_t p : read_pids(pidfile)) CHECK(!process_alive(p));
  CHECK(l->cgroups().list().empty());
  // The server vforks a job on a launch thread pinned to the job's first CPU; with no cpuset to
  // apply (v2 here cannot limit cpus) the job must still get every CPU the server has, not the pin.
  LaunchSpec a;
  a.id = 31;
  a.user = "root";
  a.cwd = dir.path;
  a.cores = {0};
  a.stdout_path = dir.path + "/31.out";
  a.argv = {"/bin/sh", "-c", "grep Cpus_allowed_list /proc/self/status"};
  REQUIRE(l->start(a) == "");
  e.reset();
  REQUIRE(wait_end());
  CHECK(e->reason == EndReason::Completed);
  std::string mine;
  for (std::istringstream in(slurp("/proc/self/status")); std::getline(in, mine);)
    if (mine.rfind("Cpus_allowed_list", 0) == 0) break;
  CHECK(slurp(a.stdout_path) == mine + "\n");
}

TEST_CASE("the shepherd is posix_spawned (corral-shepherd); the fork fallback still works", "[node][launcher]") {
  if (!nodetest::need_cgroups()) return;
  Node n("corral_t_launch");
  // The job's parent is its shepherd: its command line says which kind it is.
  const std::vector<std::string> argv = {"/bin/sh", "-c", "tr '\\0' ' ' < /proc/$PPID/cmdline; exit 4"};
  REQUIRE(n.L->start(n.spec(31, argv)) == "");
  auto e = n.wait_end(31, 10000);
  REQUIRE(e);
  CHECK(e->reason == EndReason::Failed);
  CHECK(e->exit_code == 4);
  CHECK(n.out(31).find("corral-shepherd") != std::string::npos);
  CHECK(n.leftovers().empty());

  n.cfg.shepherd = "fork";
  n.relaunch();
  REQUIRE(n.L->start(n.spec(32, argv)) == "");
  e = n.wait_end(32, 10000);
  REQUIRE(e);
  CHECK(e->reason == EndReason::Failed);
  CHECK(e->exit_code == 4);
  CHECK(n.out(32).find("corral-shepherd") == std::string::npos);
  CHECK(n.leftovers().empty());

  LauncherConfig bad = n.cfg;
  bad.shepherd = n.dir.path + "/no-such-shepherd";
  CHECK_THROWS_WITH(Launcher(discover(bad.jobfs_root), bad), Catch::Contains("not an executable file"));
}

TEST_CASE("async_start: failures as the user end as LaunchFailed from poll(), with start()'s message",
          "[node][launcher]") {
  if (!nodetest::need_cgroups()) return;
  Node n("corral_t_launch");
  n.cfg.async_start = true;
  n.relaunch();
  // Checks made in the agent are still returned by start() at once.
  CHECK_THAT(n.L->start(n.spec(40, {"/no/such/binary"})), Catch::Contains("not found"));
  // Not executable by the user: start() returns at once, the end says why.
  std::string script = n.dir.path + "/private.sh";
  std::ofstream(script) << "#!/bin/sh\necho hi\n";
  ::chmod(script.c_str(), 0700);
  auto p = n.spec(41, {script});
  p.user = test_user();
  p.stdout_path = p.stderr_path = "/dev/null";
  p.cwd = "/";
  REQUIRE(n.L->start(p) == "");
  auto e = n.wait_end(41, 10000);
  REQUIRE(e);
  CHECK(e->reason == EndReason::LaunchFailed);
  CHECK(e->exit_code == -1);
  CHECK_THAT(e->message, Catch::Contains("cannot start job 41: execve " + script) &&
                             Catch::Contains("Permission denied") && Catch::Contains("as user " + p.user));
  // stdout into a FIFO nobody reads.
  std::string fifo = n.dir.path + "/fifo";
  REQUIRE(::mkfifo(fifo.c_str(), 0666) == 0);
  auto f = n.spec(42, {"/bin/true"});
  f.stdout_path = fifo;
  REQUIRE(n.L->start(f) == "");
  e = n.wait_end(42, 10000);
  REQUIRE(e);
  CHECK(e->reason == EndReason::LaunchFailed);
  CHECK_THAT(e->message, Catch::Contains("open stdout " + fifo));
  // A good job between them runs in its slot, from a shepherd forked by the server.
  const std::vector<std::string> argv = {"/bin/sh", "-c",
                                         "tr '\\0' ' ' < /proc/$PPID/cmdline; grep -c . /proc/self/cgroup >/dev/null; exit 6"};
  REQUIRE(n.L->start(n.spec(43, argv)) == "");
  CHECK(n.L->cancel(43) == "");  // settles first: the shepherd is in the slot before the kill
  e = n.wait_end(43, 10000);
  REQUIRE(e);
  CHECK(e->reason == EndReason::Cancelled);
  REQUIRE(n.L->start(n.spec(44, argv)) == "");
  e = n.wait_end(44, 10000);
  REQUIRE(e);
  CHECK(e->reason == EndReason::Failed);
  CHECK(e->exit_code == 6);
  CHECK(n.out(44).find("corral-shepherd --server") != std::string::npos);
  CHECK(n.L->jobs().empty());
  CHECK(n.leftovers().empty());
  // No record, exit or failure file is left in the state dir.
  std::error_code ec;
  CHECK(std::distance(std::filesystem::directory_iterator(n.cfg.state_dir, ec), {}) == 0);
}

TEST_CASE("a dead shepherd server is restarted by the next start", "[node][launcher]") {
  if (!nodetest::need_cgroups()) return;
  Node n("corral_t_launch");
  REQUIRE(n.L->start(n.spec(45, {"/bin/true"})) == "");
  REQUIRE(n.wait_end(45, 10000));
  // Kill the server (the only corral-shepherd child of this process): the next job still starts.
  pid_t server = 0;
  for (auto& d : std::filesystem::directory_iterator("/proc")) {
    std::string s = slurp(d.path().string() + "/stat");
    auto r = s.rfind(')');
    if (s.find("(corral-shepherd)") == std::string::npos || r == std::string::npos) continue;
    std::istringstream in(s.substr(r + 2));
    std::string state;
    pid_t ppid = 0;
    in >> state >> ppid;
    if (ppid == ::getpid() && state != "Z") server = static_cast<pid_t>(std::stol(d.path().filename().string()));
  }
  REQUIRE(server > 0);
  REQUIRE(::kill(server, SIGKILL) == 0);
  // Dead with its request socket closed: its main thread shows as a zombie while its launch
  // threads, still exiting, hold the socket, and a request sent then is read by nobody (under
  // load the next start then got "no report from its shepherd"). Gone once no thread but the
  // zombie main one is left.
  REQUIRE(wait_until([&] {
    std::error_code ec;
    int threads = 0;
    for (auto& t : std::filesystem::directory_iterator("/proc/" + std::to_string(server) + "/task", ec)) {
      std::string st = slurp(t.path().string() + "/stat");
      threads += !st.empty() && st.substr(st.rfind(')') + 2, 1) != "Z";
    }
    return threads == 0;
  }, 10000));
  REQUIRE(n.L->start(n.spec(46, {"/bin/true"})) == "");
  auto e = n.wait_end(46, 10000);
  REQUIRE(e);
  CHECK(e->reason == EndReason::Completed);
  CHECK(n.leftovers().empty());
}

TEST_CASE("the server is every job's parent and reaper; a leftover slot of the same id is replaced",
          "[node][launcher]") {
  if (!nodetest::need_cgroups()) return;
  Node n("corral_t_launch");
  // A leftover slot named like the next job (an earlier life), with limits the job must not get.
  n.L->cgroups().create(slot_name(60), SlotLimits{{}, {}, 8});
  // Each job prints its parent's pid and command line, then exits with its own code.
  const std::string probe = "echo $PPID; tr '\\0' ' ' < /proc/$PPID/cmdline; echo; "
                            "cat /sys/fs/cgroup/memory/" + n.cfg.cgroup_parent + "/job.$CORRAL_JOBID/memory.limit_in_bytes; exit ";
  REQUIRE(n.L->start(n.spec(60, {"/bin/sh", "-c", probe + "3"})) == "");
  REQUIRE(n.L->start(n.spec(61, {"/bin/sh", "-c", probe + "4"})) == "");
  std::optional<JobEnd> e60, e61;  // both ends, whichever comes first
  REQUIRE(wait_until([&] {
    for (auto& e : n.L->poll()) (e.id == 60 ? e60 : e61) = e;
    return e60 && e61;
  }, 10000));
  REQUIRE(e60);
  REQUIRE(e61);
  CHECK(e60->exit_code == 3);
  CHECK(e61->exit_code == 4);
  std::istringstream o60(n.out(60)), o61(n.out(61));
  std::string ppid60, ppid61, cmd60, cmd61, lim60;
  std::getline(o60, ppid60);
  std::getline(o60, cmd60);
  std::getline(o60, lim60);
  std::getline(o61, ppid61);
  std::getline(o61, cmd61);
  // One server forked nothing per job: both jobs are its direct children.
  CHECK(!ppid60.empty());
  CHECK(ppid60 == ppid61);
  CHECK(cmd60.find("corral-shepherd --server") != std::string::npos);
  CHECK(cmd61 == cmd60);
  // The leftover's 8 MB limit is gone: the job got a fresh slot without a limit.
  CHECK(lim60.size() > 12);
  // The server reaped both: no zombie child of it is left.
  bool zombie = false;
  for (auto& d : std::filesystem::directory_iterator("/proc")) {
    std::string s = slurp(d.path().string() + "/stat");
    auto r = s.rfind(')');
    if (r == std::string::npos) continue;
    std::istringstream in(s.substr(r + 2));
    std::string state, ppid;
    in >> state >> ppid;
    zombie |= ppid == ppid60 && state == "Z";
  }
  CHECK(!zombie);
  CHECK(n.leftovers().empty());
}

TEST_CASE("a server outlives its launcher until its last job ends, and writes that job's status",
          "[node][launcher]") {
  if (!nodetest::need_cgroups()) return;
  Node n("corral_t_launch");
  REQUIRE(n.L->start(n.spec(62, {"/bin/sh", "-c", "sleep 0.3; exit 7"})) == "");
  REQUIRE(wait_until([&] { return !n.L->cgroups().pids(slot_name(62)).empty(); }, 5000));
  // The server: the job's parent.
  std::string jst = slurp("/proc/" + std::to_string(n.L->cgroups().pids(slot_name(62)).at(0)) + "/stat");
  std::istringstream jin(jst.substr(jst.rfind(')') + 2));
  std::string jstate;
  pid_t server = 0;
  jin >> jstate >> server;
  REQUIRE(server > 1);
  n.L.reset();  // the agent goes; the job runs on, its server stays for it
  // The job ends while no launcher watches, and then the server is gone too (reaped by this
  // process, its parent).
  CHECK(wait_until([&] { return ::waitpid(server, nullptr, WNOHANG) == server || ::kill(server, 0) != 0; }, 5000));
  std::string status = slurp(n.cfg.state_dir + "/job.62.exit");
  REQUIRE(!status.empty());
  CHECK(WIFEXITED(std::stoi(status)));
  CHECK(WEXITSTATUS(std::stoi(status)) == 7);
  n.L = std::make_unique<Launcher>(discover(n.cfg.jobfs_root), n.cfg);
  auto rec = n.L->recover(RecoverMode::Adopt);
  REQUIRE(rec.size() == 1);
  CHECK(rec[0].adopted);
  auto e = n.wait_end(62, 5000);
  REQUIRE(e);
  CHECK(e->reason == EndReason::Failed);
  CHECK(e->exit_code == 7);
  CHECK(n.leftovers().empty());
}

// An agent may restart just as a job exits: the job's process has left its cgroups and its
// server has not yet written the status. The job ended; the restarted agent must report that
// end, never take the job for lost (and run it again).
TEST_CASE("a job caught between its exit and its status being written is adopted as ended",
          "[node][launcher]") {
  if (!nodetest::need_cgroups()) return;
  Node n("corral_t_launch");
  std::string go = n.dir.path + "/go", mark = n.dir.path + "/66.ran";
  REQUIRE(n.L->start(n.spec(66, {"/bin/sh", "-c", "echo x >> " + mark + "; while [ ! -e " + go +
                                                      " ]; do sleep 0.01; done; exit 9"})) == "");
  REQUIRE(wait_until([&] { return !n.L->cgroups().pids(slot_name(66)).empty(); }, 5000));
  pid_t job = n.L->cgroups().pids(slot_name(66)).at(0);
  std::string jst = slurp("/proc/" + std::to_string(job) + "/stat");
  std::istringstream jin(jst.substr(jst.rfind(')') + 2));
  std::string jstate;
  pid_t server = 0;
  jin >> jstate >> server;
  REQUIRE(server > 1);
  REQUIRE(::kill(server, SIGSTOP) == 0);  // the status is held back while the job exits
  std::ofstream(go).put('\n');
  // The job is a zombie: out of its cgroups, not reaped, no status written.
  REQUIRE(wait_until([&] { return n.L->cgroups().pids(slot_name(66)).empty() && !process_alive(job); }, 5000));
  CHECK(!std::filesystem::exists(n.cfg.state_dir + "/job.66.exit"));
  n.L.reset();
  n.L = std::make_unique<Launcher>(discover(n.cfg.jobfs_root), n.cfg);
  // The server resumes while recover() looks (the pause only makes sure it looks first).
  std::thread resume([server] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    ::kill(server, SIGCONT);
  });
  auto rec = n.L->recover(RecoverMode::Adopt);
  resume.join();
  REQUIRE(rec.size() == 1);
  INFO(rec[0].message);
  CHECK(rec[0].adopted);
  auto e = n.wait_end(66, 5000);
  REQUIRE(e);
  CHECK(e->reason == EndReason::Failed);
  CHECK(e->exit_code == 9);
  CHECK(slurp(mark) == "x\n");
  CHECK(n.leftovers().empty());
}

// The server vforks on its launch thread while its main thread reaps: jobs that exit at once,
// started in a burst with a failing launch among them, each end with its own code, once.
TEST_CASE("a burst of jobs that exit at once: every status exact, a failed launch among them",
          "[node][launcher]") {
  if (!nodetest::need_cgroups()) return;
  Node n("corral_t_launch");
  n.cfg.async_start = true;
  n.relaunch();
  std::string fifo = n.dir.path + "/burst.fifo";
  REQUIRE(::mkfifo(fifo.c_str(), 0666) == 0);
  const std::uint64_t first = 70, last = 99, bad = 85;
  for (std::uint64_t id = first; id <= last; ++id) {
    auto s = n.spec(id, {"/bin/sh", "-c", "exit " + std::to_string(id % 40)});
    if (id == bad) s.stdout_path = fifo;  // fails in the job's setup, on the server's launch thread
    REQUIRE(n.L->start(s) == "");
  }
  std::map<std::uint64_t, JobEnd> ends;
  bool twice = false;
  REQUIRE(wait_until([&] {
    for (auto& e : n.L->poll()) twice |= !ends.emplace(e.id, e).second;
    return ends.size() == last - first + 1;
  }, 20000));
  CHECK(!twice);
  for (auto& [id, e] : ends) {
    INFO("job " << id << ": " << e.message);
    if (id == bad) {
      CHECK(e.reason == EndReason::LaunchFailed);
      CHECK_THAT(e.message, Catch::Contains("open stdout " + fifo));
    } else {
      CHECK(e.exit_code == static_cast<int>(id % 40));
      CHECK(e.reason == (id % 40 == 0 ? EndReason::Completed : EndReason::Failed));
    }
  }
  CHECK(n.L->jobs().empty());
  CHECK(n.leftovers().empty());
}

// corrald's mode: poll() reports an end at once and leaves the slot's removal to tidy(), so the
// next job on those cores starts first. Nothing may be lost or leak on the way.
TEST_CASE("defer_cleanup: an ended job's slot goes at tidy(); a requeued id restarts on a clean slot",
          "[node][launcher]") {
  if (!nodetest::need_cgroups()) return;
  Node n("corral_t_launch");
  n.cfg.async_start = true;
  n.cfg.defer_cleanup = true;
  n.relaunch();
  auto has_slot = [&](std::uint64_t id) {
    auto l = n.leftovers();
    return std::find(l.begin(), l.end(), slot_name(id)) != l.end();
  };
  auto state_files = [&](std::uint64_t id) {
    int k = 0;
    for (auto& f : std::filesystem::directory_iterator(n.cfg.state_dir))
      k += f.path().filename().string().rfind("job." + std::to_string(id) + ".", 0) == 0;
    return k;
  };
  // An ordinary end: reported with its code, the slot and files stay until tidy().
  REQUIRE(n.L->start(n.spec(120, {"/bin/sh", "-c", "exit 3"})) == "");
  auto e = n.wait_end(120, 5000);
  REQUIRE(e);
  CHECK(e->reason == EndReason::Failed);
  CHECK(e->exit_code == 3);
  CHECK(!n.L->has(120));
  CHECK(has_slot(120));
  CHECK(state_files(120) > 0);
  CHECK(n.L->tidy().empty());
  CHECK(!has_slot(120));
  CHECK(state_files(120) == 0);
  CHECK(!std::filesystem::exists(n.cfg.ckpt_root + "/120"));
  // What a job left running is killed at tidy() (its slot is destroyed, not just removed).
  std::string pidf = n.dir.path + "/bg.pid";
  REQUIRE(n.L->start(n.spec(121, {"/bin/sh", "-c", "sleep 30 & echo $! > " + pidf + "; exit 0"})) == "");
  e = n.wait_end(121, 5000);
  REQUIRE(e);
  CHECK(e->reason == EndReason::Completed);
  pid_t bg = static_cast<pid_t>(std::stol(slurp(pidf)));
  REQUIRE(bg > 0);
  CHECK(n.L->tidy().empty());
  CHECK(!has_slot(121));
  CHECK(wait_until([&] { return ::kill(bg, 0) != 0; }, 3000));
  // Requeued: its checkpoint dir is kept; the same id starts again before any tidy() and runs in
  // a fresh slot of its own (the old one is removed first, not after).
  REQUIRE(n.L->start(n.spec(122, {"/bin/sh", "-c", "echo one > $CORRAL_CKPT_DIR/mark; exec sleep 30"})) == "");
  // Its content, not its existence: the shell creates the file before it writes to it.
  REQUIRE(wait_until([&] { return slurp(n.cfg.ckpt_root + "/122/mark") == "one\n"; }, 5000));
  REQUIRE(n.L->requeue(122) == "");
  e = n.wait_end(122, 5000);
  REQUIRE(e);
  CHECK(e->reason == EndReason::Preempted);
  CHECK(has_slot(122));
  auto again = n.spec(122, {"/bin/sh", "-c", "cat $CORRAL_CKPT_DIR/mark; sleep 0.5; exit 5"});
  again.restart = true;
  REQUIRE(n.L->start(again) == "");
  CHECK(n.L->tidy().empty());  // nothing of the first run is left to remove: the running one stays
  CHECK(has_slot(122));
  e = n.wait_end(122, 5000);
  REQUIRE(e);
  CHECK(e->exit_code == 5);
  CHECK(n.out(122) == "one\n");
  CHECK(has_slot(122));  // the second run's, waiting for tidy()
  CHECK(n.L->tidy().empty());
  CHECK(n.leftovers().empty());
  CHECK(!std::filesystem::exists(n.cfg.ckpt_root + "/122"));
}
