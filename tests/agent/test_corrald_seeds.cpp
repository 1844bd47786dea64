// The seed documents' rules through a live corrald (not only in `corral sim`):
//   - checkpoint-based backfilling: a backfilled job is marked so, keeps the
//     mark across a restart, and is checkpointed at its window's end so the
//     reserved head job starts (split_factor, split_threshold);
//   - DURATION_OFFSET (duration_offset) on running jobs too: the next
//     reservation does not move earlier when a job starts;
//   - -now y: never reserved, refused when it cannot start at once;
//   - PBA: -P PROJECT:STEP checked against the project's flows, an allocation
//     narrowed to the step matches, and suspend-or-requeue as each job chose
//     (--preempt, CORRAL_PREEMPT, a #CORRAL directive) over the node's
//     preempt_mode.
#include <catch2/catch.hpp>

#include <fstream>
#include <string>
#include <vector>

#include "harness.hpp"
#include "tests/monitor_text.hpp"

using harness::Agent;
using harness::json_field;
using harness::stat_json;
using harness::trim;
using harness::wait_file;
using harness::wait_state;

using corral_test::lines_with;
using corral_test::monitor_field;

namespace {
constexpr int kNobody = 65534;

// Waits until `text_of()` holds `needle` (a pass wrote it); returns the text.
template <class F> std::string wait_text(F text_of, const std::string& needle, int ms = 10000) {
  std::string t;
  for (int i = 0; i < ms / 20 && (t = text_of()).find(needle) == std::string::npos; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  return t;
}

// The checkpoint window of the two cases below: 2 cores, splits of p = 0.05 above 10 s.
std::vector<std::string> window_settings(const std::string& policy) {
  return {"--set", "declare_cores=2", "--set", "policy=" + policy, "--set", "split_factor=0.05",
          "--set", "split_threshold=10", "--set", "duration_offset=0", "--set", "checkpoint_grace=5",
          "--set", "cycle_interval=0.3", "--set", "poll_interval=0.2"};
}

// Submits as nobody, required to succeed; the job's id.
std::string submit_id(const Agent& a, const std::vector<std::string>& args) {
  auto r = a.submit(args, kNobody);
  INFO(r.err << a.log());
  REQUIRE(r.rc == 0);
  return trim(r.out);
}
}  // namespace

TEST_CASE("checkpoint backfilling through corrald: the backfilled job is stopped at its window's end, across a restart",
          "[agent]") {
  // checkpoint-backfill-patent.zh.txt: on 2 cores, A (1 core, planned 8 s) runs; the head H
  // (2 cores) is reserved for A's end; B (1 core, 100 s requested) is split by p = 0.05 to 5 s,
  // fits the window and is backfilled. A ends at 6 s; B's window is over and H still lacks a
  // core: B is checkpointed (it traps the signal, saves, exits) and H starts; B restarts after.
  SKIP_UNLESS_ROOT();
  Agent a("ckbf", window_settings("checkpoint"));
  a.start();
  const std::string aid = submit_id(a, {"-N", "A", "-l", "ncpus=1,walltime=8", "--wrap", "sleep 6"});
  REQUIRE(wait_state(a, aid, "running") == "running");
  const std::string hid =
      submit_id(a, {"-N", "H", "-l", "ncpus=2,walltime=60", "--wrap", "echo $(date +%s.%N) > H.start; sleep 1"});
  // -c: only a checkpointable job may be backfilled past the head's reservation by a split.
  const std::string bid =
      submit_id(a, {"-N", "B", "-c", "-l", "ncpus=1,walltime=100", "--wrap",
                    "if [ \"$CORRAL_RESTART\" = 1 ]; then cat \"$CORRAL_CKPT_DIR/state\" > B.seen; exit 0; fi; "
                    "trap 'echo saved > \"$CORRAL_CKPT_DIR/state\"; exit 0' USR1; "
                    "echo $$ > B.pid; while :; do sleep 0.1; done"});
  REQUIRE(wait_state(a, bid, "running") == "running");
  CHECK(json_field(stat_json(a, hid), "state") == "pending");
  CHECK(json_field(stat_json(a, bid), "backfilled") == "true");
  CHECK(json_field(stat_json(a, aid), "backfilled") == "false");

  // The mark is in the journal: a restart (jobs adopted) keeps it.
  a.stop(SIGTERM);
  a.start();
  CHECK(json_field(stat_json(a, bid), "state") == "running");
  CHECK(json_field(stat_json(a, bid), "backfilled") == "true");

  // A ends; H starts once B's checkpoint is taken, well before B's 100 s.
  REQUIRE(wait_state(a, hid, "running", 20000) == "running");
  std::string bjs = stat_json(a, bid);
  INFO(bjs);
  auto runs = harness::runs_of(bjs);
  REQUIRE(!runs.empty());
  CHECK(json_field(runs[0], "end_reason") == "preempted");
  CHECK(json_field(runs[0], "comment").find("checkpoint backfill window ended for job " + hid) != std::string::npos);
  REQUIRE(a.cli({"wait", hid}).rc == 0);
  REQUIRE(a.cli({"wait", bid}).rc == 0);  // restarted from its checkpoint after H
  CHECK(harness::slurp(a.dir + "/work/B.seen") == "saved\n");
  CHECK(json_field(stat_json(a, bid), "backfilled") == "false");

  // The split settings are checked at start in names.hpp's words.
  auto bad = harness::run({harness::env_or("CORRALD", "build/agent/corrald"), "--no-config", "--set", "split_factor=1.5"});
  CHECK(bad.rc == 2);
  CHECK(bad.err.find("split_factor: expected a number in (0, 1], got '1.5'") != std::string::npos);
}

TEST_CASE("the corral policy through corrald: a job submitted without -c is never split or checkpointed",
          "[agent]") {
  // The same window as above under the default policy: B (no -c) would fit it only split, so it
  // waits; C (-c, submitted after B) is backfilled by a split in its place, then checkpointed for H.
  SKIP_UNLESS_ROOT();
  Agent a("nockpt", window_settings("corral"));
  a.start();
  const std::string aid = submit_id(a, {"-N", "A", "-l", "ncpus=1,walltime=8", "--wrap", "sleep 6"});
  REQUIRE(wait_state(a, aid, "running") == "running");
  const std::string hid = submit_id(a, {"-N", "H", "-l", "ncpus=2,walltime=60", "--wrap", "sleep 1"});
  const std::string bid = submit_id(a, {"-N", "B", "-l", "ncpus=1,walltime=100", "--wrap", "sleep 1"});
  const std::string cid = submit_id(a, {"-N", "C", "-c", "-l", "ncpus=1,walltime=100", "--wrap",
                                        "if [ \"$CORRAL_RESTART\" = 1 ]; then exit 0; fi; "
                                        "trap 'echo saved > \"$CORRAL_CKPT_DIR/state\"; exit 0' USR1; "
                                        "while :; do sleep 0.1; done"});
  // C running proves a pass backfilled past H's reservation: B, older, was passed over.
  REQUIRE(wait_state(a, cid, "running") == "running");
  CHECK(json_field(stat_json(a, cid), "backfilled") == "true");
  CHECK(json_field(stat_json(a, bid), "state") == "pending");
  CHECK(json_field(stat_json(a, bid), "backfilled") == "false");

  REQUIRE(a.cli({"wait", hid}).rc == 0);
  REQUIRE(a.cli({"wait", bid}).rc == 0);
  REQUIRE(a.cli({"wait", cid}).rc == 0);
  std::string bjs = stat_json(a, bid);
  INFO(bjs);
  auto bruns = harness::runs_of(bjs);
  REQUIRE(bruns.size() == 1);  // one run, never stopped
  CHECK(json_field(bruns[0], "end_reason") == "completed");
  CHECK(json_field(bjs, "backfilled") == "false");
  auto cruns = harness::runs_of(stat_json(a, cid));
  REQUIRE(!cruns.empty());
  CHECK(json_field(cruns[0], "end_reason") == "preempted");
  // B's only run began once H had started.
  CHECK(std::stod(json_field(bruns[0], "start")) >= std::stod(json_field(harness::runs_of(stat_json(a, hid))[0], "start")));
}

TEST_CASE("DURATION_OFFSET through corrald: a running job keeps its offset; the reservation does not move",
          "[agent]") {
  // sge6-reservation-backfill.txt, DURATION_OFFSET (default 60 s): a 30-s job is planned for 90 s
  // STARTING and RUNNING alike, and the 2-core job behind it stays reserved for its start + 90.
  SKIP_UNLESS_ROOT();
  const std::string dir = harness::make_tmpdir("offset");
  for (const std::string offset : {"", "10"}) {
    INFO("duration_offset " << (offset.empty() ? "default" : offset));
    const std::string file = dir + "/schedule" + offset;
    std::vector<std::string> set = {"--set", "declare_cores=2", "--set", "policy=easy", "--set", "cycle_interval=0.3",
                                    "--set", "monitor_file=" + file};
    if (!offset.empty()) set.insert(set.end(), {"--set", "duration_offset=" + offset});
    Agent a("offset" + offset, set);
    a.start();
    auto b = a.submit({"-N", "blocker", "-l", "ncpus=1,walltime=30", "--wrap", "sleep 300"});
    REQUIRE(b.rc == 0);
    const std::string bid = trim(b.out);
    REQUIRE(wait_state(a, bid, "running") == "running");
    auto w = a.submit({"-N", "wide", "-l", "ncpus=2,walltime=60", "--wrap", "true"});
    REQUIRE(w.rc == 0);
    const std::string wid = trim(w.out);
    // Several passes while both wait (cycle_interval): the reservation is planned again in each.
    std::string text;
    for (int i = 0; i < 500 && lines_with(text, wid + ":1:RESERVING:").size() < 3; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      text = harness::slurp(file);
    }
    INFO(text);
    const std::string want = std::to_string(30 + (offset.empty() ? 60 : std::stoi(offset)));
    const auto mine = lines_with(text, bid + ":1:");
    REQUIRE(mine.size() >= 2);
    CHECK(monitor_field(mine.front(), 2) == "STARTING");
    for (const auto& l : mine) CHECK(monitor_field(l, 4) == want);
    const auto res = lines_with(text, wid + ":1:RESERVING:");
    REQUIRE(res.size() >= 2);
    // Planned from the start corrald recorded (RUNNING), which may be a second after the pass
    // that decided it (STARTING) when the launch crosses a second.
    const auto running = lines_with(text, bid + ":1:RUNNING:");
    REQUIRE_FALSE(running.empty());
    const long start = std::stol(monitor_field(running.front(), 3));
    CHECK(start - std::stol(monitor_field(mine.front(), 3)) <= 1);
    for (const auto& l : res) CHECK(std::stol(monitor_field(l, 3)) == start + std::stol(want));
    // The waiting job first: cancelling the blocker first lets it start and end before its cancel.
    REQUIRE(a.cli({"cancel", wid, bid}).rc == 0);
  }
  auto bad = harness::run({harness::env_or("CORRALD", "build/agent/corrald"), "--no-config", "--set", "duration_offset=1x"});
  CHECK(bad.rc == 2);
  CHECK(bad.err.find("duration_offset: expected a duration") != std::string::npos);
  (void)!std::system(("rm -rf '" + dir + "'").c_str());
}

TEST_CASE("-now y through corrald: never reserved, refused when it cannot start at once", "[agent]") {
  SKIP_UNLESS_ROOT();
  const std::string dir = harness::make_tmpdir("now");
  const std::string file = dir + "/schedule";
  Agent a("now", {"--set", "declare_cores=2", "--set", "policy=reserve", "--set", "monitor_file=" + file});
  a.start();
  // Free cores: it starts, and the id is printed as for any job.
  auto ok = a.submit({"-now", "y", "-l", "ncpus=1,walltime=600", "--wrap", "sleep 300"});
  INFO(ok.err << a.log());
  REQUIRE(ok.rc == 0);
  const std::string okid = trim(ok.out);
  CHECK(json_field(stat_json(a, okid), "state") == "running");
  // One core left: a 2-core -now y job cannot start, even with -R y it gets no reservation.
  auto no = a.submit({"-now", "y", "-R", "y", "-l", "ncpus=2,walltime=60", "--wrap", "true"});
  CHECK(no.rc == 1);
  CHECK(no.out.empty());
  CHECK(no.err.find("refused: job ") != std::string::npos);
  CHECK(no.err.find("-now y and cannot start at once") != std::string::npos);
  // The same job without -now y waits with a reservation.
  auto later = a.submit({"-R", "y", "-l", "ncpus=2,walltime=60", "--wrap", "true"});
  REQUIRE(later.rc == 0);
  const std::string lid = trim(later.out);
  const std::string text = wait_text([&] { return harness::slurp(file); }, lid + ":1:RESERVING:");
  INFO(text);
  CHECK(text.find(lid + ":1:RESERVING:") != std::string::npos);
  // The refused job: ended "rejected" with the reason, never reserved.
  std::string nid;
  for (std::size_t p = no.err.find("job ") + 4; p < no.err.size() && std::isdigit(static_cast<unsigned char>(no.err[p])); ++p)
    nid += no.err[p];
  REQUIRE(!nid.empty());
  const std::string njs = stat_json(a, nid);
  CHECK(json_field(njs, "end_reason") == "rejected");
  CHECK(text.find(nid + ":1:RESERVING:") == std::string::npos);
  auto bad = a.submit({"-now", "maybe", "--wrap", "true"});
  CHECK(bad.rc == 2);
  CHECK(bad.err.find("-now takes y or n, got 'maybe'") != std::string::npos);
  REQUIRE(a.cli({"cancel", lid, okid}).rc == 0);  // the waiting job first, as above
  (void)!std::system(("rm -rf '" + dir + "'").c_str());
}

TEST_CASE("PBA through corrald: -P PROJECT:STEP and each job's own suspend-or-requeue choice", "[agent]") {
  // pba-synopsys-patent.txt: the project parameter names the step of a flow, and an allocation
  // narrowed to that step covers the job; how a preempted job is stopped is the user's choice per
  // job. The node says requeue; two jobs chose suspend (one with a #CORRAL directive, one with
  // CORRAL_PREEMPT): both are frozen for the step's job, not requeued.
  SKIP_UNLESS_ROOT();
  const std::string pdir = harness::make_tmpdir("pbastep");
  const std::string plan = pdir + "/projects.plan";
  std::ofstream(plan) << "project chip\nmember chip root\nflow chip asic synthesis verification\n"
                         "alloc chip +0 2 step=synthesis\n";
  Agent a("pbastep", {"--set", "declare_cores=2", "--set", "poll_interval=0.2", "--set", "cycle_interval=0.3",
                      "--set", "pba=yes", "--set", "pba_plan=" + plan, "--set", "pba_preempt_after=1",
                      "--set", "preempt_mode=requeue"});
  a.start();
  INFO(a.log());
  // An unknown step is refused at submit with the reason; nothing is queued.
  auto unknown = a.submit({"-P", "chip:layout", "--wrap", "true"});
  CHECK(unknown.rc == 1);
  CHECK(unknown.err.find("-P chip:layout: project 'chip' has no flow step 'layout' (its steps: synthesis, verification)") !=
        std::string::npos);
  auto empty = a.submit({"-P", "chip:", "--wrap", "true"});
  CHECK(empty.rc == 2);
  CHECK(empty.err.find("-P takes PROJECT or PROJECT:STEP, got 'chip:'") != std::string::npos);

  // Victim 1: the directive in its script.
  std::ofstream(a.dir + "/work/v1.sh") << "#!/bin/sh\n#CORRAL --preempt suspend\n#CORRAL -N v1\n"
                                          "echo $$ > v1.pid; sleep 300\n";
  ::chmod((a.dir + "/work/v1.sh").c_str(), 0644);
  auto v1 = a.submit({"-l", "ncpus=1,walltime=600", "v1.sh"}, kNobody);
  REQUIRE(v1.rc == 0);
  const std::string v1id = trim(v1.out);
  // Victim 2: the environment variable.
  auto v2 = harness::run({a.corral(), "submit", "-N", "v2", "-l", "ncpus=1,walltime=600", "--wrap",
                          "echo $$ > v2.pid; sleep 300"},
                         kNobody, a.dir + "/work", {"CORRAL_SOCKET=" + a.socket, "CORRAL_PREEMPT=suspend"});
  REQUIRE(v2.rc == 0);
  const std::string v2id = trim(v2.out);
  REQUIRE(wait_state(a, v1id, "running") == "running");
  REQUIRE(wait_state(a, v2id, "running") == "running");
  std::string js1 = stat_json(a, v1id);
  CHECK(json_field(js1, "name") == "v1");
  CHECK(json_field(js1, "preempt") == "suspend");
  CHECK(json_field(stat_json(a, v2id), "preempt") == "suspend");
  const std::string pid1 = trim(wait_file(a.dir + "/work/v1.pid"));
  const std::string pid2 = trim(wait_file(a.dir + "/work/v2.pid"));

  // The step's job: within the step-narrowed allocation, it preempts both after > 1 s pending.
  auto p = a.submit({"-N", "syn", "-P", "chip:synthesis", "-l", "ncpus=2,walltime=60", "--wrap", "sleep 1"});
  REQUIRE(p.rc == 0);
  const std::string pid = trim(p.out);
  CHECK(json_field(stat_json(a, pid), "flow_step") == "synthesis");
  CHECK(json_field(stat_json(a, pid), "queue") != "lowest");  // pre-qualified
  REQUIRE(wait_state(a, pid, "running", 15000) == "running");
  for (const auto& [id, ppid] : {std::pair{v1id, pid1}, std::pair{v2id, pid2}}) {
    const std::string js = stat_json(a, id);
    INFO(js);
    CHECK(json_field(js, "state") == "suspended");
    CHECK(json_field(js, "requeues") == "0");
    CHECK(harness::freezer_state(ppid) == "FROZEN");
  }
  REQUIRE(a.cli({"wait", pid}).rc == 0);
  CHECK(wait_state(a, v1id, "running", 15000) == "running");
  // The command line wins over the environment.
  auto c = harness::run({a.corral(), "submit", "--preempt", "requeue", "-l", "ncpus=1,walltime=60", "--wrap", "true"},
                        -1, a.dir + "/work", {"CORRAL_SOCKET=" + a.socket, "CORRAL_PREEMPT=suspend"});
  REQUIRE(c.rc == 0);
  CHECK(json_field(stat_json(a, trim(c.out)), "preempt") == "requeue");
  REQUIRE(a.cli({"cancel", v1id, v2id}).rc == 0);
  (void)!std::system(("rm -rf '" + pdir + "'").c_str());
}
