// Checkpointability per job (`corral sim --checkpointable F`, checkpointable.hpp),
// the figures that go with it (jobs_checkpointed, checkpoint_seconds, p99_wait,
// idle core-seconds while jobs wait) and run-time predictors (predict.hpp).
#include <catch2/catch.hpp>
#include <random>
#include <sstream>
#include <string>

#include "coordinator/sim/checkpointable.hpp"
#include "coordinator/sim/predict.hpp"
#include "coordinator/sim/sim.hpp"
#include "tests/coordinator/sim/swf_line.hpp"

using namespace corral;
using namespace corral::sim;

namespace {

constexpr auto line = corral::testing::swf_line;

std::size_t count(const std::vector<std::uint8_t>& m) {
  std::size_t n = 0;
  for (auto x : m) n += x;
  return n;
}

// A random workload on 32 procs: a third short jobs, requests 1-4 x the run.
SwfTrace random_trace(unsigned seed, int jobs) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> procs(1, 16), user(1, 6);
  std::uniform_int_distribution<long> shortrun(10, 600), longrun(600, 20000), gap(0, 1500);
  std::string text = "; MaxProcs: 32\n";
  long t = 0;
  for (int i = 1; i <= jobs; ++i) {
    t += gap(rng);
    const long r = rng() % 3 == 0 ? shortrun(rng) : longrun(rng);
    const long req = std::min<long>(40000, r * (1 + static_cast<long>(rng() % 4)) + static_cast<long>(rng() % 600));
    const long p = procs(rng), u = user(rng);
    text += line(i, t, r, p, req, u);
  }
  return parse_swf(text);
}

}  // namespace

TEST_CASE("checkpointable: the seed decides which jobs, the fraction how many", "[sim][checkpointable]") {
  const auto a = mark_checkpointable(1000, 0.3, 7);
  REQUIRE(a.size() == 1000);
  REQUIRE(count(a) == 300);
  REQUIRE(mark_checkpointable(1000, 0.3, 7) == a);  // reproducible
  const auto b = mark_checkpointable(1000, 0.3, 8);
  REQUIRE(count(b) == 300);
  REQUIRE(b != a);                                  // another seed, other jobs
  REQUIRE(count(mark_checkpointable(1000, 0, 7)) == 0);
  REQUIRE(count(mark_checkpointable(1000, 1, 7)) == 1000);
  REQUIRE(count(mark_checkpointable(7, 0.5, 1)) == 4);  // rounded to nearest
  // Spread over the trace, not a block at its start.
  std::size_t first_half = 0;
  for (std::size_t i = 0; i < 500; ++i) first_half += a[i];
  REQUIRE(first_half > 100);
  REQUIRE(first_half < 200);
}

TEST_CASE("checkpointable: only marked jobs are ever checkpointed, by any policy (random workloads)",
          "[sim][checkpointable][property]") {
  struct Setting {
    const char* name;
    Backfill b;
    bool preempt;
  };
  const Setting settings[] = {{"checkpoint", Backfill::Checkpoint, false},
                              {"easy --preempt", Backfill::Easy, true},
                              {"checkpoint --preempt", Backfill::Checkpoint, true}};
  std::size_t checkpointed = 0;
  for (unsigned seed = 1; seed <= 8; ++seed) {
    const SwfTrace tr = random_trace(seed, 150);
    for (const Setting& st : settings) {
      SimOptions opt;
      opt.sched.planner.backfill = st.b;
      opt.sched.planner.checkpoint_split = 0.1;
      opt.sched.planner.checkpoint_threshold = 900;
      opt.sched.preempt.enabled = st.preempt;
      opt.sched.order.policy = Order::Lxf;
      opt.sched.order.aging = 6 * 3600;
      opt.predict = opt.repredict = true;
      opt.checkpointable = 0.3;
      opt.seed = seed;
      const SimResult r = simulate(tr, opt);
      INFO("seed " << seed << ", " << st.name);
      REQUIRE(r.finished == tr.jobs.size());
      REQUIRE(r.jobs_checkpointable == 45);
      std::size_t marked = 0, ckj = 0, ck = 0;
      for (const JobResult& j : r.per_job) {
        marked += j.checkpointable;
        if (j.checkpoints > 0 || j.requeues > 0) REQUIRE(j.checkpointable);
        ckj += j.checkpoints > 0;
        ck += static_cast<std::size_t>(j.checkpoints);
      }
      REQUIRE(marked == 45);
      REQUIRE(r.jobs_checkpointed == ckj);
      REQUIRE(r.checkpoints == ck);
      REQUIRE(r.checkpoint_seconds == static_cast<Time>(ck) * opt.checkpoint_cost);
      checkpointed += ckj;
      // The same seed marks the same jobs and gives the same schedule.
      const SimResult again = simulate(tr, opt);
      for (std::size_t i = 0; i < r.per_job.size(); ++i) {
        REQUIRE(again.per_job[i].checkpointable == r.per_job[i].checkpointable);
        REQUIRE(again.per_job[i].first_start == r.per_job[i].first_start);
      }
      // None marked: nothing is ever checkpointed.
      opt.checkpointable = 0;
      const SimResult none = simulate(tr, opt);
      REQUIRE(none.checkpoints == 0);
      REQUIRE(none.jobs_checkpointed == 0);
      REQUIRE(none.preemptions == 0);
    }
  }
  REQUIRE(checkpointed >= 20);  // not vacuous: marked jobs were checkpointed
}

TEST_CASE("sim: p99_wait, idle core-seconds while jobs wait and the new JSON fields", "[sim][checkpointable]") {
  // One processor, 200 jobs of 10 s all submitted at 0: waits 0, 10, ...,
  // 1990; the 99th percentile (nearest rank: the 198th smallest) is 1970.
  std::string text = "; MaxProcs: 1\n";
  for (int i = 1; i <= 200; ++i) text += line(i, 0, 10, 1, 10, 1);
  SimOptions opt;
  opt.sched.planner.backfill = Backfill::Easy;
  SimResult r = simulate(parse_swf(text), opt);
  REQUIRE(r.max_wait == 1990);
  REQUIRE(r.p99_wait == 1970);
  REQUIRE(r.idle_while_waiting == 0);  // the one core is always busy
  // Two processors: a 1-proc job runs 0..100, a 2-proc job waits for it:
  // one core idle for 100 s while a job waits; then none waits.
  text = "; MaxProcs: 2\n" + line(1, 0, 100, 1, 100, 1) + line(2, 0, 50, 2, 50, 2) + line(3, 500, 10, 1, 10, 1);
  r = simulate(parse_swf(text), opt);
  REQUIRE(r.per_job[1].first_start == 100);
  REQUIRE(r.idle_while_waiting == 100);
  const auto js = nlohmann::json::parse(to_json(r));
  CHECK(js.at("p99_wait") == 100);
  CHECK(js.at("idle_core_seconds_waiting") == 100);
  CHECK(js.at("jobs_checkpointable") == 3);
  CHECK(js.at("jobs_checkpointed") == 0);
  CHECK(js.at("checkpoint_seconds") == 0);
}

TEST_CASE("predict: mean2 (EASY++), max3 and similar on a hand-built history", "[sim][predict]") {
  auto job = [](long user, Time run, Time req, int procs) {
    SwfJob s;
    s.user = user;
    s.run = run;
    s.estimate = req;
    s.procs = procs;
    return s;
  };
  RunPredictor mean2(Predictor::Mean2), max3(Predictor::Max3), similar(Predictor::Similar);
  const SwfJob q = job(1, 0, 5000, 4);  // the job to predict: 5000 s asked, 4 procs
  for (RunPredictor* p : {&mean2, &max3, &similar}) REQUIRE(p->predict(q) == 0);  // no history
  // User 1's history: a 4-proc 5000-s job ran 900 s, then two 1-proc 100-s
  // jobs ran 100 and 200 s.
  for (RunPredictor* p : {&mean2, &max3, &similar}) {
    p->record(job(1, 900, 5000, 4));
    p->record(job(1, 100, 100, 1));
    p->record(job(1, 200, 1000, 1));
  }
  REQUIRE(mean2.predict(q) == 150);    // (100 + 200) / 2
  REQUIRE(max3.predict(q) == 900);     // the longest of the last three
  REQUIRE(similar.predict(q) == 900);  // the same request and size: 900
  similar.record(job(1, 3000, 1000, 1));
  max3.record(job(1, 3000, 1000, 1));
  REQUIRE(max3.predict(q) == 3000);     // 100, 200, 3000
  REQUIRE(similar.predict(q) == 900);   // still its own kind's runs only
  REQUIRE(similar.predict(job(1, 0, 300, 2)) == 300);  // no such kind: max3, capped by the request
  REQUIRE(mean2.predict(job(2, 0, 300, 2)) == 0);      // another user: no history
  REQUIRE(parse_name<Predictor>("similar") == Predictor::Similar);
  REQUIRE_THROWS_AS(parse_name<Predictor>("oracle"), std::invalid_argument);
}

// User 1's job of one kind (4 procs, 5000 s asked) for the burst tests.
static SwfJob burst_job(JobId id, Time submit, Time run) {
  SwfJob s;
  s.id = id;
  s.user = 1;
  s.submit = submit;
  s.run = run;
  s.estimate = 5000;
  s.procs = 4;
  return s;
}

TEST_CASE("predict: bursts tell apart jobs of one kind submitted apart", "[sim][predict]") {
  RunPredictor p(Predictor::Similar);
  p.set_burst_gap(600);
  // Three lone jobs of the kind (4 procs, 5000 s asked), 1000 s apart (a
  // burst each, no scout), ran 4000 s each.
  for (JobId i = 1; i <= 3; ++i) {
    REQUIRE_FALSE(p.arrive(burst_job(i, 1000 * i, 4000)));
    p.record(burst_job(i, 1000 * i, 4000));
  }
  // A burst of two of the same kind at 5000: the kind says 4000 s.
  const SwfJob a = burst_job(10, 5000, 5), b = burst_job(11, 5010, 5);
  REQUIRE_FALSE(p.arrive(a));
  REQUIRE(p.predict(a) == 4000);
  REQUIRE(p.arrive(b));           // a second one: the first is the scout
  REQUIRE(p.predict(a) == 1);     // it goes first and tells the run time
  REQUIRE(p.predict(b) == 4000);  // the others keep the kind's until then
  p.record(a);
  REQUIRE(p.predict(b) == 5);     // the burst's own run
  const SwfJob c = burst_job(12, 5010 + 600, 5);  // 600 s after b: a new burst
  REQUIRE_FALSE(p.arrive(c));
  REQUIRE(p.predict(c) == 4000);  // the kind's last three: 4000, 4000, 5
  RunPredictor off(Predictor::Similar);  // no burst gap: no bursts
  REQUIRE_FALSE(off.arrive(a));
  REQUIRE_FALSE(off.arrive(b));
  REQUIRE(off.predict(a) == 0);
}

TEST_CASE("predict: --scout-min sends a scout from large bursts only", "[sim][predict]") {
  RunPredictor p(Predictor::Similar);
  p.set_burst_gap(600);
  p.set_scout_min(3);
  REQUIRE_FALSE(p.arrive(burst_job(1, 0, 4000)));
  p.record(burst_job(1, 0, 4000));  // the kind's history: 4000 s
  // A burst of the kind at 5000: its second job makes no scout yet.
  const SwfJob a = burst_job(10, 5000, 5), b = burst_job(11, 5010, 5), c = burst_job(12, 5020, 5);
  REQUIRE_FALSE(p.arrive(a));
  REQUIRE_FALSE(p.arrive(b));
  REQUIRE(p.predict(a) == 4000);
  REQUIRE(p.arrive(c));        // the third: the first is the scout
  REQUIRE(p.predict(a) == 1);
  REQUIRE(p.predict(c) == 4000);
  REQUIRE_FALSE(p.arrive(burst_job(13, 5030, 5)));  // one scout per burst and kind
  // A burst of two (600 s later) sends none.
  REQUIRE_FALSE(p.arrive(burst_job(20, 6000, 5)));
  REQUIRE_FALSE(p.arrive(burst_job(21, 6010, 5)));
  REQUIRE(p.predict(burst_job(20, 6000, 5)) == 4000);
  RunPredictor q(Predictor::Similar);
  q.set_burst_gap(600);
  q.set_scout_min(1);  // below 2 means 2: a scout needs a sibling
  REQUIRE_FALSE(q.arrive(a));
  REQUIRE(q.arrive(b));
}

TEST_CASE("predict_order_only: predictions order the queue, requests plan it", "[sim][predict]") {
  // Two processors. User 7's first job runs 5 s of its 1000 s request
  // (history: 5 s). Job 2 (user 1) runs 0..100; job 3 (2 procs) heads the
  // queue, reserved at 100. User 7's second job (5 s of 1000 s asked)
  // arrives at 20 with a free core: planned at its prediction it backfills
  // at once (it would end long before 100); planned at its request it would
  // hold the core past 100, so it waits for job 3.
  std::string text = "; MaxProcs: 2\n";
  text += line(1, 0, 5, 1, 1000, 7);
  text += line(2, 0, 100, 1, 100, 1);
  text += line(3, 1, 10, 2, 10, 2);
  text += line(4, 20, 5, 1, 1000, 7);
  SimOptions opt;
  opt.sched.planner.backfill = Backfill::Easy;
  opt.predict = true;
  SimResult planned = simulate(parse_swf(text), opt);
  REQUIRE(planned.per_job[3].first_start == 20);
  opt.predict_order_only = true;
  SimResult ordered = simulate(parse_swf(text), opt);
  REQUIRE(ordered.per_job[2].first_start == 100);
  REQUIRE(ordered.per_job[3].first_start == 110);
  // The order does read the prediction: one processor, user 7's queued jobs
  // (100000 s asked, 10 s predicted once its first job ends) go ahead of
  // user 2's 1000-s job under lxf, as when the prediction plans them.
  text = "; MaxProcs: 1\n";
  text += line(1, 0, 10, 1, 100000, 7);
  text += line(2, 1, 10, 1, 100000, 7);
  text += line(3, 5, 1000, 1, 1000, 2);
  opt.sched.order.policy = Order::Lxf;
  opt.repredict = true;
  SimResult lxf = simulate(parse_swf(text), opt);
  REQUIRE(lxf.per_job[1].first_start == 10);
  REQUIRE(lxf.per_job[2].first_start == 20);
  opt.predict = false;
  SimResult unpredicted = simulate(parse_swf(text), opt);
  REQUIRE(unpredicted.per_job[2].first_start == 10);  // 1000 s beats 100000 s
}

namespace {

// Four processors. Job 1 (3 procs) runs 0..1000; job 2 (2 procs, 1000 s)
// heads the queue, reserved at 1000; job 3 (4 procs) is blocked next; job 4
// (1 proc, 3000 s) fits now beside job 2's reservation. With the head's
// reservation only it starts at once and job 3 waits for it (3003); with a
// reservation for job 3 too (at 2000), job 4 may not delay it: it waits
// until job 3 is done. The checkpoint policy, no job checkpointable.
std::string second_reservation_trace(SimOptions& opt) {
  std::string text = "; MaxProcs: 4\n";
  text += line(1, 0, 1000, 3, 1000, 1);
  text += line(2, 1, 1000, 2, 1000, 2);
  text += line(3, 2, 100, 4, 100, 3);
  text += line(4, 3, 3000, 1, 3000, 4);
  opt.sched.planner.backfill = Backfill::Checkpoint;
  opt.checkpointable = 0;
  return text;
}

// Job 3 got no reservation: job 4 backfilled at once and job 3 ran after it.
void require_head_only(const SimResult& r) {
  REQUIRE(r.per_job[3].first_start == 3);
  REQUIRE(r.per_job[2].first_start == 3003);
}
// Job 3 got the second reservation: it ran at 2000, job 4 after it.
void require_second_reservation(const SimResult& r) {
  REQUIRE(r.per_job[2].first_start == 2000);
  REQUIRE(r.per_job[3].first_start == 2100);
}

}  // namespace

TEST_CASE("checkpoint policy: reserve_depth reserves for the next blocked job too", "[sim][reserve]") {
  SimOptions opt;
  const std::string text = second_reservation_trace(opt);
  SimResult one = simulate(parse_swf(text), opt);
  require_head_only(one);
  opt.sched.planner.reserve_depth = 2;
  SimResult two = simulate(parse_swf(text), opt);
  require_second_reservation(two);
  REQUIRE(two.max_wait < one.max_wait);
}

TEST_CASE("checkpoint policy: reserve_wait reserves beyond the head for old jobs only", "[sim][reserve]") {
  // Depth 2. Job 3 (blocked behind the head) has waited 1 s when job 4
  // arrives at 3: with reserve_wait 10 s it is too young for a reservation,
  // so job 4 backfills at once as under depth 1; with reserve_wait 1 s it is
  // old enough and job 4 waits for it.
  SimOptions opt;
  const std::string text = second_reservation_trace(opt);
  opt.sched.planner.reserve_depth = 2;
  opt.sched.planner.reserve_wait = 10;
  SimResult young = simulate(parse_swf(text), opt);
  REQUIRE(young.per_job[1].first_start == 1000);  // the head keeps its reservation
  require_head_only(young);
  opt.sched.planner.reserve_wait = 1;
  require_second_reservation(simulate(parse_swf(text), opt));
}

TEST_CASE("checkpoint policy: reserve_factor reserves for a job old for its length", "[sim][reserve]") {
  // As above with reserve_wait 10 s: job 3 (asks 100 s) has waited 1 s when
  // job 4 arrives. A factor whose wait (factor - 1) x 100 s is 1 s makes it
  // old enough for the second reservation; one of 50 s does not.
  SimOptions opt;
  const std::string text = second_reservation_trace(opt);
  opt.sched.planner.reserve_depth = 2;
  opt.sched.planner.reserve_wait = 10;
  opt.sched.planner.reserve_factor = 1.5;
  require_head_only(simulate(parse_swf(text), opt));
  opt.sched.planner.reserve_factor = 1.01;
  require_second_reservation(simulate(parse_swf(text), opt));
}

TEST_CASE("checkpoint budget: once spent, no further job is checkpointed", "[sim][checkpointable]") {
  // Every job checkpointable, checkpoint policy with preemption: without a
  // budget many jobs get checkpointed; with a budget of 5 % of the jobs
  // arrived, the count stops near it (a pass under budget may still pick a
  // few victims at once, and jobs backfilled before it was spent may be
  // checkpointed at their window's end).
  std::size_t over = 0;
  for (unsigned seed = 1; seed <= 6; ++seed) {
    const SwfTrace tr = random_trace(seed, 150);
    SimOptions opt;
    opt.sched.planner.backfill = Backfill::Checkpoint;
    opt.sched.planner.checkpoint_split = 0.1;
    opt.sched.planner.checkpoint_threshold = 900;
    opt.sched.preempt.enabled = true;
    opt.sched.order.policy = Order::Lxf;
    const SimResult free = simulate(tr, opt);
    opt.checkpoint_budget = 0.05;
    const SimResult capped = simulate(tr, opt);
    INFO("seed " << seed);
    REQUIRE(capped.finished == tr.jobs.size());
    REQUIRE(capped.jobs_checkpointed <= 8 + 6);
    REQUIRE(capped.jobs_checkpointed <= free.jobs_checkpointed);
    over += free.jobs_checkpointed > 8 + 6;
  }
  REQUIRE(over >= 3);  // without the budget it is exceeded
}
