// End-to-end, from the scheduling core's decisions to real processes: a
// corrald --standalone on a declared 2-core node, the real corral binary.
//   - `-pe smp 1-4` runs on the slot count the planner chose:
//     2 cores when 2 are free, 1 when 1 is; seen in stat JSON, the cpuset and
//     the job's environment; kept across a restart.
//   - NCI priority-run (nci-pbs-policy.txt "Job selection"): an express job
//     suspends a normal one (freezer FROZEN), which resumes when it ends and
//     completes; suspended time does not count against its walltime.
//   - Admin suspend / resume / requeue / checkpoint (root or owner).
#include <catch2/catch.hpp>

#include <algorithm>
#include <ctime>
#include <cstdio>
#include <fstream>

#include "harness.hpp"

using harness::Agent;
using harness::json_field;
using harness::stat_json;
using harness::wait_file;
using harness::wait_state;
using harness::trim;
using harness::freezer_state;

namespace {
constexpr int kNobody = 65534;

// MONITOR passes in a schedule file: each begins with "::::::::".
std::size_t count_passes(const std::string& text) {
  std::size_t n = 0;
  for (std::size_t p = 0; (p = text.find("::::::::\n", p)) != std::string::npos; p += 9) ++n;
  return n;
}

// The schedule file once a pass has been written after `before` passes (corrald runs one after
// every submit: a pass written after the submit returned has seen the job).
std::string passes_after(const std::string& file, std::size_t before) {
  std::string text = harness::slurp(file);
  for (int i = 0; i < 500 && count_passes(text) <= before; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    text = harness::slurp(file);
  }
  return text;
}

// Cancels each job still alive: a short job may have ended on its own by then (not an error).
template <class A>
void cancel_alive(A& a, const std::vector<std::string>& ids) {
  for (const auto& id : ids) {
    auto r = a.cli({"cancel", id});
    INFO("cancel " << id << ": " << r.err);
    CHECK((r.rc == 0 || r.err.find("has already ended") != std::string::npos));
  }
}

double num(const std::string& s) { return s == "null" || s.empty() ? -1 : std::stod(s); }

// The job's view of what it was granted, written to work/<tag>.env. Written
// aside and renamed, so wait_file never sees the first line without the second.
std::string probe(const std::string& tag, const std::string& then = "") {
  return "{ echo ncpus=$CORRAL_NCPUS nslots=$NSLOTS pe=$PE; grep Cpus_allowed_list /proc/self/status; } > " +
         tag + ".env.part && mv " + tag + ".env.part " + tag + ".env; " + then;
}
}  // namespace

TEST_CASE("-pe smp 1-4 runs on the slots the planner grants: 2 when 2 are free, 1 when 1 is", "[agent]") {
  SKIP_UNLESS_ROOT();
  SKIP_UNLESS_ENFORCED();
  Agent a("pe", {"--set", "declare_cores=2", "--set", "poll_interval=0.2"});
  a.start();

  // Two free cores: the largest count of the range the node has.
  auto s = a.submit({"-N", "wide", "-pe", "smp", "1-4", "-l", "walltime=60", "--wrap", probe("wide")});
  INFO(s.err << a.log());
  REQUIRE(s.rc == 0);
  std::string id = trim(s.out);
  REQUIRE(a.cli({"wait", id}).rc == 0);
  std::string js = stat_json(a, id);
  CHECK(json_field(js, "pe") == "smp");
  CHECK(json_field(js, "slots_min") == "1");
  CHECK(json_field(js, "slots_max") == "2");  // "4" capped at the node's cores
  CHECK(json_field(js, "slots") == "2");
  CHECK(js.find("\"cores\":[0,1]") != std::string::npos);
  std::string env = harness::slurp(a.dir + "/work/wide.env");
  CHECK(env.find("ncpus=2 nslots=2 pe=smp") != std::string::npos);
  CHECK(env.find("Cpus_allowed_list:\t0-1") != std::string::npos);

  // One core busy: the range starts now on the one free core rather than wait.
  auto b = a.submit({"-N", "blocker", "-l", "ncpus=1,walltime=600", "--wrap", "sleep 300"});
  REQUIRE(b.rc == 0);
  std::string bid = trim(b.out);
  REQUIRE(wait_state(a, bid, "running") == "running");
  auto n = a.submit({"-N", "narrow", "-pe", "smp", "1-4", "-l", "walltime=60", "--wrap",
                     probe("narrow", "sleep 30")});
  REQUIRE(n.rc == 0);
  std::string nid = trim(n.out);
  REQUIRE(wait_state(a, nid, "running") == "running");
  js = stat_json(a, nid);
  CHECK(json_field(js, "slots") == "1");
  env = wait_file(a.dir + "/work/narrow.env");
  CHECK(env.find("ncpus=1 nslots=1 pe=smp") != std::string::npos);
  std::string bjs = stat_json(a, bid);
  // The two jobs hold different cores, and the job's cpuset is its one core.
  bool b0 = bjs.find("\"cores\":[0]") != std::string::npos;
  CHECK((b0 || bjs.find("\"cores\":[1]") != std::string::npos));
  CHECK(js.find(b0 ? "\"cores\":[1]" : "\"cores\":[0]") != std::string::npos);
  CHECK(env.find(b0 ? "Cpus_allowed_list:\t1\n" : "Cpus_allowed_list:\t0\n") != std::string::npos);
  CHECK(json_field(bjs, "slots") == "1");
  auto node = a.cli({"node", "--json"});
  CHECK(json_field(node.out, "slots_used") == "2");

  // The grant and the range survive a restart (journal) while the job runs.
  auto old_server = harness::children_of(a.pid);
  REQUIRE(old_server.size() == 1);
  a.stop(SIGKILL);
  a.start();
  js = stat_json(a, nid);
  CHECK(json_field(js, "state") == "running");
  CHECK(json_field(js, "slots") == "1");
  CHECK(json_field(js, "pe") == "smp");
  CHECK(json_field(js, "slots_max") == "2");
  REQUIRE(a.cli({"cancel", bid, nid}).rc == 0);
  CHECK(wait_state(a, bid, "ended") == "ended");
  CHECK(wait_state(a, nid, "ended") == "ended");
  CHECK(harness::leftovers(a, old_server) == "");  // before the harness sweeps

  // Bad ranges and -pe with ncpus are refused before anything is queued.
  auto both = a.submit({"-pe", "smp", "2", "-l", "ncpus=2", "--wrap", "true"});
  CHECK(both.rc == 2);
  CHECK(both.err.find("not both") != std::string::npos);
  auto zero = a.submit({"-pe", "smp", "0-2", "--wrap", "true"});
  CHECK(zero.rc == 2);
  CHECK(zero.err.find("start at 1") != std::string::npos);
  auto big = a.submit({"-pe", "smp", "3-", "--wrap", "true"});
  CHECK(big.rc == 1);
  CHECK(big.err.find("exceeds this node's 2 cores") != std::string::npos);
}

TEST_CASE("NCI priority-run through corrald: express suspends normal, which resumes and completes", "[agent]") {
  SKIP_UNLESS_ROOT();
  SKIP_UNLESS_ENFORCED();
  Agent a("nci", {"--set", "declare_cores=2", "--set", "nci=yes", "--set", "nci_require=walltime",
                  "--set", "queues=normal:1,express:2", "--set", "poll_interval=0.2"});
  a.start();
  // About 3 s of its own time; a walltime of 6 s that the suspension would
  // exceed if it counted.
  auto s = a.submit({"-N", "long", "-l", "ncpus=2,walltime=6", "--wrap",
                     "echo $$ > long.pid; i=0; while [ $i -lt 30 ]; do sleep 0.1; i=$((i+1)); done; "
                     "echo finished > long.done"});
  INFO(s.err << a.log());
  REQUIRE(s.rc == 0);
  std::string id = trim(s.out);
  REQUIRE(wait_state(a, id, "running") == "running");
  std::string pid = trim(wait_file(a.dir + "/work/long.pid"));
  REQUIRE(!pid.empty());
  CHECK(freezer_state(pid) == "THAWED");

  // No walltime: refused at submit by the NCI policy, with the reason.
  auto nowall = a.submit({"-q", "express", "--wrap", "true"});
  CHECK(nowall.rc == 1);
  CHECK(nowall.err.find("walltime") != std::string::npos);

  auto e = a.submit({"-N", "urgent", "-q", "express", "-l", "ncpus=2,walltime=60", "--wrap",
                     "echo $$ > urgent.pid; sleep 4"});
  REQUIRE(e.rc == 0);
  std::string eid = trim(e.out);
  REQUIRE(wait_state(a, eid, "running") == "running");
  std::string js = stat_json(a, id);
  CHECK(json_field(js, "state") == "suspended");
  CHECK(json_field(js, "comment").find("priority-run") != std::string::npos);
  CHECK(freezer_state(pid) == "FROZEN");
  std::string upid = trim(wait_file(a.dir + "/work/urgent.pid"));
  CHECK(freezer_state(upid) == "THAWED");
  CHECK(json_field(stat_json(a, eid), "cores") != "[]");

  REQUIRE(a.cli({"wait", eid}).rc == 0);
  auto w = a.cli({"wait", id});
  INFO(a.log());
  CHECK(w.rc == 0);
  js = stat_json(a, id);
  CHECK(json_field(js, "end_reason") == "completed");
  CHECK(harness::slurp(a.dir + "/work/long.done") == "finished\n");
  double sus = num(json_field(js, "suspended_seconds"));
  double wall = num(json_field(js, "end_time")) - num(json_field(js, "start_time"));
  CHECK(sus >= 3.0);  // the express job's 4 s, less scheduling slack
  CHECK(wall > 6.0);  // longer than its walltime on the clock ...
  CHECK(wall - sus < 6.0);  // ... but not in walltime, which excludes the suspension
  std::string log = a.log();
  CHECK(log.find("job " + id + " suspended") != std::string::npos);
  CHECK(log.find("job " + id + " resumed") != std::string::npos);
}

TEST_CASE("admin suspend/resume (root), requeue and checkpoint (owner or root)", "[agent]") {
  SKIP_UNLESS_ROOT();
  Agent a("ctl", {"--set", "declare_cores=2", "--set", "poll_interval=0.2"});
  a.start();
  auto s = a.submit({"-N", "mine", "-l", "ncpus=1,walltime=600", "--wrap",
                     "echo $$ > mine.pid; echo run-$CORRAL_RESTART >> mine.runs; sleep 300"},
                    kNobody);
  INFO(s.err << a.log());
  REQUIRE(s.rc == 0);
  std::string id = trim(s.out);
  REQUIRE(wait_state(a, id, "running") == "running");
  std::string pid = trim(wait_file(a.dir + "/work/mine.pid"));

  // Suspend and resume are root's.
  auto nb = a.cli({"suspend", id}, kNobody);
  CHECK(nb.rc == 1);
  CHECK(nb.err.find("only root may suspend") != std::string::npos);
  auto pend = a.cli({"resume", id});
  CHECK(pend.rc == 1);
  CHECK(pend.err.find("it is running") != std::string::npos);
  auto sus = a.cli({"suspend", id});
  INFO(sus.err);
  CHECK(sus.rc == 0);
  CHECK(sus.out == id + " suspended\n");
  CHECK(json_field(stat_json(a, id), "state") == "suspended");
  CHECK(freezer_state(pid) == "FROZEN");
  // Held: a scheduling pass (triggered by a submit) does not thaw it.
  auto other = a.submit({"-l", "ncpus=1", "--wrap", "true"});
  REQUIRE(a.cli({"wait", trim(other.out)}).rc == 0);
  CHECK(json_field(stat_json(a, id), "state") == "suspended");
  auto res = a.cli({"resume", id});
  CHECK(res.rc == 0);
  CHECK(json_field(stat_json(a, id), "state") == "running");
  CHECK(freezer_state(pid) == "THAWED");

  // Requeue: someone else may not; the owner may. The job runs again.
  auto stranger = a.cli({"requeue", id}, 65533);
  CHECK(stranger.rc == 1);
  CHECK(stranger.err.find("only its owner or root") != std::string::npos);
  auto rq = a.cli({"requeue", id}, kNobody);
  INFO(rq.err << a.log());
  CHECK(rq.rc == 0);
  std::string js;
  for (int i = 0; i < 500; ++i) {
    js = stat_json(a, id);
    if (json_field(js, "requeues") == "1" && json_field(js, "state") == "running") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  CHECK(json_field(js, "requeues") == "1");
  CHECK(json_field(js, "state") == "running");

  // Checkpoint: the job gets its signal, stops, and restarts with CORRAL_RESTART=1.
  for (int i = 0; i < 250 && harness::slurp(a.dir + "/work/mine.runs").size() < 12; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  auto ck = a.cli({"checkpoint", id});
  CHECK(ck.rc == 0);
  for (int i = 0; i < 500; ++i) {
    js = stat_json(a, id);
    if (json_field(js, "requeues") == "2" && json_field(js, "state") == "running") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  CHECK(json_field(js, "requeues") == "2");
  for (int i = 0; i < 250 && harness::slurp(a.dir + "/work/mine.runs").find("run-1") == std::string::npos; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHECK(harness::slurp(a.dir + "/work/mine.runs") == "run-0\nrun-0\nrun-1\n");

  auto unknown = a.cli({"suspend", "999"});
  CHECK(unknown.rc == 1);
  CHECK(unknown.err.find("unknown job id 999") != std::string::npos);
  REQUIRE(a.cli({"cancel", id}).rc == 0);
  a.cli({"wait", id});
  auto ended = a.cli({"requeue", id});
  CHECK(ended.rc == 1);
  CHECK(ended.err.find("ended") != std::string::npos);
}

TEST_CASE("NCI start window through corrald: an overdue job suspends the one holding its cores", "[agent]") {
  SKIP_UNLESS_ROOT();
  SKIP_UNLESS_ENFORCED();
  // Window T = 2 s, so the bound is T + the window quantum (= T) = 4 s, plus
  // up to one cycle_interval (0.5 s) until the pass that sees it overdue.
  Agent a("window", {"--set", "declare_cores=2", "--set", "nci=yes", "--set", "nci_require=walltime",
                     "--set", "nci_start_window=2", "--set", "cycle_interval=0.5", "--set", "poll_interval=0.2"});
  a.start();
  auto s = a.submit({"-N", "hog", "-l", "ncpus=2,walltime=120", "--wrap", "echo $$ > hog.pid; sleep 30"});
  INFO(s.err << a.log());
  REQUIRE(s.rc == 0);
  std::string hog = trim(s.out);
  REQUIRE(wait_state(a, hog, "running") == "running");
  std::string pid = trim(wait_file(a.dir + "/work/hog.pid"));
  // Same queue and priority, fewer than 16 cpus: neither priority-run nor
  // parallel-run may suspend the hog; only the start window can.
  auto w = a.submit({"-N", "late", "-l", "ncpus=2,walltime=60", "--wrap", "sleep 1"});
  REQUIRE(w.rc == 0);
  std::string late = trim(w.out);
  CHECK(json_field(stat_json(a, late), "state") == "pending");
  REQUIRE(wait_state(a, late, "running") == "running");
  std::string js = stat_json(a, late);
  double waited = num(json_field(js, "start_time")) - num(json_field(js, "submit_time"));
  CHECK(waited >= 1.0);  // not before its window closed (the core counts whole seconds)
  CHECK(waited < 6.0);   // the 4.5 s bound plus slack for a loaded machine
  std::string hs = stat_json(a, hog);
  CHECK(json_field(hs, "state") == "suspended");
  CHECK(json_field(hs, "comment").find("window") != std::string::npos);
  CHECK(freezer_state(pid) == "FROZEN");
  REQUIRE(a.cli({"wait", late}).rc == 0);
  // The hog gets its cores back when the late job ends.
  CHECK(wait_state(a, hog, "running") == "running");
  CHECK(freezer_state(pid) == "THAWED");
  REQUIRE(a.cli({"cancel", hog}).rc == 0);
}

// checkpoint_signal / checkpoint_grace (docs/configuration.md): corrald sends the configured signal, a
// job that traps it writes its checkpoint dir and the restart sees it; a job that ignores it is
// stopped once the configured grace is over (not the default 30 s).
TEST_CASE("checkpoint_signal and checkpoint_grace from corrald's config", "[agent]") {
  SKIP_UNLESS_ROOT();
  Agent a("cksig", {"--set", "declare_cores=2", "--set", "poll_interval=0.2", "--set",
                    "checkpoint_signal=USR2", "--set", "checkpoint_grace=2"});
  a.start();
  // Traps USR2 only: the default USR1 would kill it without a checkpoint written.
  auto s = a.submit({"-N", "trap", "-l", "ncpus=1,walltime=600", "--wrap",
                     "if [ \"$CORRAL_RESTART\" = 1 ]; then cat \"$CORRAL_CKPT_DIR/state\" > trap.seen; exit 0; fi; "
                     "trap 'echo saved-$CORRAL_JOBID > \"$CORRAL_CKPT_DIR/state\"; exit 0' USR2; "
                     "echo $$ > trap.pid; while :; do sleep 0.1; done"},
                    kNobody);
  INFO(s.err << a.log());
  REQUIRE(s.rc == 0);
  std::string id = trim(s.out);
  REQUIRE(!trim(wait_file(a.dir + "/work/trap.pid")).empty());
  auto ck = a.cli({"checkpoint", id});
  INFO(ck.err);
  REQUIRE(ck.rc == 0);
  INFO(a.log());
  CHECK(wait_state(a, id, "ended", 15000) == "ended");  // bounded: a restart that missed its checkpoint loops
  CHECK(harness::slurp(a.dir + "/work/trap.seen") == "saved-" + id + "\n");
  std::string js = stat_json(a, id);
  CHECK(json_field(js, "requeues") == "1");
  CHECK(json_field(js, "end_reason") == "completed");
  if (json_field(js, "state") != "ended") a.cli({"cancel", id});

  // Ignores the signal: stopped after the 2 s grace, then queued again.
  auto g = a.submit({"-N", "deaf", "-l", "ncpus=1,walltime=600", "--wrap",
                     "trap '' USR2; echo $$ > deaf.pid; sleep 300"}, kNobody);
  REQUIRE(g.rc == 0);
  std::string gid = trim(g.out);
  REQUIRE(!trim(wait_file(a.dir + "/work/deaf.pid")).empty());
  auto t0 = std::chrono::steady_clock::now();
  REQUIRE(a.cli({"checkpoint", gid}).rc == 0);
  // Requeued no sooner than its grace (took >= 1.9 below), and no later than the grace and slack.
  for (int i = 0; i < 500 && json_field(stat_json(a, gid), "requeues") != "1"; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  CHECK(json_field(stat_json(a, gid), "requeues") == "1");
  CHECK(took >= 1.9);
  CHECK(took < 8.0);  // the grace (2 s) plus slack; the default would be 30 s
  CHECK(a.log().find("did not exit within the 2 s grace after signal 12") != std::string::npos);
  REQUIRE(a.cli({"cancel", gid}).rc == 0);
  a.cli({"wait", gid});

  // A bad value stops corrald at start with the key and why.
  auto bad = harness::run({harness::env_or("CORRALD", "build/agent/corrald"), "--standalone", "--no-config",
                           "--set", "checkpoint_signal=KILL"});
  CHECK(bad.rc == 2);
  CHECK(bad.err.find("checkpoint_signal: signal KILL cannot be caught") != std::string::npos);
}

// A checkpoint right after the start (well under 1 s of work) is still a checkpoint: the restart
// gets CORRAL_RESTART=1 and the checkpoint dir the job wrote (the restart flag once counted whole
// seconds of work, so such a job lost its checkpoint and started from scratch).
TEST_CASE("a job checkpointed at once restarts with CORRAL_RESTART=1 and its checkpoint", "[agent]") {
  SKIP_UNLESS_ROOT();
  Agent a("cknow", {"--set", "declare_cores=1", "--set", "poll_interval=0.2"});
  a.start();
  auto s = a.submit({"-N", "now", "-l", "ncpus=1,walltime=600", "--wrap",
                     "echo run-$CORRAL_RESTART >> now.runs; "
                     "if [ \"$CORRAL_RESTART\" = 1 ]; then cat \"$CORRAL_CKPT_DIR/state\" > now.seen; exit 0; fi; "
                     "trap 'echo kept > \"$CORRAL_CKPT_DIR/state\"; exit 0' USR1; "
                     "echo $$ > now.pid; while :; do sleep 0.1; done"},
                    kNobody);
  INFO(s.err << a.log());
  REQUIRE(s.rc == 0);
  std::string id = trim(s.out);
  REQUIRE(!trim(wait_file(a.dir + "/work/now.pid")).empty());
  REQUIRE(a.cli({"checkpoint", id}).rc == 0);  // no sleep: well within the first second
  INFO(a.log());
  CHECK(wait_state(a, id, "ended", 15000) == "ended");
  std::string js = stat_json(a, id);
  CHECK(json_field(js, "requeues") == "1");
  CHECK(json_field(js, "end_reason") == "completed");
  CHECK(harness::slurp(a.dir + "/work/now.runs") == "run-0\nrun-1\n");
  CHECK(harness::slurp(a.dir + "/work/now.seen") == "kept\n");
  if (json_field(js, "state") != "ended") a.cli({"cancel", id});
}

// Every end records why, runs stopped to requeue the job too (cancelled,
// preempted): `corral stat --json` lists each run with its start, end and end_reason; a requeue
// and a checkpoint each end one run "preempted"; the job's id, state, exit_code and end_reason
// keep their meaning (its own end).
TEST_CASE("runs stopped by requeue or checkpoint end preempted in stat's runs; the job's own fields are its end", "[agent]") {
  SKIP_UNLESS_ROOT();
  Agent a("runs", {"--set", "declare_cores=1", "--set", "poll_interval=0.2"});
  a.start();
  auto s = a.submit({"-N", "thrice", "-l", "ncpus=1,walltime=600", "--wrap",
                     "echo run >> thrice.runs; if [ \"$CORRAL_RESTART\" = 1 ]; then exit 4; fi; "
                     "trap 'exit 0' USR1; while :; do sleep 0.1; done"},
                    kNobody);
  INFO(s.err << a.log());
  REQUIRE(s.rc == 0);
  std::string id = trim(s.out);
  auto runs_written = [&](std::size_t n) {
    for (int i = 0; i < 500; ++i) {
      std::string r = harness::slurp(a.dir + "/work/thrice.runs");
      if (static_cast<std::size_t>(std::count(r.begin(), r.end(), '\n')) >= n) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  };
  REQUIRE(runs_written(1));
  std::string js = stat_json(a, id);
  auto runs = harness::runs_of(js);
  REQUIRE(runs.size() == 1);  // the current run
  CHECK(json_field(runs[0], "end") == "null");
  CHECK(json_field(runs[0], "end_reason") == "null");
  CHECK(json_field(runs[0], "start") == json_field(js, "start_time"));

  REQUIRE(a.cli({"requeue", id}).rc == 0);
  REQUIRE(runs_written(2));
  js = stat_json(a, id);
  CHECK(json_field(js, "state") == "running");
  CHECK(json_field(js, "end_reason") == "null");  // the job has not ended
  CHECK(json_field(js, "exit_code") == "null");
  runs = harness::runs_of(js);
  REQUIRE(runs.size() == 2);
  CHECK(json_field(runs[0], "end_reason") == "preempted");
  CHECK(json_field(runs[0], "comment").rfind("requeued: ", 0) == 0);
  CHECK(json_field(runs[0], "comment").find("requeued", 1) == std::string::npos);  // the kind said once
  CHECK(json_field(runs[1], "end") == "null");

  REQUIRE(a.cli({"checkpoint", id}).rc == 0);
  CHECK(wait_state(a, id, "ended", 15000) == "ended");
  js = stat_json(a, id);
  CHECK(json_field(js, "id") == id);
  CHECK(json_field(js, "state") == "ended");
  CHECK(json_field(js, "end_reason") == "failed");  // the last run's end: exit 4
  CHECK(json_field(js, "exit_code") == "4");
  CHECK(json_field(js, "requeues") == "2");
  runs = harness::runs_of(js);
  INFO(js);
  REQUIRE(runs.size() == 3);
  CHECK(json_field(runs[0], "end_reason") == "preempted");
  CHECK(json_field(runs[1], "end_reason") == "preempted");
  CHECK(json_field(runs[1], "comment").rfind("checkpointed: ", 0) == 0);
  CHECK(json_field(runs[1], "comment").find("checkpointed", 1) == std::string::npos);  // not "checkpointed: checkpointed"
  CHECK(json_field(runs[1], "comment").find("preempted:") == std::string::npos);
  CHECK(json_field(runs[1], "exit_code") == "0");  // it trapped the signal and exited 0
  CHECK(json_field(runs[2], "end_reason") == "failed");
  CHECK(json_field(runs[2], "exit_code") == "4");
  for (std::size_t i = 0; i < runs.size(); ++i) {
    double st = num(json_field(runs[i], "start")), en = num(json_field(runs[i], "end"));
    CHECK(st > 0);
    CHECK(en >= st);
    if (i + 1 < runs.size()) CHECK(num(json_field(runs[i + 1], "start")) >= en);
  }
  CHECK(json_field(runs[2], "end") == json_field(js, "end_time"));

  // A job cancelled before it ever started has no run.
  auto blk = a.submit({"-l", "ncpus=1", "--wrap", "sleep 30"});
  auto p = a.submit({"-l", "ncpus=1", "--wrap", "true"});
  REQUIRE(a.cli({"cancel", trim(p.out)}).rc == 0);
  CHECK(harness::runs_of(stat_json(a, trim(p.out))).empty());
  CHECK(json_field(stat_json(a, trim(p.out)), "end_reason") == "cancelled");
  a.cli({"cancel", trim(blk.out)});
}

// PBA from corrald's config (pba, pba_plan, pba_preempt_after, preempt_mode; docs/configuration.md):
// a project job within its allocation that waits longer than pba_preempt_after takes the cores
// of a job of no project (pba-synopsys-patent.txt: "free up one over-subscribed job slot for
// each under-subscribed job that has been pending for more than a configurable time period"),
// which is requeued (its run ends preempted) or, with preempt_mode = suspend, frozen and resumed
// once the project job is done.
TEST_CASE("PBA through corrald: a project job within its allocation preempts a job of no project", "[agent]") {
  SKIP_UNLESS_ROOT();
  std::string plan = harness::make_tmpdir("pbaplan") + "/projects.plan";
  std::ofstream(plan) << "# the test's plan\nproject chip\nmember chip root\nalloc chip +0 2\n";
  for (std::string mode : {"requeue", "suspend"}) {
    INFO("preempt_mode " << mode);
    Agent a("pba" + mode.substr(0, 3),
            {"--set", "declare_cores=2", "--set", "poll_interval=0.2", "--set", "cycle_interval=0.5",
             "--set", "pba=yes", "--set", "pba_plan=" + plan, "--set", "pba_preempt_after=2",
             "--set", "preempt_mode=" + mode});
    a.start();
    INFO(a.log());
    CHECK(a.log().find("PBA: plan " + plan + ": 1 project(s), 2 slot(s) allocated this week; preemption after 2 s pending, by " + mode) != std::string::npos);
    auto v = a.submit({"-N", "victim", "-l", "ncpus=2,walltime=600", "--wrap",
                       "echo $$ > victim.pid; echo run-$CORRAL_RESTART >> victim.runs; sleep 300"},
                      kNobody);
    REQUIRE(v.rc == 0);
    std::string vid = trim(v.out);
    REQUIRE(wait_state(a, vid, "running") == "running");
    std::string vpid = trim(wait_file(a.dir + "/work/victim.pid"));
    // No -P: pre-qualification fails, so it runs in the lowest queue (and may be preempted).
    CHECK(json_field(stat_json(a, vid), "queue") == "lowest");

    auto p = a.submit({"-N", "alloc", "-P", "chip", "-l", "ncpus=2,walltime=60", "--wrap", "sleep 2"});
    REQUIRE(p.rc == 0);
    std::string pid = trim(p.out);
    CHECK(json_field(stat_json(a, pid), "state") == "pending");
    auto t0 = std::chrono::steady_clock::now();
    REQUIRE(wait_state(a, pid, "running", 15000) == "running");
    double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    CHECK(waited >= 1.0);  // not before pba_preempt_after (2 s, counted in whole seconds)
    std::string vjs = stat_json(a, vid);
    INFO(vjs);
    const std::string why = "PBA: slot given to job " + pid + " of under-subscribed project 'chip'";
    if (mode == "requeue") {
      CHECK(json_field(vjs, "state") == "pending");
      CHECK(json_field(vjs, "requeues") == "1");
      auto runs = harness::runs_of(vjs);
      REQUIRE(runs.size() == 1);
      CHECK(json_field(runs[0], "end_reason") == "preempted");
      CHECK(json_field(runs[0], "comment") == "requeued: " + why + " (allocation 2 slots)");
      CHECK(!harness::alive(static_cast<pid_t>(std::stol(vpid))));
    } else {
      CHECK(json_field(vjs, "state") == "suspended");
      CHECK(json_field(vjs, "comment").find(why) != std::string::npos);
      CHECK(freezer_state(vpid) == "FROZEN");
      CHECK(json_field(vjs, "requeues") == "0");
    }
    REQUIRE(a.cli({"wait", pid}).rc == 0);
    CHECK(json_field(stat_json(a, pid), "end_reason") == "completed");
    // The victim gets its cores back: restarted (requeue) or thawed (suspend).
    REQUIRE(wait_state(a, vid, "running", 15000) == "running");
    if (mode == "requeue") {
      for (int i = 0; i < 250 && harness::slurp(a.dir + "/work/victim.runs").size() < 12; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      CHECK(harness::slurp(a.dir + "/work/victim.runs") == "run-0\nrun-0\n");
    } else {
      CHECK(freezer_state(vpid) == "THAWED");
      CHECK(harness::slurp(a.dir + "/work/victim.runs") == "run-0\n");
      CHECK(json_field(stat_json(a, vid), "comment").find("PBA") != std::string::npos);
    }
    REQUIRE(a.cli({"cancel", vid}).rc == 0);
    a.cli({"wait", vid});
    // The plan's relative dates (+0 weeks here) count from the first start with
    // PBA, kept in state_dir: a restart moves no allocation or deadline.
    const std::string origin = harness::slurp(a.dir + "/state/pba_origin");
    REQUIRE(!origin.empty());
    // Past the second the origin holds: an origin written again would differ.
    while (std::time(nullptr) <= std::stoll(origin)) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    a.stop(SIGTERM);
    a.start();
    CHECK(harness::slurp(a.dir + "/state/pba_origin") == origin);
  }

  // Bad PBA settings stop corrald at start with the reason.
  std::string bad = plan + ".bad";
  std::ofstream(bad) << "project chip\nalloc nosuch +0 2\n";
  std::string st = harness::make_tmpdir("pbabad");
  for (const auto& [set, msg] : std::vector<std::pair<std::string, std::string>>{
           {"pba_plan=", "pba = yes needs pba_plan = FILE"},
           {"pba_plan=" + plan + ".missing", "pba_plan " + plan + ".missing: cannot read: No such file or directory"},
           {"pba_plan=" + bad, "pba_plan " + bad + ": line 2:"}}) {
    auto r = harness::run({harness::env_or("CORRALD", "build/agent/corrald"), "--standalone", "--no-config",
                           "--state-dir", st + "/state", "--socket", st + "/s.sock", "--pub", "none",
                           "--set", "pba=yes", "--set", set});
    INFO(set << ": " << r.err);
    CHECK(r.rc == 1);
    CHECK(r.err.find(msg) != std::string::npos);
  }
  auto r = harness::run({harness::env_or("CORRALD", "build/agent/corrald"), "--no-config", "--set", "preempt_mode=kill"});
  CHECK(r.rc == 2);
  CHECK(r.err.find("preempt_mode: expected requeue or suspend, got 'kill'") != std::string::npos);
  (void)!std::system(("rm -rf '" + st + "' '" + plan.substr(0, plan.rfind('/')) + "'").c_str());
}

TEST_CASE("MONITOR through corrald: monitor_file gets every pass's schedule lines; reserve with max_reservation",
          "[agent]") {
  // sge6-reservation-backfill.txt 2d (MONITOR) and 3 (max_reservation, -R y):
  // on 2 declared cores, a 1-core job runs; a 2-core -R y job cannot start
  // and is reserved for the first job's planned end; the schedule file (never
  // truncated) shows RUNNING and RESERVING lines after a `::::::::` line.
  SKIP_UNLESS_ROOT();
  const std::string sched_dir = harness::make_tmpdir("monitor");
  const std::string file = sched_dir + "/schedule";
  Agent a("monitor", {"--set", "declare_cores=2", "--set", "backfill=reserve", "--set", "max_reservation=1",
                      "--set", "monitor_file=" + file});
  a.start();
  auto b = a.submit({"-N", "blocker", "-l", "ncpus=1,walltime=600", "--wrap", "sleep 300"});
  REQUIRE(b.rc == 0);
  const std::string bid = trim(b.out);
  REQUIRE(wait_state(a, bid, "running") == "running");
  auto w = a.submit({"-N", "wide", "-R", "y", "-l", "ncpus=2,walltime=60", "--wrap", "true"});
  REQUIRE(w.rc == 0);
  const std::string wid = trim(w.out);
  std::string text;
  for (int i = 0; i < 100 && text.find(wid + ":1:RESERVING:") == std::string::npos; ++i) {
    usleep(50000);
    text = harness::slurp(file);
  }
  INFO(text << a.log());
  CHECK(text.rfind("::::::::\n", 0) == 0);                             // begins an interval
  CHECK(text.find(bid + ":1:STARTING:") != std::string::npos);        // the pass that started it
  CHECK(text.find(bid + ":1:RUNNING:") != std::string::npos);         // later passes
  CHECK(text.find(wid + ":1:RESERVING:") != std::string::npos);       // -R y, max_reservation 1
  CHECK(text.find(":Q:") != std::string::npos);                       // queue-instance slot lines
  // Without -R y nothing is reserved under the reserve policy: seen in a pass after the submit.
  const std::size_t seps_before = count_passes(harness::slurp(file));
  auto n = a.submit({"-N", "plain", "-l", "ncpus=2,walltime=60", "--wrap", "true"});
  REQUIRE(n.rc == 0);
  const std::string nid = trim(n.out);
  text = passes_after(file, seps_before);
  CHECK(text.find(nid + ":1:RESERVING:") == std::string::npos);
  cancel_alive(a, {bid, wid, nid});
  CHECK(wait_state(a, nid, "ended") == "ended");

  // max_reservation = 0: no job is reserved, -R y or not.
  {
    const std::string file0 = sched_dir + "/schedule0";
    Agent z("monitor0", {"--set", "declare_cores=2", "--set", "backfill=reserve", "--set", "max_reservation=0",
                         "--set", "monitor_file=" + file0});
    z.start();
    auto zb = z.submit({"-l", "ncpus=1,walltime=600", "--wrap", "sleep 300"});
    REQUIRE(zb.rc == 0);
    REQUIRE(wait_state(z, trim(zb.out), "running") == "running");
    const std::size_t zseps = count_passes(harness::slurp(file0));
    auto zw = z.submit({"-R", "y", "-l", "ncpus=2,walltime=60", "--wrap", "true"});
    REQUIRE(zw.rc == 0);
    const std::string zid = trim(zw.out);
    std::string t0 = passes_after(file0, zseps);
    INFO(t0);
    CHECK(t0.find(":RUNNING:") != std::string::npos);
    CHECK(t0.find(":RESERVING:") == std::string::npos);
    cancel_alive(z, {trim(zb.out), zid});
  }

  // A monitor_file corrald cannot open: a clear error at start, exit 1.
  auto bad = harness::run({harness::env_or("CORRALD", "build/agent/corrald"), "--standalone", "--no-config",
                           "--set", "monitor_file=/nonexistent-dir/schedule", "--state-dir", sched_dir + "/st",
                           "--socket", sched_dir + "/s.sock", "--pub", "none", "--declare-cores", "1"});
  CHECK(bad.rc != 0);
  CHECK(bad.err.find("monitor_file: cannot open /nonexistent-dir/schedule") != std::string::npos);
  std::system(("rm -rf '" + sched_dir + "'").c_str());
}
