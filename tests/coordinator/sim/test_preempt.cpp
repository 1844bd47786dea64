// Selective preemption (coordinator/planner/preempt.hpp), wide-job aging
// (order.hpp), re-prediction of queued jobs and the wait bound in the
// simulator (sim.hpp).
#include <algorithm>
#include <catch2/catch.hpp>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <tuple>

#include "coordinator/planner/order.hpp"
#include "coordinator/planner/preempt.hpp"
#include "coordinator/schedule.hpp"
#include "coordinator/sim/sim.hpp"
#include "tests/coordinator/sim/swf_line.hpp"
#include "tests/coordinator/planner/helpers.hpp"

using namespace corral;
using namespace corral::sim;

namespace {

Snapshot machine(int nodes, int cores) { return corral::testing::cluster(nodes, cores); }

Job job(JobId id, Time submit, Time walltime, int slots) {
  Job j;
  j.id = id;
  j.submit = submit;
  j.walltime = walltime;
  j.slots_min = j.slots_max = slots;
  j.checkpointable = true;
  return j;
}

RunningJob running(Job j, Time start, Time end) {
  RunningJob r;
  r.start = start;
  r.expected_end = end;
  r.slots = j.slots_min;
  r.job = std::move(j);
  return r;
}

struct Stage {
  PreemptConfig cfg;
  OrderConfig order;
  PlannerConfig planner;
  Stage() {
    cfg.enabled = true;
    planner.backfill = Backfill::Checkpoint;
    planner.checkpoint_cost = 60;
    planner.duration_offset = 0;
  }
  // Checkpointed job ids of one stage call on `s` (order: the snapshot's).
  std::vector<JobId> run(const Snapshot& s, Snapshot* out = nullptr, bool* copied = nullptr) {
    PassState st;
    order_pending(s, order, st);
    Plan plan;
    Snapshot o;
    bool c = preempt_stage(s, cfg, order, planner, st, plan, o);
    if (copied) *copied = c;
    if (out && c) *out = o;
    std::vector<JobId> ids;
    for (const Decision& d : plan.decisions) {
      REQUIRE(d.action == Action::Checkpoint);
      ids.push_back(d.job);
    }
    return ids;
  }
};

}  // namespace

TEST_CASE("preempt: a blocked job with a large expansion factor checkpoints a long low-factor job", "[sim][preempt]") {
  Stage t;
  Snapshot s = machine(1, 4);
  s.now = 1000;
  s.running.push_back(running(job(1, 0, 36000, 4), 0, 36000));  // xf 1
  s.pending.push_back(job(2, 0, 100, 1));                         // xf (1000 + 100) / 100 = 11
  Snapshot out;
  bool copied = false;
  REQUIRE(t.run(s, &out, &copied) == std::vector<JobId>{1});
  // The planner sees the victim hold its cores while the checkpoint is written.
  REQUIRE(copied);
  REQUIRE(out.running[0].expected_end == 1060);
  REQUIRE_FALSE(out.running[0].backfilled);

  // Through the whole pass: the preemptor is reserved for when the cores come back.
  SchedConfig cfg;
  cfg.preempt = t.cfg;
  cfg.planner = t.planner;
  Plan p = schedule(s, cfg, 1);
  bool ckpt = false, reserved = false;
  for (const Decision& d : p.decisions) {
    if (d.action == Action::Checkpoint && d.job == 1) ckpt = true;
    if (d.action == Action::Reserve && d.job == 2 && d.at == 1060) reserved = true;
    REQUIRE_FALSE((d.action == Action::Start && d.job == 2));
  }
  REQUIRE(ckpt);
  REQUIRE(reserved);

  // Off: the same pass preempts nothing.
  cfg.preempt.enabled = false;
  for (const Decision& d : schedule(s, cfg, 1).decisions) REQUIRE(d.action != Action::Checkpoint);
}

TEST_CASE("preempt: the suspension factor, victim ends, requeue cap and free cores are respected", "[sim][preempt]") {
  Stage t;
  t.cfg.min_left = 0;
  Snapshot s = machine(1, 4);
  s.running.push_back(running(job(1, 0, 36000, 4), 0, 36000));
  s.pending.push_back(job(2, 0, 100, 1));

  SECTION("factor not reached: xf 1.1 < 2 x 1") {
    s.now = 10;
    REQUIRE(t.run(s).empty());
  }
  SECTION("a higher factor needs a longer wait") {
    s.now = 500;  // xf 6
    t.cfg.factor = 8;
    REQUIRE(t.run(s).empty());
    s.now = 1000;  // xf 11
    REQUIRE(t.run(s) == std::vector<JobId>{1});
  }
  SECTION("a victim planned to end before the preemptor would is left alone") {
    s.now = 1000;
    s.running[0].expected_end = 1150;  // preemptor planned to end at 1000 + 60 + 100
    REQUIRE(t.run(s).empty());
    s.running[0].expected_end = 1160;
    REQUIRE(t.run(s) == std::vector<JobId>{1});
  }
  SECTION("min_left: a victim close to its end is left alone") {
    s.now = 1000;
    t.cfg.min_left = 600;
    s.running[0].expected_end = 1500;
    REQUIRE(t.run(s).empty());
  }
  SECTION("a job requeued max_requeues times is no longer a victim") {
    s.now = 1000;
    s.running[0].job.requeues = 2;
    REQUIRE(t.run(s).empty());
    t.cfg.max_requeues = 3;
    REQUIRE(t.run(s) == std::vector<JobId>{1});
  }
  SECTION("not checkpointable, suspended or already freed: never a victim") {
    s.now = 1000;
    s.running[0].job.checkpointable = false;
    REQUIRE(t.run(s).empty());
    s.running[0].job.checkpointable = true;
    s.running[0].suspended = true;
    REQUIRE(t.run(s).empty());
  }
  SECTION("a job that fits in the free cores needs no preemption") {
    s.now = 1000;
    s.running[0].slots = 3;
    s.running[0].job.slots_min = s.running[0].job.slots_max = 3;
    REQUIRE(t.run(s).empty());
  }
  SECTION("cores that come back within the checkpoint cost are waited for") {
    s.now = 1000;
    s.running.push_back(running(job(3, 0, 1030, 1), 0, 1030));  // ends in 30 s
    s.running[0].slots = 3;
    s.running[0].job.slots_min = s.running[0].job.slots_max = 3;
    REQUIRE(t.run(s).empty());
  }
}

TEST_CASE("preempt: victims are the smallest job that frees enough, else the largest first", "[sim][preempt]") {
  Stage t;
  Snapshot s = machine(1, 16);
  s.now = 5000;
  s.running.push_back(running(job(1, 0, 36000, 8), 0, 36000));
  s.running.push_back(running(job(2, 0, 36000, 4), 0, 36000));
  s.running.push_back(running(job(3, 0, 36000, 2), 0, 36000));
  s.running.push_back(running(job(4, 0, 36000, 2), 0, 36000));
  s.pending.push_back(job(10, 0, 100, 3));
  REQUIRE(t.run(s) == std::vector<JobId>{2});  // 4 slots: the smallest enough
  s.pending[0].slots_min = s.pending[0].slots_max = 14;
  const auto v = t.run(s);
  REQUIRE(v == std::vector<JobId>{1, 2, 3});  // 8 + 4 + 2 >= 14, largest first
}

TEST_CASE("preempt: aged jobs are protected and an aged job preempts whatever the factors", "[sim][preempt]") {
  Stage t;
  t.order.aging = 3000;
  Snapshot s = machine(1, 4);
  s.now = 5000;
  SECTION("a job that started aged is never the victim of a younger job") {
    s.running.push_back(running(job(1, 0, 36000, 4), 3500, 39500));  // waited 3500 >= 3000
    s.pending.push_back(job(2, 4000, 100, 1));                         // xf 11
    REQUIRE(t.run(s).empty());
  }
  SECTION("an aged job preempts a job of higher factor that ends after it") {
    s.running.push_back(running(job(1, 4900, 100, 4), 4990, 5090));  // xf 1.9, ends in 90 s
    s.running[0].job.walltime = 100;
    s.pending.push_back(job(2, 0, 36000, 4));  // aged (waited 5000), xf 1.14
    REQUIRE(t.run(s) == std::vector<JobId>{1});
    t.order.aging = 0;  // not aged: its factor is too small
    REQUIRE(t.run(s).empty());
  }
  SECTION("wide jobs age sooner (aging_wide)") {
    t.order.aging = 100000;
    t.order.aging_wide = 3000;
    t.order.wide_fraction = 0.5;
    s.running.push_back(running(job(1, 100, 36000, 4), 200, 36200));
    s.pending.push_back(job(2, 0, 36000, 2));  // half the machine: aged after 3000 s
    REQUIRE(t.run(s) == std::vector<JobId>{1});
    s.pending[0].slots_min = s.pending[0].slots_max = 1;  // narrow: not aged
    REQUIRE(t.run(s).empty());
  }
}

TEST_CASE("order: wide jobs age after aging_wide; aging 0 turns every bound off", "[sim][order]") {
  Snapshot s = machine(1, 10);
  s.now = 10000;
  s.pending.push_back(job(1, 1000, 100, 1));    // narrow, waited 9000
  s.pending.push_back(job(2, 5000, 36000, 5));  // wide, waited 5000, low xf
  OrderConfig c;
  c.policy = Order::Lxf;
  PassState st;
  order_pending(s, c, st);
  REQUIRE(st.order == std::vector<std::uint32_t>{0, 1});  // lxf: 91 vs 1.14
  c.aging = 100000;
  c.aging_wide = 4000;
  c.wide_fraction = 0.5;
  order_pending(s, c, st);
  REQUIRE(st.order == std::vector<std::uint32_t>{1, 0});  // the wide job aged
  REQUIRE(aging_of(s.pending[1], c, 10) == 4000);
  REQUIRE(aging_of(s.pending[0], c, 10) == 100000);
  c.aging = 0;
  order_pending(s, c, st);
  REQUIRE(st.order == std::vector<std::uint32_t>{0, 1});
  REQUIRE(aging_of(s.pending[1], c, 10) == 0);
}

constexpr auto line = corral::testing::swf_line;


TEST_CASE("sim: queued jobs are predicted again when their user's job ends (repredict)", "[sim][predict]") {
  // One processor. User 7's first job ends at 10 after 10 s; its other jobs,
  // queued before that with 100000 s requests, are then predicted at 10 s and
  // go ahead of user 2's 1000-s job under lxf. Without re-prediction they wait.
  std::string text = "; MaxProcs: 1\n";
  text += line(1, 0, 10, 1, 100000, 7);
  text += line(2, 1, 10, 1, 100000, 7);
  text += line(3, 1, 10, 1, 100000, 7);
  text += line(4, 5, 1000, 1, 1000, 2);
  SwfTrace tr = parse_swf(text);
  SimOptions opt;
  opt.sched.planner.backfill = Backfill::Easy;
  opt.sched.order.policy = Order::Lxf;
  opt.predict = true;
  SimResult a = simulate(tr, opt);
  opt.repredict = true;
  SimResult b = simulate(tr, opt);
  REQUIRE(a.per_job[3].first_start == 10);  // user 2's job first
  REQUIRE(a.per_job[1].first_start == 1010);
  REQUIRE(b.per_job[1].first_start == 10);  // re-predicted: 10 s
  REQUIRE(b.per_job[2].first_start == 20);
  REQUIRE(b.per_job[3].first_start == 30);
  REQUIRE(b.mean_bsld < a.mean_bsld);
}

TEST_CASE("sim: selective preemption keeps every job's work and charges its costs", "[sim][preempt]") {
  // Four processors: a 4-proc 10-h job runs; a 1-proc 100-s job arrives and,
  // once its expansion factor passes 2, checkpoints the long job (at the
  // latest at the pass of job 3's arrival).
  std::string text = "; MaxProcs: 4\n";
  text += line(1, 0, 36000, 4, 36000, 1);
  text += line(2, 10, 100, 1, 100, 2);
  text += line(3, 500, 10, 1, 10, 3);
  SwfTrace tr = parse_swf(text);
  SimOptions opt;
  opt.sched.planner.backfill = Backfill::Checkpoint;
  opt.sched.order.policy = Order::Lxf;
  opt.sched.preempt.enabled = true;
  SimResult r = simulate(tr, opt);
  REQUIRE(r.finished == 3);
  REQUIRE(r.checkpoints == 1);
  REQUIRE(r.per_job[0].checkpoints == 1);
  // The short jobs start once the checkpoint is written, far before 36000.
  REQUIRE(r.per_job[1].first_start <= 560);
  REQUIRE(r.per_job[2].first_start <= 560);
  // The long job keeps its work: it loses the checkpoint (60 s), the short
  // job's run (100 s) and the restart (60 s), nothing more.
  REQUIRE(r.per_job[0].end == 36000 + 60 + 100 + 60);
  REQUIRE(r.checkpoint_cost_total == 60 * 4);
  REQUIRE(r.restart_cost_total == 60 * 4);
  opt.sched.preempt.enabled = false;
  SimResult n = simulate(tr, opt);
  REQUIRE(n.checkpoints == 0);
  REQUIRE(n.per_job[1].first_start == 36000);
}

TEST_CASE("sim: the wait bound holds on random workloads", "[sim][preempt][bound]") {
  // The stated bound (bench/sim/RESULTS.md): a job waits at most its aging
  // bound + the checkpoint cost + the longest requested time, while aged jobs
  // do not queue behind one another (a load that does not pile them up:
  // about 0.4 on 32 procs, mean area 8.5 procs x 2 h every 4500 s).
  const Time aging = 4 * 3600, wmax = 4 * 3600, cost = 60;
  int aged = 0;
  for (unsigned seed = 1; seed <= 12; ++seed) {
    std::mt19937 rng(seed);
    std::uniform_int_distribution<int> procs(1, 16), user(1, 6);
    std::uniform_int_distribution<long> run(10, wmax), gap(0, 9000);
    std::string text = "; MaxProcs: 32\n";
    long t = 0;
    for (int i = 1; i <= 300; ++i) {
      t += gap(rng);
      const long r = run(rng);
      const long req = std::min<long>(wmax, r * (1 + static_cast<long>(rng() % 4)));
      text += line(i, t, r, procs(rng), req, user(rng));
    }
    SwfTrace tr = parse_swf(text);
    SimOptions opt;
    opt.sched.planner.backfill = Backfill::Checkpoint;
    opt.sched.planner.checkpoint_split = 0.1;
    opt.sched.order.policy = Order::Lxf;
    opt.sched.order.aging = aging;
    opt.sched.order.aging_wide = aging / 2;
    opt.sched.preempt.enabled = true;
    opt.predict = opt.repredict = true;
    SimResult r = simulate(tr, opt);
    INFO("seed " << seed);
    REQUIRE(r.finished == tr.jobs.size());
    REQUIRE(r.max_wait <= aging + cost + wmax);
    for (std::size_t i = 0; i < r.per_job.size(); ++i) {
      const Job j = job(1, 0, 0, r.per_job[i].procs);
      if (r.per_job[i].first_start - r.per_job[i].submit >= aging_of(j, opt.sched.order, 32)) ++aged;
    }
  }
  REQUIRE(aged > 0);  // the aged path was exercised
}

TEST_CASE("sim: preemption passes give the same schedule with a kept planner as with a fresh one", "[sim][preempt]") {
  // The preempt stage hands the planner a modified copy of the snapshot; a
  // planner that keeps state across passes must not be misled by it.
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> procs(1, 24), user(1, 5);
  std::uniform_int_distribution<long> run(10, 20000), gap(0, 1200);
  std::string text = "; MaxProcs: 32\n";
  long t = 0;
  for (int i = 1; i <= 400; ++i) {
    t += gap(rng);
    const long r = run(rng);
    text += line(i, t, r, procs(rng), std::min<long>(20000, r * (1 + static_cast<long>(rng() % 3))), user(rng));
  }
  SwfTrace tr = parse_swf(text);
  // fifo under easy: the planner's scan reads the simulator's
  // PendingHints::order_slots_min / order_min_duration, which checkpointed
  // jobs re-enter at their FIFO place (not at the end); a pass function of
  // the caller's gets no such arrays, so both replays agree only if the
  // simulator keeps them right through requeues.
  for (const auto& [b, order] : {std::pair{Backfill::Easy, Order::Lxf}, std::pair{Backfill::Checkpoint, Order::Lxf},
                                 std::pair{Backfill::Easy, Order::Fifo}}) {
    SimOptions opt;
    opt.sched.planner.backfill = b;
    opt.sched.order.policy = order;
    opt.sched.order.aging = 20000;
    opt.sched.preempt.enabled = true;
    opt.predict = opt.repredict = true;
    SimResult kept = simulate(tr, opt);
    opt.scheduler = [](const Snapshot& s, const SchedConfig& c, std::uint64_t seed) { return schedule(s, c, seed); };
    SimResult fresh = simulate(tr, opt);
    INFO(name(b) << " " << name(order));
    REQUIRE(kept.checkpoints > 0);
    REQUIRE(kept.checkpoints == fresh.checkpoints);
    for (std::size_t i = 0; i < kept.per_job.size(); ++i) {
      REQUIRE(kept.per_job[i].first_start == fresh.per_job[i].first_start);
      REQUIRE(kept.per_job[i].end == fresh.per_job[i].end);
    }
  }
}

namespace {

// Checks, from a replay's run segments (SimOptions::record_segments), that
// checkpointed work is never lost or repeated: every job finishes; its
// segments never overlap (it never runs twice) and all but the last end in
// a checkpoint; the useful work of each segment (its length less the
// restart cost paid at its start, when work had been saved, and the
// checkpoint cost at its end) adds up exactly to the job's run time; the
// costs add up to what the replay reports. Also that no node holds more
// slots than it has at any time. Returns the jobs checkpointed at least twice.
int check_work_kept(const SwfTrace& tr, const SimOptions& opt, const SimResult& r, Time ckpt, Time restart) {
  REQUIRE(r.finished == tr.jobs.size());
  REQUIRE(r.unstarted == 0);
  REQUIRE(r.preemptions == 0);  // nothing requeued without a checkpoint (that would lose work)
  std::map<JobId, std::vector<const Segment*>> of;
  for (const Segment& g : r.segments) of[g.id].push_back(&g);
  std::size_t ckpts = 0;
  Time ckpt_total = 0, restart_total = 0;
  int twice = 0;
  for (const JobResult& j : r.per_job) {
    INFO("job " << j.id);
    std::vector<const Segment*>& v = of[j.id];
    std::sort(v.begin(), v.end(), [](const Segment* a, const Segment* b) { return a->start < b->start; });
    REQUIRE(!v.empty());
    REQUIRE(v.front()->start == j.first_start);
    REQUIRE(v.back()->end == j.end);
    REQUIRE(static_cast<int>(v.size()) == j.checkpoints + 1);
    Time saved = 0;
    for (std::size_t k = 0; k < v.size(); ++k) {
      const Segment& g = *v[k];
      INFO("segment " << k << " [" << g.start << "," << g.end << ")");
      if (k > 0) REQUIRE(v[k - 1]->end <= g.start);  // never running twice
      REQUIRE(g.checkpointed == (k + 1 < v.size()));
      const Time paid = saved > 0 ? restart : 0;  // resuming from a checkpoint
      restart_total += paid * g.slots;
      if (g.checkpointed) {
        REQUIRE(g.end - g.start >= ckpt);
        ckpt_total += ckpt * g.slots;
        ++ckpts;
        // Work done up to the checkpoint (none if it came during the restart).
        const Time work = std::max<Time>(0, g.end - ckpt - g.start - paid);
        REQUIRE(saved + work < j.run);  // a checkpoint never completes the job
        saved += work;
      } else {
        REQUIRE(g.end - g.start == paid + (j.run - saved));  // only what is left, once
        saved = j.run;
      }
    }
    REQUIRE(saved == j.run);
    if (j.checkpoints >= 2) ++twice;
  }
  CHECK(ckpts == r.checkpoints);
  CHECK(ckpt_total == r.checkpoint_cost_total);
  CHECK(restart_total == r.restart_cost_total);
  // Slots held per node over time (a checkpoint being written holds them).
  std::vector<std::tuple<Time, int, const Segment*>> ev;
  for (const Segment& g : r.segments) {
    ev.emplace_back(g.start, 1, &g);
    ev.emplace_back(g.end, -1, &g);
  }
  std::sort(ev.begin(), ev.end(), [](const auto& a, const auto& b) {
    return std::get<0>(a) != std::get<0>(b) ? std::get<0>(a) < std::get<0>(b) : std::get<1>(a) < std::get<1>(b);
  });
  const int cores = opt.cores;
  std::vector<int> used(static_cast<std::size_t>(r.machine_procs / cores), 0);
  for (const auto& [t, sign, g] : ev) {
    int n = 0;
    for (const Placement& p : g->placement)
      for (std::uint32_t k = 0; k < p.count; ++k) {
        REQUIRE(p.node + k < used.size());
        used[p.node + k] += sign * static_cast<int>(p.slots);
        REQUIRE(used[p.node + k] <= cores);
        n += static_cast<int>(p.slots);
      }
    INFO("segment of job " << g->id << " [" << g->start << "," << g->end << ")");
    REQUIRE(n == g->slots);
  }
  return twice;
}

}  // namespace

TEST_CASE("sim: checkpointed work is never lost or repeated (random workloads)", "[sim][preempt][property]") {
  // checkpoint-backfill-patent.zh.txt [0043], [0046] (a restarted job
  // resumes from its checkpoint and computes only what is left; the same
  // work is never run twice) and claim 1; seeds/README.md step 5.
  // Three ways jobs get checkpointed: the checkpoint policy's window end
  // alone, selective preemption under easy, and both (corral sim's default
  // setting), with several checkpoint / restart costs (0 included).
  struct Setting {
    const char* name;
    Backfill b;
    bool preempt;
  };
  const Setting settings[] = {{"checkpoint", Backfill::Checkpoint, false},
                              {"easy --preempt", Backfill::Easy, true},
                              {"checkpoint --preempt", Backfill::Checkpoint, true}};
  const std::pair<Time, Time> costs[] = {{60, 60}, {0, 30}, {45, 0}, {120, 90}};
  std::map<std::string, std::size_t> ckpts;
  int twice = 0, restarted_costly = 0;
  for (unsigned seed = 1; seed <= 12; ++seed) {
    std::mt19937 rng(seed);
    std::uniform_int_distribution<int> procs(1, 16), user(1, 6);
    std::uniform_int_distribution<long> shortrun(10, 600), longrun(600, 20000), gap(0, 1500);
    std::string text = "; MaxProcs: 32\n";
    long t = 0;
    for (int i = 1; i <= 150; ++i) {
      t += gap(rng);
      const long r = rng() % 3 == 0 ? shortrun(rng) : longrun(rng);
      const long req = std::min<long>(40000, r * (1 + static_cast<long>(rng() % 4)) + static_cast<long>(rng() % 600));
      const long p = procs(rng), u = user(rng);
      text += line(i, t, r, p, req, u);
    }
    const SwfTrace tr = parse_swf(text);
    const auto [ckpt, restart] = costs[seed % 4];
    for (const Setting& st : settings) {
      SimOptions opt;
      opt.sched.planner.backfill = st.b;
      opt.sched.planner.checkpoint_split = seed % 2 ? 0.1 : 0.5;
      opt.sched.planner.checkpoint_threshold = 900;
      opt.sched.preempt.enabled = st.preempt;
      if (st.preempt) {
        opt.sched.order.policy = Order::Lxf;
        opt.sched.order.aging = 6 * 3600;
        opt.predict = opt.repredict = seed % 3 != 0;
      }
      opt.checkpoint_cost = ckpt;
      opt.restart_cost = restart;
      if (seed % 2 == 0) {  // 8 nodes of 4 cores, else 32 single-core nodes
        opt.nodes = 8;
        opt.cores = 4;
      }
      opt.record_segments = true;
      const SimResult r = simulate(tr, opt);
      INFO("seed " << seed << ", " << st.name << ", costs " << ckpt << "/" << restart);
      twice += check_work_kept(tr, opt, r, ckpt, restart);
      ckpts[st.name] += r.checkpoints;
      if (restart > 0 && r.restart_cost_total > 0) ++restarted_costly;
    }
  }
  // Not vacuous: every way checkpoints, some jobs more than once, and
  // restarts were charged.
  for (const Setting& st : settings) {
    INFO(st.name);
    CHECK(ckpts[st.name] >= 50);
  }
  CHECK(twice >= 10);
  CHECK(restarted_costly >= 10);
}
