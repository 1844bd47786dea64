// PBA inside the whole pass (schedule(): order -> pba -> nci -> planner): the
// preemptor must be started by the planner in the slot its victim freed.
#include <catch2/catch.hpp>

#include "coordinator/schedule.hpp"

using namespace corral;
using namespace corral::pba;

namespace {
RunningJob running_on(JobId id, std::uint32_t node, Time start, PreemptMode mode) {
  RunningJob r;
  r.job.id = id;
  r.job.user = "x";
  r.job.walltime = 100000;
  r.job.preempt = mode;
  r.start = start;
  r.expected_end = start + 100000;
  r.slots = 1;
  r.placement.push_back(Placement{node, 1, {0}});
  return r;
}
}  // namespace

TEST_CASE("pipeline: the planner starts the preemptor in the freed slot", "[pipeline]") {
  for (PreemptMode mode : {PreemptMode::Requeue, PreemptMode::Suspend}) {
    SchedConfig cfg;
    cfg.planner.duration_offset = 0;
    cfg.pba.enabled = true;
    cfg.pba.require_project_tag = false;
    const Time now = week_start(IsoWeek{2026, 48}) + 7200;
    auto r = parse_plan("project chip\nmember chip alice\nalloc chip 2026-W48 1\n", {now});
    REQUIRE(r.ok());
    cfg.pba.plan = r.plan;

    Snapshot s;
    s.now = now;
    s.nodes = {Node{"a", 1, 0, 0, {}, {}, true}, Node{"b", 1, 0, 0, {}, {}, true}};
    s.running = {running_on(1, 0, now - 5000, mode), running_on(2, 1, now - 100, mode)};
    Job normal;  // a normal job pending longer, higher numeric priority
    normal.id = 5;
    normal.user = "y";
    normal.walltime = 600;
    normal.submit = now - 9000;
    normal.cycles_pending = 300;
    normal.priority = 320;
    Job alloc;
    alloc.id = 9;
    alloc.project = "chip";
    alloc.user = "alice";
    alloc.walltime = 600;
    alloc.submit = now - 1000;
    s.pending = {normal, alloc};

    const Plan p = schedule(s, cfg, 1);
    int stops = 0, starts = 0;
    for (const auto& d : p.decisions) {
      if (d.action == Action::Requeue || d.action == Action::Suspend) {
        ++stops;
        CHECK(d.job == 2);  // the most recently started
        CHECK(d.action == (mode == PreemptMode::Suspend ? Action::Suspend : Action::Requeue));
      }
      if (d.action == Action::Start) {
        ++starts;
        CHECK(d.job == 9);  // not the normal job
        REQUIRE(d.placement.size() == 1);
        CHECK(d.placement[0].node == 1);  // the victim's node
      }
    }
    CHECK(stops == 1);
    CHECK(starts == 1);
  }
}

TEST_CASE("pipeline with NCI: PBA's allocated job keeps its place ahead of NCI's shuffle", "[pipeline][nci]") {
  SchedConfig cfg;
  cfg.planner.duration_offset = 0;
  cfg.pba.enabled = true;
  cfg.pba.require_project_tag = false;
  cfg.pba.resume_suspended = false;
  cfg.nci.enabled = true;
  cfg.nci.require_vmem = cfg.nci.require_jobfs = false;
  const Time now = week_start(IsoWeek{2026, 48}) + 7200;
  auto r = parse_plan("project chip\nmember chip alice\nalloc chip 2026-W48 2\n", {now});
  REQUIRE(r.ok());
  cfg.pba.plan = r.plan;

  Snapshot s;
  s.now = now;
  s.nodes = {Node{"a", 1, 0, 0, {}, {}, true}, Node{"b", 1, 0, 0, {}, {}, true},
             Node{"c", 1, 0, 0, {}, {}, true}};
  RunningJob mine = running_on(3, 2, now - 4000, PreemptMode::Requeue);
  mine.job.user = "alice";
  mine.job.project = "chip";
  s.running = {running_on(1, 0, now - 5000, PreemptMode::Requeue), running_on(2, 1, now - 100, PreemptMode::Requeue),
               mine};
  for (auto& rj : s.running)
    if (rj.job.project.empty()) rj.job.project = "px";
  Job normal;  // NCI's equal-access shuffle ranks it first: its owners run nothing
  normal.id = 5;
  normal.user = "y";
  normal.project = "py";
  normal.walltime = 600;
  normal.submit = now - 9000;
  Job alloc;  // alice already runs job 3: shuffled behind job 5
  alloc.id = 9;
  alloc.project = "chip";
  alloc.user = "alice";
  alloc.walltime = 600;
  alloc.submit = now - 1000;
  s.pending = {normal, alloc};

  const Plan p = schedule(s, cfg, 1);
  std::vector<JobId> stops, starts;
  for (const auto& d : p.decisions) {
    if (d.action == Action::Requeue || d.action == Action::Suspend) stops.push_back(d.job);
    if (d.action == Action::Start) {
      starts.push_back(d.job);
      REQUIRE(d.placement.size() == 1);
      CHECK(d.placement[0].node == 1);  // the victim's node
    }
  }
  CHECK(stops == std::vector<JobId>{2});
  CHECK(starts == std::vector<JobId>{9});  // not the normal job NCI shuffled first
}
