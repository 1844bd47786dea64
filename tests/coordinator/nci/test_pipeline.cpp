// NCI inside the whole pass (schedule()): the planner starts nothing NCI did
// not decide, and NCI's suspender lands on its victim's cores.
#include <catch2/catch.hpp>

#include <set>

#include "coordinator/schedule.hpp"
#include "helpers.hpp"

using namespace corral;
using namespace nci_test;

TEST_CASE("schedule() with NCI: priority-run end to end", "[nci][pipeline]") {
  Snapshot s;
  s.now = 5000;
  s.nodes = {node("n0", 8, 16000), node("n1", 8, 16000)};
  s.running = {running(job(1, 8, 36000, "normal", "a", "pa", 4000), 0, 0, 1000),
               running(job(2, 6, 36000, "normal", "b", "pb", 4000), 1, 0, 1000)};
  s.pending = {job(10, 4, 3600, "express", "c", "pc", 4000), job(11, 2, 3600, "normal", "d", "pd", 100),
               job(12, 8, 3600, "normal", "e", "pe", 100)};
  SchedConfig cfg;
  cfg.nci.enabled = true;
  for (auto bf : {Backfill::Fcfs, Backfill::Easy, Backfill::Conservative}) {
    cfg.planner.backfill = bf;
    const Plan p = schedule(s, cfg, 7);
    // Express job 10 suspends a normal job; 11 takes the 2 idle cores of n1;
    // 12 waits (no priority over normal jobs, below the parallel-run size).
    std::vector<JobId> starts = ids(p, Action::Start);
    std::sort(starts.begin(), starts.end());
    CHECK(starts == std::vector<JobId>{10, 11});
    CHECK(ids(p, Action::Suspend).size() == 1);
    const Decision* d = find(p, Action::Start, 10);
    REQUIRE(d);
    const JobId victim = ids(p, Action::Suspend)[0];
    const RunningJob& v = s.running[victim - 1];
    REQUIRE(d->placement.size() == 1);
    CHECK(d->placement[0].node == v.placement[0].node);
    const std::set<int> vc(v.placement[0].cores.begin(), v.placement[0].cores.end());
    for (int c : d->placement[0].cores) CHECK(vc.count(c) == 1);
  }
}
