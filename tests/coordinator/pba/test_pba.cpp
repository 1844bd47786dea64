// PBA rules, with the patent's own worked examples (pba-synopsys-patent.txt).
#include <catch2/catch.hpp>

#include <algorithm>

#include "coordinator/pba/pba.hpp"
#include "tests/coordinator/pba/week48.hpp"

using namespace corral;
using namespace corral::pba;

namespace {

// A tiny caller: keeps the snapshot between passes and applies the plan the
// way pba.hpp's contract says (the planner's starts are done by hand).
struct World {
  Snapshot snap;
  PbaConfig cfg;
  PassState st;

  World(int nodes, const std::string& plan_text) {
    snap.now = kW48 + 1000;
    for (int i = 0; i < nodes; ++i) snap.nodes.push_back(Node{"n" + std::to_string(i), 1, 0, 0, {}, {}, true});
    auto r = parse_plan(plan_text, {snap.now});
    INFO((r.errors.empty() ? std::string() : r.errors.front()));
    REQUIRE(r.ok());
    cfg.enabled = true;
    cfg.plan = r.plan;
  }

  Job* pending(JobId id) {
    for (auto& j : snap.pending)
      if (j.id == id) return &j;
    return nullptr;
  }
  RunningJob* running(JobId id) {
    for (auto& r : snap.running)
      if (r.job.id == id) return &r;
    return nullptr;
  }
  void submit(JobId id, const std::string& project, const std::string& user, Time submit = -1) {
    Job j;
    j.id = id;
    j.project = project;
    j.user = user;
    j.submit = submit < 0 ? snap.now : submit;
    snap.pending.push_back(j);
  }
  Plan pass() {
    st = PassState{};
    for (std::uint32_t i = 0; i < snap.pending.size(); ++i) st.order.push_back(i);
    Plan p;
    p.now = snap.now;
    pba_stage(snap, cfg, st, p);
    for (const auto& u : p.updates) {
      if (Job* j = pending(u.job)) apply_update(*j, u);
      else if (RunningJob* r = running(u.job)) apply_update(r->job, u);
    }
    for (const auto& d : p.decisions) {
      if (d.pba_preemption && d.action == Action::Requeue)  // the contract: PBA's requeues only
        if (RunningJob* r = running(d.job)) on_pba_preemption(r->job);
      if (d.action == Action::Requeue) requeue(d.job);
      if (d.action == Action::Demote) pending(d.job)->queue = d.queue;
    }
    return p;
  }
  void start(JobId id, int node = 0) {
    auto it = std::find_if(snap.pending.begin(), snap.pending.end(), [&](const Job& j) { return j.id == id; });
    REQUIRE(it != snap.pending.end());
    RunningJob r;
    r.job = *it;
    on_start(r.job, snap.now);
    r.start = snap.now;
    r.slots = 1;
    r.placement.push_back(Placement{static_cast<std::uint32_t>(node), 1, {0}});
    snap.pending.erase(it);
    snap.running.push_back(r);
  }
  void finish(JobId id) {
    snap.running.erase(std::find_if(snap.running.begin(), snap.running.end(),
                                    [&](const RunningJob& r) { return r.job.id == id; }));
  }
  void requeue(JobId id) {
    RunningJob* r = running(id);
    REQUIRE(r);
    Job j = r->job;
    on_requeue(j);
    finish(id);
    snap.pending.push_back(j);
  }
  // Pending job ids in the order the stage left st.order.
  std::vector<JobId> order() const {
    std::vector<JobId> out;
    for (auto i : st.order) out.push_back(snap.pending.at(i).id);
    return out;
  }
};

std::vector<Decision> of(const Plan& p, Action a) {
  std::vector<Decision> out;
  for (const auto& d : p.decisions)
    if (d.action == a) out.push_back(d);
  return out;
}

const char* kPlan = R"(
project chip
member chip alice bob g:hw
flow chip asic synthesis verification
alloc chip 2026-W48 2
)";

}  // namespace

TEST_CASE("priority: an allocated job goes 20 -> 120 -> 121 -> 122", "[priority]") {
  World w(1, kPlan);
  Job fresh;
  CHECK(next_priority(fresh, false, w.cfg) == 21);  // default 20, +1 for a normal cycle
  w.submit(1, "chip", "alice");
  CHECK(w.cfg.default_priority == 20);
  w.pass();
  CHECK(w.pending(1)->priority == 120);
  w.pass();
  CHECK(w.pending(1)->priority == 121);
  w.pass();
  CHECK(w.pending(1)->priority == 122);
  CHECK(w.pending(1)->cycles_pending == 3);
}

TEST_CASE("priority: normal job 22, requeued 32 -> 33, requeued again 43; requeue bound", "[priority][preempt]") {
  World w(1, kPlan);
  w.cfg.require_project_tag = false;  // an untagged job is a normal job here
  w.cfg.preempt_after = 0;  // preempts once pending more than 0 s: submitted 1 s ago
  w.submit(10, "", "carol");
  w.pass();
  CHECK(w.pending(10)->priority == 21);
  w.pass();
  CHECK(w.pending(10)->priority == 22);
  w.start(10);  // started at 22
  CHECK(w.running(10)->job.last_start_priority == 22);

  // An allocated job arrives; no free slot: the normal job is requeued.
  w.submit(20, "chip", "alice", w.snap.now - 1);
  Plan p = w.pass();
  auto rq = of(p, Action::Requeue);
  REQUIRE(rq.size() == 1);
  CHECK(rq[0].job == 10);
  CHECK(rq[0].reason.find("chip") != std::string::npos);
  CHECK(w.order().front() == 20);
  REQUIRE(w.pending(10));
  CHECK(w.pending(10)->priority == 32);  // 22 + 10
  w.start(20);
  w.pass();
  CHECK(w.pending(10)->priority == 33);  // one cycle pending
  w.finish(20);
  w.start(10);  // started at 33

  w.submit(21, "chip", "bob", w.snap.now - 1);
  p = w.pass();
  REQUIRE(of(p, Action::Requeue).size() == 1);
  CHECK(w.pending(10)->priority == 43);  // 33 + 10
  CHECK(w.pending(10)->requeues == 2);

  // The bound: a job requeued max_requeues times is not requeued again.
  w.cfg.max_requeues = 2;
  w.start(21);
  w.finish(21);
  w.start(10);
  w.submit(22, "chip", "alice", w.snap.now - 1);
  p = w.pass();
  CHECK(of(p, Action::Requeue).empty());
  CHECK(w.running(10));
}

TEST_CASE("ordering: allocated above normal, requeued above fresh normal, demoted last", "[order]") {
  World w(1, kPlan);
  w.cfg.require_project_tag = false;
  w.submit(1, "", "x");           // fresh normal, very old: high priority
  w.pending(1)->cycles_pending = 400;
  w.pending(1)->priority = 420;
  w.submit(2, "nosuch", "x");     // fails pre-qualification
  w.submit(3, "", "y");           // requeued normal, low priority
  w.pending(3)->requeues = 1;
  w.pending(3)->cycles_pending = 1;
  w.pending(3)->priority = 25;
  w.submit(4, "chip", "alice");   // allocated, fresh
  w.pass();
  CHECK(w.order() == std::vector<JobId>{4, 3, 1, 2});
  CHECK(w.pending(4)->priority == 120);
  CHECK(w.pending(1)->priority == 421);  // arithmetic unchanged, ranking by class
}

TEST_CASE("pre-qualification: each failure says why and demotes once", "[prequal]") {
  World w(1, kPlan);
  const Time now = w.snap.now;
  const auto& plan = w.cfg.plan;
  Job j;
  j.user = "alice";
  CHECK(prequalify(j, plan, now).code == Qualify::NoProjectTag);
  CHECK(prequalify(j, plan, now).reason == "job has no project tag");
  CHECK(prequalify(j, plan, now, false).ok());
  j.project = "nosuch";
  CHECK(prequalify(j, plan, now).code == Qualify::UnknownProject);
  CHECK(prequalify(j, plan, now).reason == "project 'nosuch' is not a valid project");
  j.project = "chip";
  j.user = "mallory";
  j.group = "staff";
  CHECK(prequalify(j, plan, now).code == Qualify::NotMember);
  CHECK(prequalify(j, plan, now).reason == "user 'mallory' (group 'staff') is not a member of project 'chip'");
  j.group = "hw";  // a member through the UNIX group
  CHECK(prequalify(j, plan, now).ok());
  j.user = "alice";
  j.group.clear();
  CHECK(prequalify(j, plan, now).ok());
  // Week boundary: the allocation is for 2026-W48 only.
  CHECK(prequalify(j, plan, week_start(IsoWeek{2026, 49}) - 1).ok());
  const Verdict v = prequalify(j, plan, week_start(IsoWeek{2026, 49}));
  CHECK(v.code == Qualify::NoAllocation);
  CHECK(v.reason == "project 'chip' has no job slots allocated for 2026-W49");

  // In the pass: a Demote decision with the reason, once.
  w.submit(5, "chip", "mallory");
  Plan p = w.pass();
  auto dm = of(p, Action::Demote);
  REQUIRE(dm.size() == 1);
  CHECK(dm[0].job == 5);
  CHECK(dm[0].queue == "lowest");
  CHECK(dm[0].reason.find("not a member of project 'chip'") != std::string::npos);
  CHECK(w.pending(5)->queue == "lowest");
  p = w.pass();
  CHECK(of(p, Action::Demote).empty());
}

TEST_CASE("preemption: one for one, never more than the allocation", "[preempt]") {
  World w(4, kPlan);  // 4 single-core nodes
  w.cfg.require_project_tag = false;
  for (JobId id = 1; id <= 4; ++id) {
    w.submit(id, "", "u" + std::to_string(id));
    w.snap.now += 10;  // started one after the other
    w.start(id, static_cast<int>(id - 1));
  }
  for (JobId id = 11; id <= 13; ++id) w.submit(id, "chip", "alice", w.snap.now - 1000);
  Plan p = w.pass();
  auto rq = of(p, Action::Requeue);
  REQUIRE(rq.size() == 2);  // allocation 2: 2 slots, not 3
  // The least valued: the most recently started.
  CHECK(rq[0].job == 4);
  CHECK(rq[1].job == 3);
  CHECK(w.st.freed == std::vector<JobId>{4, 3});
  const auto ord = w.order();
  REQUIRE(ord.size() >= 2);
  CHECK(std::set<JobId>{ord[0], ord[1]} == std::set<JobId>{11, 12});
  REQUIRE(ord.size() == 3);
  CHECK(ord[2] == 13);  // beyond the allocation: an ordinary job

  // With the allocation in use (two chip jobs running), nothing more.
  w.start(11, 3);
  w.start(12, 2);
  p = w.pass();
  CHECK(of(p, Action::Requeue).empty());
  CHECK(of(p, Action::Suspend).empty());
  // Raising the allocation at run time takes effect in the next pass.
  Allocation a;
  a.project = "chip";
  a.week = IsoWeek{2026, 48};
  a.slots = 3;
  REQUIRE_FALSE(set_allocation(w.cfg.plan, a, w.snap.now));
  p = w.pass();
  REQUIRE(of(p, Action::Requeue).size() == 1);
  CHECK(of(p, Action::Requeue)[0].job == 2);
}

TEST_CASE("preemption: waits for the threshold, not when a slot is free, suspend as asked", "[preempt]") {
  World w(2, kPlan);
  w.cfg.require_project_tag = false;
  w.cfg.preempt_after = 300;
  w.submit(1, "", "a");
  w.start(1, 0);
  w.submit(2, "", "b");
  w.pending(2)->preempt = PreemptMode::Suspend;
  w.start(2, 1);
  w.submit(10, "chip", "alice");
  w.snap.now += 299;
  Plan p = w.pass();
  CHECK(p.decisions.empty());
  CHECK(w.st.freed.empty());
  // Pending exactly the threshold is not "more than" it (pba-synopsys-patent.txt).
  w.snap.now += 1;
  p = w.pass();
  CHECK(p.decisions.empty());
  w.snap.now += 1;
  p = w.pass();
  REQUIRE(p.decisions.size() == 1);
  CHECK(p.decisions[0].action == Action::Suspend);  // job 2 asked to be suspended
  CHECK(p.decisions[0].job == 2);
  CHECK(w.st.freed == std::vector<JobId>{2});
  // A free slot: no preemption at all.
  w.finish(1);
  p = w.pass();
  CHECK(p.decisions.empty());
  CHECK(w.order().front() == 10);
}

namespace {
// Runs one chip job against a full cluster and returns the requeued job.
JobId victim_of(World& w) {
  w.submit(100, "chip", "alice", w.snap.now - 1000);
  Plan p = w.pass();
  auto rq = of(p, Action::Requeue);
  REQUIRE(rq.size() == 1);  // one for one
  return rq[0].job;
}
void run_at(World& w, JobId id, const std::string& project, Time start, int node) {
  const Time now = w.snap.now;
  w.snap.now = start;
  w.submit(id, project, "u");
  w.start(id, node);
  w.snap.now = now;
}
}  // namespace

TEST_CASE("preemption: victim value - start time, then over-subscription, then pending jobs", "[preempt]") {
  World w(4, kPlan);
  const Time t = w.snap.now;
  SECTION("recently started first") {
    run_at(w, 1, "X", t - 100, 0);   // X: 1 job (less over-subscribed) but newest
    run_at(w, 2, "Y", t - 5000, 1);
    run_at(w, 3, "Y", t - 5000, 2);
    run_at(w, 4, "Y", t - 5000, 3);
    CHECK(victim_of(w) == 1);
  }
  SECTION("same start: the more over-subscribed project") {
    run_at(w, 1, "X", t - 100, 0);
    run_at(w, 2, "Y", t - 100, 1);
    run_at(w, 3, "Y", t - 5000, 2);
    run_at(w, 4, "Y", t - 5000, 3);
    CHECK(victim_of(w) == 2);
  }
  SECTION("same start and over-subscription: the project with more pending jobs") {
    run_at(w, 1, "Y", t - 100, 0);
    run_at(w, 2, "X", t - 100, 1);
    run_at(w, 3, "X", t - 5000, 2);
    run_at(w, 4, "Y", t - 5000, 3);
    w.submit(50, "X", "u");
    w.submit(51, "X", "u");
    w.submit(52, "Y", "u");
    CHECK(victim_of(w) == 2);
  }
  SECTION("an allocated project's jobs within its allocation are never victims") {
    run_at(w, 1, "chip", t - 10, 0);   // newest, but a PBA job (allocation 2)
    run_at(w, 2, "Y", t - 5000, 1);
    run_at(w, 3, "Y", t - 6000, 2);
    run_at(w, 4, "Y", t - 7000, 3);
    w.snap.running[0].job.user = "alice";
    CHECK(victim_of(w) == 2);
  }
  SECTION("demoted jobs (lowest queue) go first") {
    run_at(w, 1, "Y", t - 10, 0);
    run_at(w, 2, "Y", t - 5000, 1);
    run_at(w, 3, "Y", t - 6000, 2);
    run_at(w, 4, "Y", t - 7000, 3);
    w.snap.running[3].job.queue = "lowest";
    CHECK(victim_of(w) == 4);
  }
}

TEST_CASE("allocation narrowed to a user, a group or a flow step", "[alloc]") {
  World w(1, R"(
project chip
member chip alice bob carol g:hw
flow chip asic synthesis verification
alloc chip 2026-W48 1 user=alice
alloc chip 2026-W48 1 group=hw
alloc chip 2026-W48 1 step=synthesis
)");
  auto prio_after_pass = [&](const std::string& user, const std::string& group, const std::string& step) {
    w.snap.pending.clear();
    w.submit(1, "chip", user);
    w.pending(1)->group = group;
    w.pending(1)->flow_step = step;
    w.pass();
    return w.pending(1)->priority;
  };
  CHECK(prio_after_pass("alice", "", "") == 120);
  CHECK(prio_after_pass("bob", "", "") == 21);              // member, not covered: normal
  CHECK(prio_after_pass("bob", "hw", "") == 120);
  CHECK(prio_after_pass("carol", "", "synthesis") == 120);
  CHECK(prio_after_pass("carol", "", "verification") == 21);
  Allocation a;
  a.project = "chip";
  a.user = "alice";
  a.step = "synthesis";
  Job j;
  j.project = "chip";
  j.user = "alice";
  j.flow_step = "synthesis";
  CHECK(covers(a, j));
  j.flow_step = "verification";
  CHECK_FALSE(covers(a, j));
  j.flow_step = "synthesis";
  j.user = "bob";
  CHECK_FALSE(covers(a, j));
}

TEST_CASE("narrowed allocations are counted separately; never more than each", "[alloc][preempt]") {
  World w(4, R"(
project chip
member chip alice bob
alloc chip 2026-W48 1 user=alice
)");
  w.cfg.require_project_tag = false;
  for (JobId id = 1; id <= 4; ++id) run_at(w, id, "", w.snap.now - 1000 * static_cast<Time>(id), static_cast<int>(id - 1));
  w.submit(10, "chip", "bob", w.snap.now - 1000);    // not covered
  w.submit(11, "chip", "alice", w.snap.now - 1000);
  w.submit(12, "chip", "alice", w.snap.now - 1000);
  Plan p = w.pass();
  auto rq = of(p, Action::Requeue);
  REQUIRE(rq.size() == 1);
  CHECK(rq[0].job == 1);  // the most recently started
  CHECK(w.order().front() == 11);
}

TEST_CASE("service levels: velocity preempts at once; throughput holds what the deadline needs", "[sla]") {
  SECTION("velocity") {
    World w(2, "project v\nmember v alice\nsla v velocity\nalloc v 2026-W48 2\n"
               "project p\nmember p alice\nalloc p 2026-W48 2\n");
    w.cfg.require_project_tag = false;
    run_at(w, 1, "", w.snap.now - 100, 0);
    run_at(w, 2, "", w.snap.now - 200, 1);
    w.submit(10, "p", "alice");  // just submitted, plain allocation: waits the threshold
    Plan p = w.pass();
    CHECK(p.decisions.empty());
    w.snap.pending.clear();
    w.submit(11, "v", "alice");  // velocity: as many in parallel as possible, now
    w.submit(12, "v", "alice");
    p = w.pass();
    CHECK(of(p, Action::Requeue).size() == 2);
  }
  SECTION("throughput") {
    auto run = [](Time left) {
      World w(10, "project t\nmember t alice\nalloc t 2026-W48 10\n");
      w.cfg.plan.projects[0].sla = Sla{SlaKind::Throughput, 10, w.snap.now + left};
      w.cfg.require_project_tag = false;
      for (JobId id = 1; id <= 10; ++id) run_at(w, id, "", w.snap.now - 100 * static_cast<Time>(id), static_cast<int>(id - 1));
      for (JobId id = 20; id < 30; ++id) {
        w.submit(id, "t", "alice", w.snap.now - 1000);
        w.pending(id)->estimate = 3600;
      }
      Plan p = w.pass();
      return of(p, Action::Requeue).size();
    };
    CHECK(run(10 * 3600) == 1);   // 10 one-hour jobs in 10 hours: one slot suffices
    CHECK(run(5 * 3600) == 2);
    CHECK(run(3600) == 10);       // the deadline is near: the whole allocation
    CHECK(run(-10) == 10);        // late: the whole allocation, never more
  }
  SECTION("throughput target met: no PBA slots") {
    World w(1, "project t\nmember t alice\nalloc t 2026-W48 4\n");
    w.cfg.plan.projects[0].sla = Sla{SlaKind::Throughput, 3, w.snap.now + 3600};
    w.cfg.jobs_done["t"] = 3;
    w.cfg.require_project_tag = false;
    run_at(w, 1, "", w.snap.now - 100, 0);
    w.submit(10, "t", "alice", w.snap.now - 1000);
    CHECK(w.pass().decisions.empty());
  }
}

TEST_CASE("pba_stage: disabled does nothing; order keeps exactly the jobs it had", "[order]") {
  World w(1, kPlan);
  w.cfg.enabled = false;
  w.submit(1, "chip", "alice");
  Plan p = w.pass();
  CHECK(p.decisions.empty());
  CHECK(p.updates.empty());
  w.cfg.enabled = true;
  w.submit(2, "", "x");
  w.submit(3, "nosuch", "bob");
  PassState st;
  st.order = {2, 0};  // job 3 (index 1) is left out by the base order
  Plan p2;
  pba_stage(w.snap, w.cfg, st, p2);
  CHECK(st.order == std::vector<std::uint32_t>{0, 2});
}

TEST_CASE("resume: a suspended victim resumes when its cores are free and no allocated job waits", "[resume]") {
  World w(2, kPlan);
  w.cfg.require_project_tag = false;
  run_at(w, 1, "", w.snap.now - 100, 0);
  run_at(w, 2, "", w.snap.now - 50, 1);
  w.running(2)->suspended = true;  // suspended earlier by PBA; node 1 is idle now
  w.running(2)->placement[0].cores = {0};
  SECTION("an allocated job waits: it gets the free core, no resume") {
    w.submit(10, "chip", "alice");
    Plan p = w.pass();
    CHECK(of(p, Action::Resume).empty());
  }
  SECTION("nothing waits: resume on its own node") {
    Plan p = w.pass();
    auto rs = of(p, Action::Resume);
    REQUIRE(rs.size() == 1);
    CHECK(rs[0].job == 2);
    CHECK(rs[0].placement.at(0).node == 1);
  }
  SECTION("its node is busy: no resume") {
    run_at(w, 3, "", w.snap.now - 10, 1);
    CHECK(of(w.pass(), Action::Resume).empty());
  }
  SECTION("switched off") {
    w.cfg.resume_suspended = false;
    CHECK(of(w.pass(), Action::Resume).empty());
  }
}

TEST_CASE("preemption: a 2-slot allocated job frees 2 slots, or none when it cannot", "[preempt]") {
  World w(3, "project chip\nmember chip alice\nalloc chip 2026-W48 2\n");
  w.cfg.require_project_tag = false;
  run_at(w, 1, "", w.snap.now - 300, 0);
  run_at(w, 2, "", w.snap.now - 200, 1);
  run_at(w, 3, "chip", w.snap.now - 100, 2);  // within chip's allocation: protected
  w.running(3)->job.user = "alice";
  w.submit(10, "chip", "alice", w.snap.now - 1000);
  w.pending(10)->slots_min = w.pending(10)->slots_max = 2;
  SECTION("allocation 2, one slot already used: the 2-slot job does not fit in it") {
    CHECK(w.pass().decisions.empty());
  }
  SECTION("allocation 3: two victims for two slots") {
    Allocation a;
    a.project = "chip";
    a.week = IsoWeek{2026, 48};
    a.slots = 3;
    REQUIRE_FALSE(set_allocation(w.cfg.plan, a, w.snap.now));
    Plan p = w.pass();
    auto rq = of(p, Action::Requeue);
    REQUIRE(rq.size() == 2);
    CHECK(std::set<JobId>{rq[0].job, rq[1].job} == std::set<JobId>{1, 2});
  }
  SECTION("allocation 3 but only one normal job to take: nothing is preempted") {
    Allocation a;
    a.project = "chip";
    a.week = IsoWeek{2026, 48};
    a.slots = 3;
    REQUIRE_FALSE(set_allocation(w.cfg.plan, a, w.snap.now));
    w.running(1)->job.pba_preemptions = w.cfg.max_requeues;  // may not be requeued again
    CHECK(w.pass().decisions.empty());
  }
}

TEST_CASE("report: allocation, use and over-subscription per project", "[report]") {
  World w(4, kPlan);
  run_at(w, 1, "chip", w.snap.now - 100, 0);
  run_at(w, 2, "", w.snap.now - 100, 1);
  run_at(w, 3, "", w.snap.now - 100, 2);
  run_at(w, 4, "web", w.snap.now - 100, 3);
  w.running(4)->suspended = true;
  w.submit(10, "chip", "alice");
  w.submit(11, "chip", "bob");
  const auto rows = project_status(w.snap, w.cfg.plan);
  REQUIRE(rows.size() == 3);
  CHECK(rows[0].project == "chip");
  CHECK(rows[0].allocated == 2);
  CHECK(rows[0].running == 1);
  CHECK(rows[0].pending == 2);
  CHECK(rows[0].oversubscribed() == -1);  // under-subscribed by one
  CHECK(rows[1].project.empty());
  CHECK(rows[1].oversubscribed() == 2);   // no allocation: every job is over
  CHECK(rows[2].project == "web");
  CHECK(rows[2].suspended == 1);
  CHECK(rows[2].running == 0);
  const std::string t = format_status(rows, w.snap.now);
  CHECK(t.find("PBA 2026-W48") == 0);
  CHECK(t.find("(no project)") != std::string::npos);
  CHECK(t.find("      -1") != std::string::npos);
}

TEST_CASE("preemption: a non-member's job tagged with the project holds no allocated slot", "[preempt]") {
  World w(1, kPlan);
  run_at(w, 1, "chip", w.snap.now - 100, 0);
  w.running(1)->job.user = "mallory";  // not a member of chip
  w.submit(10, "chip", "alice", w.snap.now - 1000);
  Plan p = w.pass();
  REQUIRE(of(p, Action::Requeue).size() == 1);
  CHECK(of(p, Action::Requeue)[0].job == 1);
}

TEST_CASE("service levels: a throughput project behind its deadline is ordered first", "[sla]") {
  World w(1, "project t\nmember t alice\nalloc t 2026-W48 1\n"
             "project p\nmember p alice\nalloc p 2026-W48 1\n");
  w.submit(1, "p", "alice");
  w.pending(1)->cycles_pending = 20;  // pending longer: 140 after this pass
  w.pending(1)->priority = 139;
  w.submit(2, "t", "alice");
  w.pending(2)->estimate = 3600;
  SECTION("deadline far: plain priority order") {
    w.cfg.plan.projects[0].sla = Sla{SlaKind::Throughput, 1, w.snap.now + 100 * 3600};
    w.pass();
    CHECK(w.order() == std::vector<JobId>{1, 2});
  }
  SECTION("deadline near: the SLA job first") {
    w.cfg.plan.projects[0].sla = Sla{SlaKind::Throughput, 1, w.snap.now + 1800};
    w.pass();
    CHECK(w.order() == std::vector<JobId>{2, 1});
    CHECK(w.pending(2)->priority == 120);  // the boost orders; it is not stored
  }
}

TEST_CASE("requeue bound: only PBA's own requeues count, not its suspensions", "[preempt][bound]") {
  World w(1, kPlan);
  w.cfg.require_project_tag = false;
  run_at(w, 1, "", w.snap.now - 100, 0);
  w.submit(10, "chip", "alice", w.snap.now - 1000);
  SECTION("checkpointed and requeued by other stages many times: still a victim") {
    w.running(1)->job.requeues = 5;  // e.g. checkpoint backfilling, selective preemption
    Plan p = w.pass();
    auto rq = of(p, Action::Requeue);
    REQUIRE(rq.size() == 1);
    CHECK(rq[0].pba_preemption);
    CHECK(w.pending(1)->pba_preemptions == 1);  // the caller counted it (contract)
    CHECK(w.pending(1)->requeues == 6);
  }
  SECTION("preempted max_requeues times by PBA: not again") {
    w.running(1)->job.pba_preemptions = w.cfg.max_requeues;
    CHECK(w.pass().decisions.empty());
  }
  SECTION("a job that chose suspend: its suspensions do not count, the bound is not its") {
    w.running(1)->job.preempt = PreemptMode::Suspend;
    w.running(1)->job.pba_preemptions = w.cfg.max_requeues;  // e.g. from before, as requeues
    auto su = of(w.pass(), Action::Suspend);
    REQUIRE(su.size() == 1);
    CHECK(su[0].pba_preemption);
    CHECK(w.running(1)->job.pba_preemptions == w.cfg.max_requeues);  // not counted
  }
}

TEST_CASE("preemption: a job being checkpointed is no victim", "[preempt]") {
  World w(2, kPlan);
  w.cfg.require_project_tag = false;
  run_at(w, 1, "", w.snap.now - 5000, 0);
  run_at(w, 2, "", w.snap.now - 10, 1);  // newest: the least valued
  SECTION("running: the newest goes") { CHECK(victim_of(w) == 2); }
  SECTION("stopping already (its slots free when its checkpoint is written): the other one") {
    w.running(2)->stopping = true;
    CHECK(victim_of(w) == 1);
  }
}
