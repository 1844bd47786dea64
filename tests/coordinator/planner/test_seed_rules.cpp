// The planner's part of the seed rules a live corrald relies on:
//   - qsub -now y (sge6-reservation-backfill.txt, -R): an immediate job starts
//     in this pass or is rejected, and is never reserved, under every policy;
//   - checkpoint backfilling: a backfilled job's window ends at its start plus
//     the split estimate it was started with (RunningJob::backfill_estimate),
//     whatever the split settings are now (corrald keeps it across restarts).
#include <catch2/catch.hpp>

#include "tests/coordinator/planner/helpers.hpp"

using namespace corral;
using namespace corral::testing;

TEST_CASE("-now y: started at once or rejected, never reserved", "[planner]") {
  for (Backfill b : {Backfill::Fcfs, Backfill::Easy, Backfill::Conservative, Backfill::Reserve, Backfill::Checkpoint}) {
    INFO("policy " << name(b));
    Snapshot s = cluster(2);
    s.running.push_back(running(1, 1, 0, 100, 0));
    Job blocked = job(2, 2, 50);  // waits for job 1: reserved (reserve: it asks with -R y)
    blocked.reserve = true;
    Job now = job(3, 2, 10);
    now.immediate = true;
    now.reserve = true;
    Job fits = job(4, 1, 10);
    fits.immediate = true;
    s.pending = {blocked, now, fits};
    Plan p = run(s, cfg_of(b));
    const Decision* r = find(p, 3, Action::Reject);
    REQUIRE(r);
    CHECK(r->reason == "job 3 was submitted with -now y and cannot start at once (2 slots not free now)");
    CHECK_FALSE(find(p, 3, Action::Reserve));
    // Job 4 fits now; under fcfs it sits behind the blocked head, so it cannot start at once.
    if (b == Backfill::Fcfs) {
      CHECK(find(p, 4, Action::Reject));
    } else {
      CHECK(find(p, 4, Action::Start));
    }
    CHECK_FALSE(find(p, 4, Action::Reserve));
    if (b != Backfill::Fcfs) CHECK(find(p, 2, Action::Reserve) != nullptr);  // fcfs reserves nothing
    CHECK_FALSE(find(p, 2, Action::Reject));
  }
}

TEST_CASE("checkpoint: a backfilled job's window is the split estimate it started with", "[planner]") {
  // 2 nodes: job 1 (backfilled at 0, 1 slot, 1000 s requested) and job 2 (1 slot, ends at 50).
  // The head (2 slots) waits. At t = 60 job 2 has ended; job 1 was started with a split estimate
  // of 40 s, so its window is over and it is checkpointed, although the split settings now
  // (p = 0.9) would give it 900 s.
  Snapshot s = cluster(2, 1, 60);
  RunningJob bf = running(1, 1, 0, 1000, 0);
  bf.backfilled = true;
  bf.backfill_estimate = 40;
  s.running.push_back(bf);
  s.pending = {job(3, 2, 100)};
  PlannerConfig c = cfg_of(Backfill::Checkpoint);
  c.checkpoint_split = 0.9;
  c.checkpoint_threshold = 10;
  Plan p = run(s, c);
  CHECK(find(p, 1, Action::Checkpoint));
  CHECK(find(p, 3, Action::Start));
  // Without the kept estimate the window is 900 s: not over, nothing stopped.
  s.running[0].backfill_estimate = 0;
  p = run(s, c);
  CHECK_FALSE(find(p, 1, Action::Checkpoint));
  CHECK_FALSE(find(p, 3, Action::Start));
}
