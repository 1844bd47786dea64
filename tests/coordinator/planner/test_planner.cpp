// Hand-built snapshots with known schedules for every policy.
#include <catch2/catch.hpp>

#include <algorithm>
#include <set>

#include "coordinator/planner/planner.hpp"
#include "coordinator/schedule.hpp"
#include "tests/coordinator/planner/helpers.hpp"

using namespace corral;
using namespace corral::testing;

namespace {
// 10 single-core nodes; R1 (6 cores) ends at 100, R2 (2 cores) at 50: 2 free.
Snapshot textbook() {
  Snapshot s = cluster(10);
  s.running.push_back(running(101, 6, -50, 100, 0));
  s.running.push_back(running(102, 2, -10, 50, 6));
  s.pending = {job(1, 4, 100), job(2, 2, 60), job(3, 1, 50), job(4, 1, 30), job(5, 1, 10)};
  return s;
}
}  // namespace

TEST_CASE("fcfs stops at the first job that does not fit", "[planner]") {
  Snapshot s = textbook();
  Plan p = run(s, cfg_of(Backfill::Fcfs));
  CHECK(started(p).empty());
  CHECK(p.decisions.empty());
  // With room for the head, fcfs starts in order until one does not fit.
  s.pending = {job(1, 1, 10), job(2, 1, 10), job(3, 4, 10), job(4, 1, 10)};
  p = run(s, cfg_of(Backfill::Fcfs));
  CHECK(started(p) == std::vector<JobId>{1, 2});
}

TEST_CASE("easy: shadow time and time-bounded backfill", "[planner]") {
  Plan p = run(textbook(), cfg_of(Backfill::Easy));
  CHECK(started(p) == std::vector<JobId>{3, 4});
  const Decision* r = find(p, 1, Action::Reserve);
  REQUIRE(r);
  CHECK(r->at == 50);
  CHECK(r->slots == 4);
  CHECK_FALSE(find(p, 2, Action::Reserve));  // only the head gets a reservation
  CHECK_FALSE(find(p, 5, Action::Reserve));
  for (const Decision& d : p.decisions)
    if (d.action == Action::Start) {
      REQUIRE(d.placement.size() == 1);
      CHECK(d.placement[0].node >= 8);  // the two free nodes
      CHECK(d.placement[0].cores == std::vector<int>{0});
    }
}

TEST_CASE("easy: extra processors at the shadow time are used up", "[planner]") {
  Snapshot s = textbook();
  s.pending = {job(1, 3, 100), job(2, 1, 200), job(3, 1, 200), job(4, 1, 40)};
  Plan p = run(s, cfg_of(Backfill::Easy));
  // shadow 50, extra = 4 - 3 = 1: job 2 takes it, job 3 cannot, job 4 ends by 50.
  CHECK(started(p) == std::vector<JobId>{2, 4});
  REQUIRE(find(p, 1, Action::Reserve));
  CHECK(find(p, 1, Action::Reserve)->at == 50);
}

TEST_CASE("easy: an overrun expected end counts as now", "[planner]") {
  Snapshot s = cluster(4, 1, 100);
  s.running.push_back(running(101, 2, 0, 90, 0));    // overran its estimate
  s.running.push_back(running(102, 1, 0, 500, 2));
  s.pending = {job(1, 3, 100), job(2, 1, 1000)};
  Plan p = run(s, cfg_of(Backfill::Easy));
  // Head needs 3: shadow = now (101 counts as ending now), extra = 3 - 3 = 0.
  REQUIRE(find(p, 1, Action::Reserve));
  CHECK(find(p, 1, Action::Reserve)->at == 100);
  CHECK(started(p).empty());
}

TEST_CASE("conservative: a reservation for every job", "[planner]") {
  Plan p = run(textbook(), cfg_of(Backfill::Conservative));
  CHECK(started(p) == std::vector<JobId>{3, 4});
  REQUIRE(find(p, 1, Action::Reserve));
  REQUIRE(find(p, 2, Action::Reserve));
  REQUIRE(find(p, 5, Action::Reserve));
  CHECK(find(p, 1, Action::Reserve)->at == 50);
  CHECK(find(p, 2, Action::Reserve)->at == 100);
  CHECK(find(p, 5, Action::Reserve)->at == 30);  // after job 4 ends
}

TEST_CASE("reserve: only -R y jobs up to max_reservation", "[planner]") {
  Snapshot s = cluster(10);
  s.running.push_back(running(101, 8, 0, 100, 0));
  s.pending = {job(1, 10, 50), job(2, 2, 200), job(3, 2, 100)};
  s.pending[0].reserve = true;
  PlannerConfig c = cfg_of(Backfill::Reserve);
  c.max_reservation = 1;
  Plan p = run(s, c);
  // Job 1 reserved at 100: job 2 would delay it, job 3 ends in time.
  REQUIRE(find(p, 1, Action::Reserve));
  CHECK(find(p, 1, Action::Reserve)->at == 100);
  CHECK(started(p) == std::vector<JobId>{3});

  c.max_reservation = 0;  // SGE: no reservations at all
  p = run(s, c);
  CHECK_FALSE(find(p, 1, Action::Reserve));
  CHECK(started(p) == std::vector<JobId>{2});

  c.max_reservation = 5;
  s.pending[0].reserve = false;
  p = run(s, c);
  CHECK_FALSE(find(p, 1, Action::Reserve));
  CHECK(started(p) == std::vector<JobId>{2});

  // Three -R y jobs, max_reservation 2: two reservations.
  s.pending = {job(1, 10, 50), job(2, 10, 50), job(3, 10, 50)};
  for (auto& j : s.pending) j.reserve = true;
  c.max_reservation = 2;
  p = run(s, c);
  CHECK(find(p, 1, Action::Reserve));
  CHECK(find(p, 2, Action::Reserve));
  CHECK_FALSE(find(p, 3, Action::Reserve));
  CHECK(find(p, 2, Action::Reserve)->at == 150);
}

TEST_CASE("duration offset and default duration", "[planner]") {
  Snapshot s = cluster(2);
  s.running.push_back(running(101, 2, 0, 50, 0));
  s.pending = {job(1, 2, 0), job(2, 1, 0)};
  PlannerConfig c = cfg_of(Backfill::Conservative);
  c.default_duration = 100;
  Plan p = run(s, c);
  REQUIRE(find(p, 2, Action::Reserve));
  CHECK(find(p, 1, Action::Reserve)->at == 50);
  CHECK(find(p, 2, Action::Reserve)->at == 150);
  c.duration_offset = 60;  // planned durations grow by the offset
  p = run(s, c);
  CHECK(find(p, 2, Action::Reserve)->at == 210);
  // Unbounded default: job 2 cannot be planned behind job 1, but is not rejected.
  c = cfg_of(Backfill::Conservative);
  p = run(s, c);
  CHECK(find(p, 1, Action::Reserve));
  CHECK_FALSE(find(p, 2, Action::Reserve));
  CHECK_FALSE(find(p, 2, Action::Reject));
  CHECK(planned_duration(job(9, 1, 0), c) == kForever);
}

TEST_CASE("parallel slot range: earliest start, then the most slots", "[planner]") {
  Snapshot s = textbook();  // 2 free now, 4 at 50, 10 at 100
  Job j = job(1, 3, 10);
  j.slots_max = 8;
  s.pending = {j};
  Plan p = run(s, cfg_of(Backfill::Conservative));
  REQUIRE(find(p, 1, Action::Reserve));
  CHECK(find(p, 1, Action::Reserve)->at == 50);
  CHECK(find(p, 1, Action::Reserve)->slots == 4);
  s.pending[0].slots_min = 1;  // starts now with what is free
  p = run(s, cfg_of(Backfill::Conservative));
  REQUIRE(find(p, 1, Action::Start));
  CHECK(find(p, 1, Action::Start)->slots == 2);
}

TEST_CASE("global and queue consumables, queue slot limit", "[planner]") {
  Snapshot s = cluster(10);
  s.global["lic"] = 3;
  Queue q;
  q.name = "q";
  q.slots = 3;
  q.consumables["tok"] = 2;
  s.queues.push_back(q);
  Job a = job(1, 1, 100), b = job(2, 1, 100), c = job(3, 2, 100), d = job(4, 1, 10);
  a.consumables["lic"] = 2;
  b.consumables["lic"] = 2;   // licence short until a ends
  c.consumables["tok"] = 1;   // 2 slots * 1 tok
  d.consumables["tok"] = 1;   // no token left, and queue slots 3 used
  s.pending = {a, b, c, d};
  Plan p = run(s, cfg_of(Backfill::Conservative));
  CHECK(started(p) == std::vector<JobId>{1, 3});
  REQUIRE(find(p, 2, Action::Reserve));
  CHECK(find(p, 2, Action::Reserve)->at == 100);
  REQUIRE(find(p, 4, Action::Reserve));
  CHECK(find(p, 4, Action::Reserve)->at == 100);
  // Unknown consumable: rejected with a reason.
  Job e = job(5, 1, 10);
  e.consumables["nosuch"] = 1;
  s.pending = {e};
  p = run(s, cfg_of(Backfill::Easy));
  REQUIRE(find(p, 5, Action::Reject));
  CHECK(find(p, 5, Action::Reject)->reason.find("nosuch") != std::string::npos);
}

TEST_CASE("host consumables and memory are planned per host", "[planner]") {
  Snapshot s = cluster(2, 4);
  s.nodes[0].consumables["gpu"] = 1;
  s.nodes[1].consumables["gpu"] = 1;
  s.nodes[0].mem_mb = s.nodes[1].mem_mb = 1000;
  RunningJob r = running(101, 1, 0, 100, 0, false);
  r.job.consumables["gpu"] = 1;
  s.running.push_back(r);
  Job g = job(1, 2, 50);
  g.consumables["gpu"] = 1;  // needs both GPUs
  Job m = job(2, 2, 50);
  m.mem_mb = 1500;  // 750 per slot: one slot per node
  Job big = job(3, 2, 50);
  big.mem_mb = 2500;  // 1250 per slot fits no node
  s.pending = {g, m, big};
  Plan p = run(s, cfg_of(Backfill::Conservative));
  REQUIRE(find(p, 1, Action::Reserve));
  CHECK(find(p, 1, Action::Reserve)->at == 100);
  CHECK(find(p, 1, Action::Reserve)->placement.size() == 2);
  const Decision* st = find(p, 2, Action::Start);
  REQUIRE(st);
  REQUIRE(st->placement.size() == 2);
  CHECK(st->placement[0].slots == 1);
  CHECK(st->placement[1].slots == 1);
  REQUIRE(find(p, 3, Action::Reject));
}

TEST_CASE("queue host lists restrict placement", "[planner]") {
  Snapshot s = cluster(4, 2);
  Queue q;
  q.name = "short";
  q.hosts = {"n2", "n3"};
  s.queues.push_back(q);
  Job j = job(1, 3, 10);
  j.queue = "short";
  Job k = job(2, 1, 10);
  k.queue = "nosuch";
  s.pending = {j, k};
  Plan p = run(s, cfg_of(Backfill::Easy));
  const Decision* d = find(p, 1, Action::Start);
  REQUIRE(d);
  for (const Placement& pl : d->placement) CHECK(pl.node >= 2);
  REQUIRE(find(p, 2, Action::Reject));
}

TEST_CASE("freed and suspended jobs: cores free, memory held", "[planner]") {
  Snapshot s = cluster(1, 4);
  s.nodes[0].mem_mb = 1000;
  RunningJob r = running(101, 4, 0, 100, 0, false);
  r.job.mem_mb = 800;
  s.running.push_back(r);
  Job small = job(1, 2, 10);
  small.mem_mb = 100;
  Job large = job(2, 1, 10);
  large.mem_mb = 500;
  s.pending = {large, small};
  PassState st = fifo(s);
  st.freed = {101};
  Plan p;
  p.decisions.push_back({Action::Suspend, 101, 0, 0, {}, {}, "nci", false});
  plan_pass(s, cfg_of(Backfill::Easy), st, p);
  CHECK_FALSE(find(p, 2, Action::Start));  // memory still held by the suspended job
  CHECK(find(p, 1, Action::Start));
  // Freed without a Suspend decision (requeued): everything is free.
  Plan q;
  plan_pass(s, cfg_of(Backfill::Easy), st, q);
  CHECK(find(q, 2, Action::Start));
  CHECK(find(q, 1, Action::Start));
}

TEST_CASE("placement prefers one NUMA node", "[planner]") {
  Snapshot s = cluster(1, 8);
  s.nodes[0].core_numa = {0, 0, 0, 0, 1, 1, 1, 1};
  RunningJob r = running(101, 3, 0, 100, 0, false);
  r.placement[0].cores = {0, 1, 4};
  s.running.push_back(r);
  s.pending = {job(1, 3, 10), job(2, 2, 10)};
  Plan p = run(s, cfg_of(Backfill::Easy));
  REQUIRE(find(p, 1, Action::Start));
  REQUIRE(find(p, 2, Action::Start));
  CHECK(find(p, 1, Action::Start)->placement[0].cores == std::vector<int>{5, 6, 7});
  CHECK(find(p, 2, Action::Start)->placement[0].cores == std::vector<int>{2, 3});
}

TEST_CASE("checkpoint: split estimates backfill and are checkpointed at window end", "[planner]") {
  PlannerConfig c = cfg_of(Backfill::Checkpoint);
  c.checkpoint_split = 0.5;
  c.checkpoint_threshold = 1000;
  Snapshot s = cluster(10);
  s.running.push_back(running(101, 8, 0, 1000, 0));
  Job big = job(3, 10, 100);
  Job four = job(4, 2, 1600);
  s.pending = {big, four, job(5, 2, 50)};
  // Not checkpointable: never backfilled at its split estimate.
  Plan p = run(s, c);
  CHECK_FALSE(find(p, 4, Action::Start));
  four.checkpointable = true;
  s.pending = {big, four, job(5, 2, 50)};
  p = run(s, c);
  REQUIRE(find(p, 3, Action::Reserve));
  CHECK(find(p, 3, Action::Reserve)->at == 1000);
  // 1600 * 0.5 = 800 ends within the window: backfilled (checkpointable).
  const Decision* d = find(p, 4, Action::Start);
  REQUIRE(d);
  CHECK(d->backfilled);
  CHECK_FALSE(find(p, 5, Action::Start));  // no room left
  // EASY would not backfill job 4.
  Plan e = run(s, cfg_of(Backfill::Easy));
  CHECK_FALSE(find(e, 4, Action::Start));
  // A job as wide as the head never backfills.
  s.pending = {big, job(6, 10, 1600)};
  s.running[0] = running(101, 2, 0, 1000, 0);
  p = run(s, c);
  CHECK_FALSE(find(p, 6, Action::Start));

  // Window end: job 4 has run 1000 s (> 800); the head needs its cores.
  Snapshot w = cluster(10, 1, 1000);
  RunningJob b = running(4, 2, 0, 1600, 0);
  b.job = job(4, 2, 1600);
  b.backfilled = true;
  w.running.push_back(b);
  w.running.push_back(running(7, 1, 0, 5000, 2));
  w.pending = {big};
  big.slots_min = big.slots_max = 9;
  w.pending = {big};
  p = run(w, c);
  REQUIRE(find(p, 4, Action::Checkpoint));
  REQUIRE(find(p, 3, Action::Start));
  CHECK(find(p, 3, Action::Start)->slots == 9);
  // A checkpoint that takes time keeps the cores: the head is reserved for then.
  c.checkpoint_cost = 60;
  p = run(w, c);
  REQUIRE(find(p, 4, Action::Checkpoint));
  CHECK_FALSE(find(p, 3, Action::Start));
  REQUIRE(find(p, 3, Action::Reserve));
  CHECK(find(p, 3, Action::Reserve)->at == 1060);
  c.checkpoint_cost = 0;
  // An over-committed snapshot (two jobs on one single-core node) is survived.
  Snapshot o = w;
  o.running.push_back(running(8, 1, 0, 5000, 0));
  p = run(o, c);
  CHECK_FALSE(find(p, 3, Action::Start));  // 6 free + 2 freeable < 9: no crash, no start
  CHECK_FALSE(find(p, 4, Action::Checkpoint));
  // Before the window ends (500 < 800) nothing is checkpointed: the head waits
  // for the shortened end of job 4.
  w.now = 500;
  p = run(w, c);
  CHECK_FALSE(find(p, 4, Action::Checkpoint));
  REQUIRE(find(p, 3, Action::Reserve));
  CHECK(find(p, 3, Action::Reserve)->at == 800);
}

TEST_CASE("restart estimate uses work done", "[planner]") {
  PlannerConfig c = cfg_of(Backfill::Easy);
  Job j = job(1, 1, 1000);
  j.work_done = 300;
  CHECK(planned_duration(j, c) == 700);
  c.restart_cost = 30;
  c.duration_offset = 60;
  CHECK(planned_duration(j, c) == 790);
}

TEST_CASE("bad input gets a reason, never a crash", "[planner]") {
  Snapshot s = cluster(2);
  Job a = job(1, 0, 10);
  Job b = job(2, 3, 10);
  b.slots_max = 2;
  Job c = job(3, 5, 10);  // larger than the cluster
  s.pending = {a, b, c, job(4, 1, 10)};
  PassState st = fifo(s);
  st.order.push_back(99);  // out of range: ignored
  Plan p;
  plan_pass(s, cfg_of(Backfill::Conservative), st, p);
  CHECK(find(p, 1, Action::Reject));
  CHECK(find(p, 2, Action::Reject));
  CHECK(find(p, 3, Action::Reject));
  CHECK(find(p, 4, Action::Start));
}

TEST_CASE("schedule() runs the pipeline into the planner", "[planner]") {
  Snapshot s = textbook();
  SchedConfig cfg;
  cfg.planner = cfg_of(Backfill::Easy);
  Plan p = schedule(s, cfg, 1);
  CHECK(started(p) == std::vector<JobId>{3, 4});
  Planner reuse;
  for (int i = 0; i < 3; ++i) {
    Plan q = schedule(s, cfg, 1, reuse);
    CHECK(started(q) == std::vector<JobId>{3, 4});
  }
  JobId id = 0;
  CHECK(find_name<Backfill>("conservative") == Backfill::Conservative);
  CHECK_FALSE(find_name<Backfill>("nope"));
  (void)id;
}

// ------------------------------------------- checkpoint policy branches --
// checkpoint-backfill-patent.zh.txt [0054]-[0055], claim 5 (condition (b)):
// a non-head job that fits now and whose shortened estimate runs past the
// window may still start if, at the window's end, it and the head job can
// run at the same time. It then never stands in the head's way, so it is
// not a checkpointable backfill (Decision::backfilled false).
// Jobs that may be checkpointed (only they backfill at a split estimate).
namespace {
std::vector<Job> checkpointable(std::vector<Job> v) {
  for (Job& j : v) j.checkpointable = true;
  return v;
}
}  // namespace

TEST_CASE("checkpoint: condition (b), a job that runs alongside the head past the window", "[planner]") {
  PlannerConfig c = cfg_of(Backfill::Checkpoint);
  c.checkpoint_split = 0.5;
  c.checkpoint_threshold = 1000;
  // 12 single-core nodes; job 101 holds 8 until 1000 (the window's end).
  Snapshot s = cluster(12);
  s.running.push_back(running(101, 8, 0, 1000, 0));
  // Head 1 (10 slots) is reserved at 1000 and leaves 2 of 12 cores then.
  // Job 2 (2 slots, 5000 s): shortened 2500 ends past 1000, so (a) fails;
  // (b): 10 + 2 <= 12 at the window's end, so it starts, not backfilled.
  // Job 3 (2 slots, 1600 s): (b) fails (10 + 2 + 2 > 12), (a): 800 <= 1000.
  s.pending = checkpointable({job(1, 10, 100), job(2, 2, 5000), job(3, 2, 1600)});
  Plan p = run(s, c);
  REQUIRE(find(p, 1, Action::Reserve));
  CHECK(find(p, 1, Action::Reserve)->at == 1000);
  CHECK(started(p) == std::vector<JobId>{2, 3});
  const Decision* b = find(p, 2, Action::Start);
  REQUIRE(b);
  CHECK_FALSE(b->backfilled);                  // (b): runs beside the head, never checkpointed
  REQUIRE(find(p, 3, Action::Start));
  CHECK(find(p, 3, Action::Start)->backfilled);  // (a): checkpointed if it overruns
  // Head of 11 slots: 11 + 2 > 12 at the window's end, so job 2 may not
  // start (its shortened 2500 s is past the window too); job 3 still may.
  s.pending[0].slots_min = s.pending[0].slots_max = 11;
  p = run(s, c);
  CHECK(started(p) == std::vector<JobId>{3});
  // A (b) job is left running at the window's end: only backfilled jobs are
  // stopped for the head.
  Snapshot w = cluster(12, 1, 1000);
  RunningJob rb = running(2, 2, 0, 5000, 0);
  RunningJob ra = running(3, 2, 0, 1600, 2);
  ra.backfilled = true;
  w.running = {rb, ra};
  w.pending = {job(1, 10, 100)};
  p = run(w, c);
  CHECK_FALSE(find(p, 2, Action::Checkpoint));
  REQUIRE(find(p, 3, Action::Checkpoint));
  REQUIRE(find(p, 1, Action::Start));
}

// checkpoint-backfill-patent.zh.txt [0050]-[0051], claim 3: only estimates
// above the preset value (PlannerConfig::checkpoint_threshold) are
// multiplied by p; short jobs keep theirs (checkpointing costs too much for
// them). An estimate exactly at the threshold is not split.
TEST_CASE("checkpoint: an estimate at or below the threshold is not split", "[planner]") {
  PlannerConfig c = cfg_of(Backfill::Checkpoint);
  c.checkpoint_split = 0.5;
  c.checkpoint_threshold = 1000;
  CHECK(backfill_duration(job(1, 1, 999), c) == 999);
  CHECK(backfill_duration(job(1, 1, 1000), c) == 1000);
  CHECK(backfill_duration(job(1, 1, 1001), c) == 501);  // ceil(1001 x 0.5)
  // 10 single-core nodes, 8 busy until 800: head 1 (10 slots) reserved at
  // 800, a window of 800 s on 2 free cores. Job 2 (1000 s, at the
  // threshold) would end within the window only if split (500): it waits.
  // Job 3 (1001 s, above) is split to 501 and backfills.
  Snapshot s = cluster(10);
  s.running.push_back(running(101, 8, 0, 800, 0));
  s.pending = checkpointable({job(1, 10, 100), job(2, 2, 1000), job(3, 2, 1001)});
  Plan p = run(s, c);
  REQUIRE(find(p, 1, Action::Reserve));
  CHECK(find(p, 1, Action::Reserve)->at == 800);
  CHECK(started(p) == std::vector<JobId>{3});
  REQUIRE(find(p, 3, Action::Start));
  CHECK(find(p, 3, Action::Start)->backfilled);
  // Threshold one second lower: job 2 is split too, and goes first.
  c.checkpoint_threshold = 999;
  p = run(s, c);
  CHECK(started(p) == std::vector<JobId>{2});
}

// checkpoint-backfill-patent.zh.txt [0056] (figure 4): when the window
// ends and the head lacks resources, backfilled jobs are checkpointed
// starting with those on the most nodes (fewest preemptions) until the head
// fits; the rest keep running.
TEST_CASE("checkpoint: several overrunning backfilled jobs are checkpointed largest first", "[planner]") {
  PlannerConfig c = cfg_of(Backfill::Checkpoint);
  c.checkpoint_split = 0.5;
  c.checkpoint_threshold = 1000;
  // now = 1000, 10 single-core nodes, none free. Backfilled jobs 11 (1
  // slot), 12 (3 slots), 13 (2 slots), each 1600 s from 0: shortened to
  // 800, so their window has ended. Job 14 (4 slots, not backfilled) runs on.
  Snapshot s = cluster(10, 1, 1000);
  RunningJob a = running(11, 1, 0, 1600, 0), b = running(12, 3, 0, 1600, 1), d = running(13, 2, 0, 1600, 4);
  a.backfilled = b.backfilled = d.backfilled = true;
  s.running = {a, b, d, running(14, 4, 0, 5000, 6)};
  // Head of 4 slots: largest first stops 12 (3: not enough), then 13 (2):
  // 5 free, the head starts; job 11 keeps running. (Smallest first would
  // stop all three: 1 + 2 < 4.)
  s.pending = {job(1, 4, 100)};
  Plan p = run(s, c);
  std::vector<JobId> ckpt;
  for (const Decision& x : p.decisions)
    if (x.action == Action::Checkpoint) ckpt.push_back(x.job);
  CHECK(ckpt == std::vector<JobId>{12, 13});
  REQUIRE(find(p, 1, Action::Start));
  CHECK(find(p, 1, Action::Start)->slots == 4);
  for (const Placement& pl : find(p, 1, Action::Start)->placement) CHECK((pl.node >= 1 && pl.node <= 5));
  // Head of 3 slots: the largest alone is enough.
  s.pending = {job(1, 3, 100)};
  p = run(s, c);
  ckpt.clear();
  for (const Decision& x : p.decisions)
    if (x.action == Action::Checkpoint) ckpt.push_back(x.job);
  CHECK(ckpt == std::vector<JobId>{12});
  // Head of 7: all three are stopped, still largest first, and the head
  // waits for job 14 (6 free < 7): nothing is checkpointed in vain.
  s.pending = {job(1, 7, 100)};
  p = run(s, c);
  CHECK_FALSE(find(p, 11, Action::Checkpoint));
  CHECK_FALSE(find(p, 12, Action::Checkpoint));
  REQUIRE(find(p, 1, Action::Reserve));
}

// checkpoint-backfill-patent.zh.txt [0056]: at the window's end backfilled
// jobs are checkpointed until the head fits. Within one pass a job already
// checkpointed for one head has given its cores away: it must not be
// counted (and stopped, and its cores handed out) again for a later job.
TEST_CASE("checkpoint: a job checkpointed for one job is not stopped again for the next", "[planner]") {
  PlannerConfig c = cfg_of(Backfill::Checkpoint);
  c.checkpoint_split = 0.5;
  c.checkpoint_threshold = 1000;
  // now = 1000, 10 single-core nodes. Backfilled, window over: 11 (4 slots,
  // nodes 0-3) and 12 (2 slots, nodes 4-5). 13 (3 slots, nodes 6-8) runs
  // on. Node 9 is free.
  Snapshot s = cluster(10, 1, 1000);
  RunningJob a = running(11, 4, 0, 1600, 0), b = running(12, 2, 0, 1600, 4);
  a.backfilled = b.backfilled = true;
  s.running = {a, b, running(13, 3, 0, 5000, 6)};
  // Job 1 (5) needs 11's cores (largest first) and starts on nodes 0-3 and
  // 9. Job 2 (2) then needs 12's: nodes 4-5.
  s.pending = {job(1, 5, 100), job(2, 2, 100)};
  Plan p = run(s, c);
  std::vector<JobId> ckpt;
  for (const Decision& x : p.decisions)
    if (x.action == Action::Checkpoint) ckpt.push_back(x.job);
  CHECK(ckpt == std::vector<JobId>{11, 12});  // each once
  const Decision* one = find(p, 1, Action::Start);
  const Decision* two = find(p, 2, Action::Start);
  REQUIRE(one);
  REQUIRE(two);
  std::set<std::uint32_t> nodes;
  for (const Decision* d : {one, two}) {
    int slots = 0;
    for (const Placement& pl : d->placement) {
      CHECK(nodes.insert(pl.node).second);  // never a node twice
      CHECK((pl.node <= 5 || pl.node == 9));  // 13's nodes stay its own
      slots += static_cast<int>(pl.slots);
    }
    CHECK(slots == d->slots);
  }
  CHECK(nodes.size() == 7);
}

// checkpoint-backfill-patent.zh.txt [0056]: backfilled jobs are
// checkpointed "until the head job gets enough resources" — also when the
// head is node-bound (memory, jobfs, host consumables): the checkpointed
// jobs' nodes are free for it at once.
TEST_CASE("checkpoint: a node-bound head starts on the nodes its checkpoints free", "[planner]") {
  PlannerConfig c = cfg_of(Backfill::Checkpoint);
  c.checkpoint_split = 0.5;
  c.checkpoint_threshold = 1000;
  // now = 1000; two nodes of 2 cores and 1000 MB. 11 (backfilled, window
  // over) holds node 0, 13 holds node 1 until 5000. Head 1 (2 slots,
  // 200 MB) fits on node 0 once 11 is checkpointed.
  Snapshot s = cluster(2, 2, 1000);
  s.nodes[0].mem_mb = s.nodes[1].mem_mb = 1000;
  RunningJob a = running(11, 2, 0, 1600, 0, false);
  a.backfilled = true;
  s.running = {a, running(13, 2, 0, 5000, 1, false)};
  Job h = job(1, 2, 100);
  h.mem_mb = 200;
  s.pending = {h};
  Plan p = run(s, c);
  REQUIRE(find(p, 11, Action::Checkpoint));
  const Decision* st = find(p, 1, Action::Start);
  REQUIRE(st);  // not checkpointed in vain, nor started a second late
  REQUIRE(st->placement.size() == 1);
  CHECK(st->placement[0].node == 0);
}

// A trial that finds the head cannot start even with every overdue job
// stopped checkpoints nothing and leaves every job's hold as it was: the
// memory of a job left running still counts on its node.
TEST_CASE("checkpoint: a failed trial at the window's end keeps the running jobs' memory", "[planner]") {
  PlannerConfig c = cfg_of(Backfill::Checkpoint);
  c.checkpoint_split = 0.5;
  c.checkpoint_threshold = 1000;
  // now = 1000. Node 0: 4 cores, 1000 MB; node 1: 1 core. 11 (backfilled,
  // window over) holds 2 cores and 800 MB on node 0; 13 holds node 1 and
  // both licences until 5000.
  Snapshot s = cluster(2, 1, 1000);
  s.nodes[0].cores = 4;
  s.nodes[0].mem_mb = 1000;
  s.global["lic"] = 2;
  RunningJob a = running(11, 2, 0, 1600, 0, false);
  a.job.mem_mb = 800;
  a.backfilled = true;
  RunningJob l = running(13, 1, 0, 5000, 1, false);
  l.job.consumables["lic"] = 2;
  s.running = {a, l};
  // 1 (1 slot, 100 MB) starts on node 0. Head 2 (2 slots, a licence each)
  // cannot start before 5000 even with 11 stopped: 11 keeps running. 3
  // (1 slot, 500 MB) would need 800 + 100 + 500 MB on node 0: it waits.
  Job j1 = job(1, 1, 100), h = job(2, 2, 100), b = job(3, 1, 100);
  j1.mem_mb = 100;
  h.consumables["lic"] = 1;
  b.mem_mb = 500;
  s.pending = {j1, h, b};
  Plan p = run(s, c);
  REQUIRE(find(p, 1, Action::Start));
  REQUIRE(find(p, 2, Action::Reserve));
  CHECK(find(p, 2, Action::Reserve)->at == 5000);
  CHECK_FALSE(find(p, 11, Action::Checkpoint));
  CHECK_FALSE(find(p, 3, Action::Start));
}

// With a checkpoint cost the checkpointed jobs hold their nodes until the
// checkpoint is written (PlannerConfig::checkpoint_cost): a node-bound head
// is not reserved on them before then.
TEST_CASE("checkpoint: a node-bound head is not reserved on nodes still writing a checkpoint", "[planner]") {
  PlannerConfig c = cfg_of(Backfill::Checkpoint);
  c.checkpoint_split = 0.5;
  c.checkpoint_threshold = 1000;
  c.checkpoint_cost = 60;
  // now = 1000. Node 0 (2 cores): 11, backfilled, window over; node 1 (3
  // cores): 13 until 1003. Head 1 (2 slots, 100 MB): 11 is checkpointed
  // and holds node 0 until 1060, so the head goes to node 1 at 1003.
  Snapshot s = cluster(2, 2, 1000);
  s.nodes[1].cores = 3;
  s.nodes[0].mem_mb = s.nodes[1].mem_mb = 1000;
  RunningJob a = running(11, 2, 0, 1600, 0, false);
  a.backfilled = true;
  s.running = {a, running(13, 3, 0, 1003, 1, false)};
  Job h = job(1, 2, 100);
  h.mem_mb = 100;
  s.pending = {h};
  Plan p = run(s, c);
  REQUIRE(find(p, 11, Action::Checkpoint));
  const Decision* r = find(p, 1, Action::Reserve);
  REQUIRE(r);
  CHECK(r->at == 1003);
  REQUIRE(r->placement.size() == 1);
  CHECK(r->placement[0].node == 1);
}
