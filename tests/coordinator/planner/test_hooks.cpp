// The planner's two hooks for the policy stages: PlannerConfig::may_place
// (PBA placeholder slots) and Resume decisions already in the plan.
#include <catch2/catch.hpp>

#include "tests/coordinator/planner/helpers.hpp"

using namespace corral;
using namespace corral::testing;

TEST_CASE("planner: may_place is consulted for node-bound starts", "[planner][hooks]") {
  // Two 4-core nodes with memory; a node-bound job (it needs memory) of 2 slots.
  Snapshot s = cluster(2, 4);
  for (Node& n : s.nodes) n.mem_mb = 4000;
  Job j = job(1, 2, 100);
  j.mem_mb = 1000;
  s.pending.push_back(j);
  PlannerConfig cfg = cfg_of(Backfill::Easy);

  // Without the hook: best fit picks a node (both have room).
  Plan p0 = run(s, cfg);
  REQUIRE(find(p0, 1, Action::Start));

  // The hook refuses node 0: the job must land on node 1, and the hook sees
  // the pass state and the job.
  int calls = 0;
  cfg.may_place = [&](const Snapshot& sn, const PassState&, const Plan&, const Job& jb, std::uint32_t node, int slots) {
    ++calls;
    CHECK(&sn == &s);
    CHECK(jb.id == 1);
    CHECK(slots >= 1);
    return node != 0;
  };
  Plan p1 = run(s, cfg);
  const Decision* d = find(p1, 1, Action::Start);
  REQUIRE(d);
  REQUIRE(d->placement.size() == 1);
  CHECK(d->placement[0].node == 1);
  CHECK(calls > 0);

  // Refusing every node: nothing starts now (it is reserved instead).
  cfg.may_place = [](const Snapshot&, const PassState&, const Plan&, const Job&, std::uint32_t, int) { return false; };
  Plan p2 = run(s, cfg);
  CHECK_FALSE(find(p2, 1, Action::Start));

  // Cores-only jobs keep the fast path: the hook is not asked.
  Snapshot s2 = cluster(2, 4);
  s2.pending.push_back(job(2, 2, 100));
  calls = 0;
  cfg.may_place = [&](const Snapshot&, const PassState&, const Plan&, const Job&, std::uint32_t, int) {
    ++calls;
    return false;
  };
  Plan p3 = run(s2, cfg);
  CHECK(find(p3, 2, Action::Start));
  CHECK(calls == 0);
}

TEST_CASE("planner: cores of a job resumed this pass are held", "[planner][hooks]") {
  // 4 single-core nodes; job 1 (2 slots on n0, n1) is suspended: its cores look free.
  Snapshot s = cluster(4, 1, 1000);
  RunningJob r = running(1, 2, 0, 5000, 0);
  r.suspended = true;
  s.running.push_back(r);
  s.pending.push_back(job(2, 4, 100, 500));
  s.pending.push_back(job(3, 2, 100, 600));
  PlannerConfig cfg = cfg_of(Backfill::Easy);

  // Not resumed: the 4-slot job takes the whole machine.
  Plan p0 = run(s, cfg);
  CHECK(find(p0, 2, Action::Start));

  // Resumed earlier in this pass (a policy stage's decision): only n2, n3
  // are free, so job 2 cannot start and job 3 fits beside the resumed job.
  Plan p1;
  Decision res;
  res.action = Action::Resume;
  res.job = 1;
  res.at = s.now;
  p1.decisions.push_back(res);
  plan_pass(s, cfg, fifo(s), p1);
  CHECK_FALSE(find(p1, 2, Action::Start));
  const Decision* d3 = find(p1, 3, Action::Start);
  REQUIRE(d3);
  for (const Placement& pl : d3->placement) CHECK(pl.node >= 2);
  // Job 2 is reserved after the resumed job's end, not now.
  const Decision* r2 = find(p1, 2, Action::Reserve);
  REQUIRE(r2);
  CHECK(r2->at > s.now);
}
