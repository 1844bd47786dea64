// Not a unit test: `test_pba "[.bench]"` prints the time of one pba_stage
// pass on a large snapshot as JSON (hidden tag, not run by meson test).
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdio>

#include "coordinator/pba/pba.hpp"

using namespace corral;
using namespace corral::pba;

TEST_CASE("bench: pba_stage on 2000 nodes, 8000 running, 20000 pending", "[.bench]") {
  const Time now = week_start(IsoWeek{2026, 48}) + 3600;
  std::string text;
  for (int p = 0; p < 50; ++p) {
    const std::string name = "p" + std::to_string(p);
    text += "project " + name + "\nmember " + name + " u:" + std::to_string(p) + " g:" + std::to_string(p % 7) +
            "\nalloc " + name + " +0 " + std::to_string(20 + p) + "\n";
    if (p % 5 == 0) text += "alloc " + name + " +0 5 user=" + std::to_string(p) + "\n";
  }
  auto r = parse_plan(text, {now});
  REQUIRE(r.ok());
  PbaConfig cfg;
  cfg.enabled = true;
  cfg.plan = r.plan;
  Snapshot s;
  s.now = now;
  for (int i = 0; i < 2000; ++i) s.nodes.push_back(Node{"n" + std::to_string(i), 4, 16384, 0, {}, {}, true});
  JobId id = 1;
  for (int i = 0; i < 8000; ++i) {
    RunningJob rj;
    rj.job.id = id++;
    rj.job.project = "p" + std::to_string(i % 60);  // some projects without a plan
    rj.job.user = std::to_string(i % 60);
    rj.start = now - 10 * i;
    rj.slots = 1;
    rj.placement.push_back(Placement{static_cast<std::uint32_t>(i / 4), 1, {}});
    s.running.push_back(rj);
  }
  for (int i = 0; i < 20000; ++i) {
    Job j;
    j.id = id++;
    j.project = "p" + std::to_string(i % 55);
    j.user = std::to_string(i % 55);
    j.submit = now - 1000 - i;
    j.cycles_pending = i % 3;
    j.priority = 20 + i % 3;
    s.pending.push_back(j);
  }
  double best = 1e9;
  std::size_t decisions = 0;
  for (int rep = 0; rep < 5; ++rep) {
    PassState st;
    for (std::uint32_t i = 0; i < s.pending.size(); ++i) st.order.push_back(i);
    Plan plan;
    const auto t0 = std::chrono::steady_clock::now();
    pba_stage(s, cfg, st, plan);
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::min(best, dt);
    decisions = plan.decisions.size();
  }
  std::printf("{\"bench\":\"pba_stage\",\"nodes\":2000,\"running\":8000,\"pending\":20000,"
              "\"decisions\":%zu,\"best_seconds\":%.6f}\n", decisions, best);
  CHECK(decisions > 0);
}
