// NCI policy rules (nci-pbs-policy.txt): limits, shuffling, suspension, resume.
#include <catch2/catch.hpp>

#include <set>

#include "coordinator/nci/nci.hpp"
#include "helpers.hpp"

using namespace corral;
using namespace nci_test;

namespace {
std::vector<Queue> table() {
  std::vector<Queue> q = nci_default_queues();
  for (Queue& x : q)
    if (x.name == "normal") {
      x.max_cpus = 32;
      x.max_walltime = 48 * 3600;
      x.max_mem_mb = 64000;
      x.max_jobfs_mb = 100000;
    }
  return q;
}
std::set<int> cores_of(const Decision& d) {
  std::set<int> s;
  for (const Placement& p : d.placement) s.insert(p.cores.begin(), p.cores.end());
  return s;
}
}  // namespace

TEST_CASE("mandatory requests and queue bounds give exact errors", "[nci][limits]") {
  const auto q = table();
  Job ok = job(1, 4, 3600);
  CHECK(validate_request(ok, q).ok);
  CHECK(validate_request(ok, q).reason.empty());

  Job j = ok;
  j.walltime = 0;
  CHECK(validate_request(j, q).reason == "walltime missing");
  j = ok;
  j.slots_min = j.slots_max = 0;
  CHECK(validate_request(j, q).reason == "ncpus missing");
  j = ok;
  j.mem_mb = 0;
  CHECK(validate_request(j, q).reason == "vmem missing");
  j = ok;
  j.jobfs_mb = 0;
  CHECK(validate_request(j, q).reason == "jobfs missing");
  j = ok;
  j.slots_min = j.slots_max = 64;
  CHECK_FALSE(validate_request(j, q).ok);
  CHECK(validate_request(j, q).reason == "ncpus 64 above queue normal's bound of 32");
  j = ok;
  j.walltime = 49 * 3600;
  CHECK(validate_request(j, q).reason == "walltime 176400s above queue normal's bound of 172800s");
  j = ok;
  j.mem_mb = 70000;
  CHECK(validate_request(j, q).reason == "vmem 70000MB above queue normal's bound of 64000MB");
  j = ok;
  j.jobfs_mb = 200000;
  CHECK(validate_request(j, q).reason == "jobfs 200000MB above queue normal's bound of 100000MB");
  j = ok;
  j.queue = "nosuch";
  CHECK(validate_request(j, q).reason == "unknown queue nosuch");
  j = ok;
  j.queue = "";  // default queue is normal: its bounds apply
  j.slots_min = j.slots_max = 33;
  CHECK(validate_request(j, q).reason == "ncpus 33 above queue normal's bound of 32");
  // Express defaults: 64 cpus max.
  j = job(2, 65, 3600, "express");
  CHECK(validate_request(j, q).reason == "ncpus 65 above queue express's bound of 64");

  // Turning off a mandatory resource (site without jobfs).
  NciConfig c;
  c.require_jobfs = false;
  j = ok;
  j.jobfs_mb = 0;
  CHECK(validate_request(j, q, c).ok);
}

TEST_CASE("the pass rejects bad requests with the reason and starts the good ones", "[nci][limits]") {
  Snapshot s;
  s.now = 1000;
  s.nodes = {node("n0", 8)};
  s.queues = table();
  s.pending = {job(1, 64, 3600), job(2, 2, 0), job(3, 2, 3600), job(4, 8, 3600, "express")};
  s.pending[3].slots_min = s.pending[3].slots_max = 16;  // fits the queue, not the cluster
  PassState st;
  Plan p = run_stage(s, cfg_on(), &st);
  REQUIRE(find(p, Action::Reject, 1));
  CHECK(find(p, Action::Reject, 1)->reason == "ncpus 64 above queue normal's bound of 32");
  REQUIRE(find(p, Action::Reject, 2));
  CHECK(find(p, Action::Reject, 2)->reason == "walltime missing");
  REQUIRE(find(p, Action::Reject, 4));
  CHECK(find(p, Action::Reject, 4)->reason == "ncpus 16 above the cluster's 8 cpus");
  CHECK(ids(p, Action::Start) == std::vector<JobId>{3});
  // NCI hands the planner only the valid job; the planner starts it.
  CHECK(st.order == std::vector<std::uint32_t>{2});
}

TEST_CASE("a project with no grant left is demoted to bonus with a reason", "[nci][grant]") {
  Snapshot s;
  s.now = 0;
  s.nodes = {node("n0", 8)};
  s.pending = {job(1, 2, 3600, "normal", "alice", "broke"), job(2, 2, 3600, "express", "bob", "rich"),
               job(3, 2, 3600, "bonus", "carol", "broke")};
  NciConfig c = cfg_on();
  c.grant_left = {{"broke", 0.0}, {"rich", 500.0}};
  Plan p = run_stage(s, c);
  const Decision* d = find(p, Action::Demote, 1);
  REQUIRE(d);
  CHECK(d->queue == "bonus");
  CHECK(d->reason == "project broke has no grant left (0.00 SU): runs in bonus on idle cpus");
  CHECK_FALSE(find(p, Action::Demote, 2));
  CHECK_FALSE(find(p, Action::Demote, 3));  // already in bonus
  // Demoted jobs still run on idle cpus.
  CHECK(find(p, Action::Start, 1));
}

TEST_CASE("equal-access shuffle: worked example", "[nci][shuffle]") {
  // Queue normal. Running: alice/P 8 cpus. Queued in FIFO order:
  //   j1 alice/P 4, j2 alice/P 4, j3 bob/Q 2, j4 carol/P 1, j5 bob/Q 2
  // score = cpus of every job ahead from the same user or project:
  //   j1: 8 (running alice/P)       j2: 8 + 4 = 12
  //   j3: 0                         j4: project P: 8 + 4 + 4 = 16
  //   j5: bob: 2
  // Shuffled: j3 (0), j5 (2), j1 (8), j2 (12), j4 (16).
  const Job r = job(100, 8, 7200, "normal", "alice", "P");
  const RunningJob rj = running(r, 0, 0, 0);
  std::vector<Job> q = {job(1, 4, 3600, "normal", "alice", "P"), job(2, 4, 3600, "normal", "alice", "P"),
                        job(3, 2, 3600, "normal", "bob", "Q"), job(4, 1, 3600, "normal", "carol", "P"),
                        job(5, 2, 3600, "normal", "bob", "Q")};
  std::vector<const Job*> qp;
  for (const Job& j : q) qp.push_back(&j);
  const auto sc = equal_access_scores(qp, {&rj});
  CHECK(sc == std::vector<double>{8, 12, 0, 16, 2});

  // In a pass with 8 idle cores the shuffled order decides who starts:
  // j3 (2) + j5 (2) + j1 (4) fill them; j2 and j4 wait.
  Snapshot s;
  s.now = 10;
  s.nodes = {node("n0", 8), node("n1", 8)};
  s.running = {rj};
  s.pending = q;
  Plan p = run_stage(s, cfg_on());
  CHECK(ids(p, Action::Start) == std::vector<JobId>{3, 5, 1});
  // Every job left pending was bypassed: its start window advances.
  std::set<JobId> upd;
  for (const JobUpdate& u : p.updates) {
    CHECK(u.cycles_pending == 1);
    upd.insert(u.job);
  }
  CHECK(upd == std::set<JobId>{2, 4});
}

TEST_CASE("shuffle counts a job of the same user and project once", "[nci][shuffle]") {
  Job a = job(1, 4, 60, "normal", "u", "p");
  Job b = job(2, 2, 60, "normal", "u", "p");
  Job c = job(3, 1, 60, "normal", "v", "p");
  const auto sc = equal_access_scores({&a, &b, &c}, {});
  CHECK(sc == std::vector<double>{0, 4, 6});
}

TEST_CASE("queues go in priority order: express before normal before bonus", "[nci][shuffle]") {
  Snapshot s;
  s.now = 0;
  s.nodes = {node("n0", 4)};
  s.pending = {job(1, 4, 3600, "bonus"), job(2, 4, 3600, "normal"), job(3, 4, 3600, "express")};
  Plan p = run_stage(s, cfg_on());
  CHECK(ids(p, Action::Start) == std::vector<JobId>{3});
}

TEST_CASE("priority-run suspends a lower-queue job and lands on its cores", "[nci][suspend]") {
  Snapshot s;
  s.now = 5000;
  s.nodes = {node("n0", 8, 16000), node("n1", 4, 16000)};
  s.running = {running(job(1, 8, 36000, "normal", "a", "pa", 4000), 0, 0, 1000),
               running(job(2, 4, 36000, "express", "b", "pb", 4000), 1, 0, 1000)};
  s.pending = {job(10, 4, 3600, "express", "c", "pc", 4000)};
  PassState st;
  Plan p = run_stage(s, cfg_on(), &st);
  CHECK(ids(p, Action::Suspend) == std::vector<JobId>{1});  // never the express job 2
  const Decision* d = find(p, Action::Start, 10);
  REQUIRE(d);
  // Decided by NCI, so first in the planner's order, which starts it.
  CHECK(st.order.front() == 0);
  CHECK(st.pinned == 1);
  REQUIRE(d->placement.size() == 1);
  CHECK(d->placement[0].node == 0);
  const std::set<int> cs = cores_of(*d);
  CHECK(cs.size() == 4);
  for (int c : cs) CHECK((c >= 0 && c < 8));
  CHECK(st.freed == std::vector<JobId>{1});
  CHECK(find(p, Action::Suspend, 1)->reason.find("priority-run") != std::string::npos);

  // Same-queue job, no idle cpus, small: no priority-run, no parallel-run.
  s.pending = {job(11, 4, 3600, "normal", "c", "pc", 4000)};
  Plan q = run_stage(s, cfg_on());
  CHECK(ids(q, Action::Start).empty());
  CHECK(ids(q, Action::Suspend).empty());
}

TEST_CASE("priority-run prefers victims whose XFactor stays below 1.25", "[nci][suspend][xfactor]") {
  Snapshot s;
  s.now = 100000;
  s.nodes = {node("n0", 8)};
  // Victim 1: fresh but already suspended 3 h of its 10 h: XF = (10+3+1)/10 = 1.4.
  RunningJob v1 = running(job(1, 4, 36000, "normal", "a", "pa"), 0, 0, s.now - 3600 - 10800);
  v1.suspended_for = 10800;
  // Victim 2: 80% done (a worse score) but XF = (10+1)/10 = 1.1.
  RunningJob v2 = running(job(2, 4, 36000, "normal", "b", "pb"), 0, 4, s.now - 28800);
  s.running = {v1, v2};
  s.pending = {job(10, 4, 3600, "express", "c", "pc")};
  NciConfig c = cfg_on();
  CHECK(expansion_factor(v1, 3600) == Approx(1.4));
  CHECK(expansion_factor(v2, 3600) == Approx(1.1));
  Plan p = run_stage(s, c);
  CHECK(ids(p, Action::Suspend) == std::vector<JobId>{2});
  REQUIRE(find(p, Action::Start, 10));
  CHECK(cores_of(*find(p, Action::Start, 10)) == std::set<int>{4, 5, 6, 7});
}

TEST_CASE("parallel-run picks victims by suspension score and keeps XFactor < 1.25", "[nci][suspend][xfactor]") {
  Snapshot s;
  s.now = 100000;
  s.nodes = {node("n0", 16)};
  const Time h = 3600;
  // Four 4-cpu normal jobs of 10 h walltime.
  RunningJob v1 = running(job(1, 4, 10 * h, "normal", "a", "pa"), 0, 0, s.now - 9 * h);   // 90% done
  RunningJob v2 = running(job(2, 4, 10 * h, "normal", "b", "pb"), 0, 4, s.now - 3 * h);   // XF 1.3
  v2.suspended_for = 2 * h;
  RunningJob v3 = running(job(3, 4, 10 * h, "normal", "c", "pc"), 0, 8, s.now - 1 * h);   // 10% done
  RunningJob v4 = running(job(4, 4, 10 * h, "normal", "d", "pd"), 0, 12, s.now - 2 * h);  // 20% done
  s.running = {v1, v2, v3, v4};
  s.pending = {job(10, 8, h, "normal", "e", "pe")};
  s.pending[0].submit = s.now;
  NciConfig c = cfg_on();
  c.parallel_min_cpus = 8;

  const double sc1 = suspension_score(s.pending[0], v1, s.now, 0, 1, c);
  const double sc3 = suspension_score(s.pending[0], v3, s.now, 0, 1, c);
  const double sc4 = suspension_score(s.pending[0], v4, s.now, 0, 1, c);
  CHECK(sc3 > sc4);
  CHECK(sc4 > sc1);  // near completion: least favoured
  CHECK(expansion_factor(v2, h) > c.xfactor_limit);

  PassState st;
  Plan p = run_stage(s, c, &st);
  auto sus = ids(p, Action::Suspend);
  std::sort(sus.begin(), sus.end());
  CHECK(sus == std::vector<JobId>{3, 4});
  const Decision* d = find(p, Action::Start, 10);
  REQUIRE(d);
  CHECK(find(p, Action::Suspend, 3)->reason.find("parallel-run") != std::string::npos);
  CHECK(cores_of(*d) == std::set<int>{8, 9, 10, 11, 12, 13, 14, 15});
  for (JobId v : sus) {
    const RunningJob& r = s.running[v - 1];
    CHECK(expansion_factor(r, h) < 1.25);
  }

  // A job no larger than its victims cannot parallel-run.
  s.pending = {job(11, 4, h, "normal", "e", "pe")};
  c.parallel_min_cpus = 4;
  CHECK(ids(run_stage(s, c), Action::Suspend).empty());
  CHECK(ids(run_stage(s, c), Action::Start).empty());
  // Below the parallel-run size: no parallel-run either.
  s.pending = {job(12, 8, h, "normal", "e", "pe")};
  c.parallel_min_cpus = 16;
  CHECK(ids(run_stage(s, c), Action::Suspend).empty());
  CHECK(ids(run_stage(s, c), Action::Start).empty());
}

TEST_CASE("suspended jobs keep their memory: a start that would overcommit is refused", "[nci][memory]") {
  Snapshot s;
  s.now = 1000;
  s.nodes = {node("n0", 8, 16000)};
  s.running = {running(job(1, 8, 36000, "normal", "a", "pa", 12000), 0, 0, 0)};
  // 12000 held by the would-be victim + 8000 > 16000: refused, nothing suspended.
  s.pending = {job(10, 4, 3600, "express", "b", "pb", 8000)};
  Plan p = run_stage(s, cfg_on());
  CHECK(ids(p, Action::Suspend).empty());
  CHECK(ids(p, Action::Start).empty());
  // 12000 + 4000 fits: the victim is suspended, memory of both held.
  s.pending = {job(11, 4, 3600, "express", "b", "pb", 4000)};
  p = run_stage(s, cfg_on());
  CHECK(ids(p, Action::Suspend) == std::vector<JobId>{1});
  CHECK(ids(p, Action::Start) == std::vector<JobId>{11});

  // Idle cores next to a suspended job: its memory still counts.
  Snapshot t;
  t.now = 1000;
  t.nodes = {node("n0", 16, 16000)};
  RunningJob sus = running(job(2, 8, 36000, "normal", "a", "pa", 10000), 0, 0, 0);
  sus.suspended = true;
  t.running = {running(job(3, 8, 3600, "express", "c", "pc", 4000), 0, 0, 500), sus};
  t.pending = {job(12, 8, 3600, "normal", "d", "pd", 4000)};  // 4000+10000+4000 > 16000
  p = run_stage(t, cfg_on());
  CHECK(ids(p, Action::Start).empty());
  CHECK(ids(p, Action::Resume).empty());  // its cores are busy
  t.pending = {job(13, 8, 3600, "normal", "d", "pd", 2000)};  // 16000: fits exactly
  p = run_stage(t, cfg_on());
  REQUIRE(find(p, Action::Start, 13));
  CHECK(cores_of(*find(p, Action::Start, 13)) == std::set<int>{8, 9, 10, 11, 12, 13, 14, 15});
}

TEST_CASE("jobfs is held like memory", "[nci][memory]") {
  Snapshot s;
  s.now = 0;
  s.nodes = {node("n0", 8, 0, 1000)};
  s.running = {running(job(1, 4, 3600, "normal", "a", "pa", 100, 800), 0, 0, 0)};
  s.pending = {job(10, 4, 3600, "normal", "b", "pb", 100, 300)};
  CHECK(ids(run_stage(s, cfg_on()), Action::Start).empty());
  s.pending = {job(11, 4, 3600, "normal", "b", "pb", 100, 200)};
  CHECK(ids(run_stage(s, cfg_on()), Action::Start) == std::vector<JobId>{11});
}

TEST_CASE("a suspended job resumes when its suspender ends, before new starts", "[nci][resume]") {
  Snapshot s;
  s.now = 1000;
  s.nodes = {node("n0", 8, 16000)};
  RunningJob victim = running(job(1, 8, 36000, "normal", "a", "pa", 4000), 0, 0, 0);
  s.running = {victim};
  s.pending = {job(10, 8, 600, "express", "b", "pb", 4000)};
  PassState st;
  Plan p1 = run_stage(s, cfg_on(), &st);
  REQUIRE(ids(p1, Action::Suspend) == std::vector<JobId>{1});
  const Decision start = *find(p1, Action::Start, 10);

  // Apply: victim suspended, suspender running.
  Snapshot s2 = s;
  s2.now = 1300;
  s2.pending = {job(11, 8, 600, "normal", "c", "pc", 4000)};
  s2.running[0].suspended = true;
  s2.running[0].suspended_for = 300;
  RunningJob e;
  e.job = s.pending[0];
  e.start = 1000;
  e.expected_end = 1600;
  e.slots = start.slots;
  e.placement = start.placement;
  s2.running.push_back(e);
  Plan p2 = run_stage(s2, cfg_on());
  CHECK(ids(p2, Action::Resume).empty());  // suspender still running
  CHECK(ids(p2, Action::Start).empty());

  // Suspender ended: resume first; the queued normal job must wait.
  Snapshot s3 = s2;
  s3.now = 1600;
  s3.running.pop_back();
  s3.running[0].suspended_for = 600;
  Plan p3 = run_stage(s3, cfg_on());
  CHECK(ids(p3, Action::Resume) == std::vector<JobId>{1});
  CHECK(ids(p3, Action::Start).empty());
  // Suspended time does not count against walltime.
  CHECK(walltime_deadline(s3.running[0]) == 0 + 36000 + 600);
}

TEST_CASE("jobs freed by an earlier stage count as freed", "[nci][pipeline]") {
  Snapshot s;
  s.now = 100;
  s.nodes = {node("n0", 4, 8000)};
  s.running = {running(job(1, 4, 3600, "normal", "a", "pa", 6000), 0, 0, 0)};
  s.pending = {job(10, 4, 3600, "normal", "b", "pb", 1000)};
  PassState st = fifo(s);
  st.freed = {1};
  Plan plan;
  plan.decisions.push_back({Action::Suspend, 1, 100, 4, {}, "", "pba"});
  nci_stage(s, cfg_on(), 1, st, plan);
  plan_rest(s, cfg_on(), st, plan);
  CHECK(ids(plan, Action::Start) == std::vector<JobId>{10});
  CHECK(ids(plan, Action::Resume).empty());  // not resumed in the pass that suspended it
  // Memory of a suspended-by-PBA job stays held: 6000 + 3000 > 8000.
  s.pending = {job(11, 4, 3600, "normal", "b", "pb", 3000)};
  st = fifo(s);
  st.freed = {1};
  Plan plan2;
  plan2.decisions.push_back({Action::Suspend, 1, 100, 4, {}, "", "pba"});
  nci_stage(s, cfg_on(), 1, st, plan2);
  plan_rest(s, cfg_on(), st, plan2);
  CHECK(ids(plan2, Action::Start).empty());
  // A requeued one releases its memory too.
  st = fifo(s);
  st.freed = {1};
  Plan plan3;
  plan3.decisions.push_back({Action::Requeue, 1, 100, 4, {}, "", "pba"});
  nci_stage(s, cfg_on(), 1, st, plan3);
  plan_rest(s, cfg_on(), st, plan3);
  CHECK(ids(plan3, Action::Start) == std::vector<JobId>{11});
}

TEST_CASE("odd snapshots do not crash the cycle", "[nci][robust]") {
  Snapshot s;
  s.now = 100;
  s.nodes = {node("n0", 4, 1000), node("down", 8, 1000), node("empty", 0)};
  s.nodes[1].up = false;
  RunningJob bad = running(job(1, 2, 600, "normal", "a", "pa", 100), 7, 0, 0);  // no such node
  RunningJob odd = running(job(2, 2, 600, "weird", "b", "pb", 100), 0, 9, 0);   // cores out of range
  RunningJob zero = running(job(3, 1, 0, "normal", "c", "pc", 0), 0, 0, 0);     // walltime 0
  zero.slots = 0;
  zero.suspended = true;
  s.running = {bad, odd, zero};
  s.pending = {job(10, 4, 600, "express", "d", "pd", 100), job(11, 2, 600, "normal", "e", "pe", 100)};
  s.pending[1].slots_max = 1;  // empty range
  Plan p = run_stage(s, cfg_on());
  REQUIRE(find(p, Action::Reject, 11));
  CHECK(find(p, Action::Reject, 11)->reason == "ncpus range 2-1 is empty");
  // Same input, same plan (repeatable).
  Plan q = run_stage(s, cfg_on());
  REQUIRE(p.decisions.size() == q.decisions.size());
  for (std::size_t i = 0; i < p.decisions.size(); ++i) {
    CHECK(p.decisions[i].job == q.decisions[i].job);
    CHECK(p.decisions[i].action == q.decisions[i].action);
  }
  // Never placed on the down node or beyond a node's cores.
  for (const Decision& d : p.decisions)
    if (d.action == Action::Start)
      for (const Placement& pl : d.placement) {
        CHECK(pl.node == 0);
        for (int c : pl.cores) CHECK((c >= 0 && c < 4));
      }
}

TEST_CASE("suspension score: owners' running jobs matter only when far apart", "[nci][score]") {
  NciConfig c = cfg_on();
  const Job s = job(10, 8, 3600, "normal", "x", "px");
  const RunningJob v = running(job(1, 4, 36000, "normal", "y", "py"), 0, 0, 0);
  const double base = suspension_score(s, v, 3600, 1, 1, c);
  // 1 vs 2 running jobs: inside the dead zone, no effect.
  CHECK(suspension_score(s, v, 3600, 1, 2, c) == Approx(base));
  CHECK(suspension_score(s, v, 3600, 2, 1, c) == Approx(base));
  // Victim's owner has 31 jobs running (e.g. after a weekend): a target.
  CHECK(suspension_score(s, v, 3600, 1, 31, c) > base + 2.5);
  // The suspender's owner is the one with many: suspension disfavoured.
  CHECK(suspension_score(s, v, 3600, 31, 1, c) < base - 2.5);
  // Larger victims are less favoured; a suspender that waited is more entitled.
  const RunningJob big = running(job(2, 8, 36000, "normal", "y", "py"), 0, 0, 0);
  CHECK(suspension_score(s, big, 3600, 1, 1, c) < base);
  Job waited = s;
  waited.submit = -7200;  // pending 3 h instead of 1 h for a 1 h job: XF 4 instead of 2
  CHECK(suspension_score(waited, v, 3600, 1, 1, c) == Approx(base + 2.0 * c.weights.wait));
}

TEST_CASE("a bypassed job climbs its queue and then must start", "[nci][window]") {
  Snapshot s;
  s.now = 0;
  s.nodes = {node("n0", 4)};
  s.running = {running(job(100, 4, 3600, "normal", "a", "pa"), 0, 0, 0)};
  // Job 1 is behind three of the user's own jobs (score 4+1+1+1 = 7), job 2
  // is another user's: score 0. Ageing lowers job 1's key by 2 cpus a cycle.
  s.pending = {job(5, 1, 600, "normal", "a", "pa"), job(6, 1, 600, "normal", "a", "pa"),
               job(7, 1, 600, "normal", "a", "pa"), job(1, 1, 600, "normal", "a", "pa"),
               job(2, 1, 600, "normal", "b", "pb")};
  s.running.clear();  // 4 idle cpus: the first 4 of the shuffled order start
  NciConfig c = cfg_on();
  std::vector<JobId> st = ids(run_stage(s, c), Action::Start);
  CHECK(std::find(st.begin(), st.end(), 1) == st.end());  // bypassed
  s.pending[3].cycles_pending = 3;  // key 3 - 6 = -3: now first
  st = ids(run_stage(s, c), Action::Start);
  REQUIRE_FALSE(st.empty());
  CHECK(st[0] == 1);

  // Window reached: it may suspend even a higher-queue job.
  Snapshot t;
  t.now = 10000;
  t.nodes = {node("n0", 4)};
  t.running = {running(job(50, 4, 3600, "express", "e", "pe"), 0, 0, 9000)};
  t.pending = {job(3, 4, 600, "bonus", "f", "pf")};
  t.pending[0].cycles_pending = c.window_cycles - 1;
  CHECK(ids(run_stage(t, c), Action::Suspend).empty());
  CHECK(ids(run_stage(t, c), Action::Start).empty());
  t.pending[0].cycles_pending = c.window_cycles;
  Plan p = run_stage(t, c);
  CHECK(ids(p, Action::Suspend) == std::vector<JobId>{50});
  REQUIRE(find(p, Action::Start, 3));
  CHECK(find(p, Action::Suspend, 50)->reason.find("start window") != std::string::npos);
}

TEST_CASE("a start is reversed for a larger job further down the queue", "[nci][reverse]") {
  // "Even if the scheduler decides to start a job in a given scheduling
  // cycle, that decision may be reversed later in that cycle after
  // consideration of (larger) jobs further down the queue."
  Snapshot s;
  s.now = 100;
  s.nodes = {node("n0", 8)};
  s.pending = {job(1, 4, 3600, "normal", "a", "pa"), job(2, 8, 3600, "normal", "b", "pb")};
  NciConfig c = cfg_on();
  c.parallel_min_cpus = 8;
  PassState st;
  Plan p = run_stage(s, c, &st);
  CHECK(ids(p, Action::Start) == std::vector<JobId>{2});
  CHECK(ids(p, Action::Suspend).empty());  // nothing was running: nothing suspended
  CHECK(st.order == std::vector<std::uint32_t>{1, 0});
  // The reversed job stays queued and its window advances.
  REQUIRE(p.updates.size() == 1);
  CHECK(p.updates[0].job == 1);
  CHECK(p.updates[0].cycles_pending == 1);
  // Without the rule the first job keeps its start and the larger one waits.
  c.reverse_starts = false;
  CHECK(ids(run_stage(s, c), Action::Start) == std::vector<JobId>{1});
  // A smaller job further down never reverses a start.
  c.reverse_starts = true;
  s.pending = {job(3, 6, 3600, "normal", "a", "pa"), job(4, 4, 3600, "normal", "b", "pb")};
  c.parallel_min_cpus = 4;
  CHECK(ids(run_stage(s, c), Action::Start) == std::vector<JobId>{3});
}

TEST_CASE("a suspended job keeps its free cores until it resumes; its suspender is not suspended",
          "[nci][resume][claims]") {
  // Job 1 (4 cpus, cores 0-3) was suspended for job 2 (2 cpus, cores 2-3),
  // still running; cores 0-1 are free.
  Snapshot s;
  s.now = 1000;
  s.nodes = {node("n0", 4)};
  RunningJob sus = running(job(1, 4, 36000, "normal", "a", "pa"), 0, 0, 0);
  sus.suspended = true;
  s.running = {sus, running(job(2, 2, 3600, "normal", "b", "pb"), 0, 2, 500)};
  s.pending = {job(10, 2, 600, "normal", "c", "pc")};
  NciConfig c = cfg_on();
  Plan p = run_stage(s, c);
  CHECK(ids(p, Action::Start).empty());   // cores 0-1 wait for job 1
  CHECK(ids(p, Action::Resume).empty());  // cores 2-3 still busy
  Snapshot view;
  PassState st = fifo(s);
  REQUIRE(nci_claims(s, c, st, Plan{}, view));
  REQUIRE(view.running.size() == 3);
  CHECK(view.running[2].job.id == 1);
  CHECK_FALSE(view.running[2].suspended);
  CHECK(view.running[2].slots == 2);
  CHECK(view.running[2].expected_end == 500 + 3600 + 36000 - 1000);  // job 2 ends, then what is left
  // An express job may not suspend job 2 (job 1 waits for its cores), so it
  // waits too: suspensions do not stack.
  s.pending = {job(11, 2, 600, "express", "d", "pd")};
  p = run_stage(s, c);
  CHECK(ids(p, Action::Suspend).empty());
  CHECK(ids(p, Action::Start).empty());
  // Without holding, the normal job would take cores 0-1 and job 1 wait longer.
  c.claim_suspended_cores = false;
  s.pending = {job(10, 2, 600, "normal", "c", "pc")};
  CHECK(ids(run_stage(s, c), Action::Start) == std::vector<JobId>{10});
  // Job 2 ended: job 1 resumes on its own cores before anything starts.
  c.claim_suspended_cores = true;
  s.running.pop_back();
  p = run_stage(s, c);
  CHECK(ids(p, Action::Resume) == std::vector<JobId>{1});
  CHECK(ids(p, Action::Start).empty());
}

TEST_CASE("two suspended jobs want one free core: the stage and the planner's view agree on who holds it",
          "[nci][resume][claims]") {
  // Job 1 (cores 0-1, suspended at 100) and job 2 (cores 1-2, suspended at
  // 200, longer: the more expanded) both want free core 1; core 0 runs job 3,
  // cores 2 and 3 are free. One claim rule (claim_order.hpp walk_claims) decides for
  // the stage (which may resume a job only on cores it holds) and for the
  // view the planner plans on.
  Snapshot s;
  s.now = 1000;
  s.nodes = {node("n0", 4)};
  RunningJob a = running(job(1, 2, 36000, "normal", "a", "pa"), 0, 0, 0);
  a.suspended = true;
  a.suspended_since = 100;
  RunningJob b = running(job(2, 2, 36000, "normal", "b", "pb"), 0, 1, 0);
  b.suspended = true;
  b.suspended_since = 200;
  b.suspended_for = 5000;
  s.running = {a, b, running(job(3, 1, 3600, "normal", "c", "pc"), 0, 0, 500)};
  s.pending = {job(10, 1, 600, "normal", "d", "pd")};
  auto pass = [&](const NciConfig& c, Snapshot& view, bool& claimed) {
    PassState st = fifo(s);
    Plan plan;
    plan.now = s.now;
    nci_stage(s, c, 1, st, plan);
    claimed = nci_claims(s, c, st, plan, view);
    plan_rest(s, c, st, plan);
    return plan;
  };
  auto held = [](const Snapshot& view, JobId id) {
    std::set<int> cs;
    for (std::size_t i = 3; i < view.running.size(); ++i)
      if (view.running[i].job.id == id)
        for (const Placement& p : view.running[i].placement) cs.insert(p.cores.begin(), p.cores.end());
    return cs;
  };
  SECTION("time window: the earlier suspended job holds it, so job 2 cannot resume") {
    NciConfig c = cfg_on();
    c.window_wait = 86400;
    Snapshot view;
    bool claimed = false;
    Plan p = pass(c, view, claimed);
    CHECK(ids(p, Action::Resume).empty());
    REQUIRE(claimed);
    REQUIRE(view.running.size() == 5);
    CHECK(held(view, 1) == std::set<int>{1});
    CHECK(held(view, 2) == std::set<int>{2});
    const Decision* d = find(p, Action::Start, 10);
    REQUIRE(d);
    CHECK(cores_of(*d) == std::set<int>{3});
  }
  SECTION("cycle window: the more expanded job 2 holds it and resumes on cores 1-2") {
    NciConfig c = cfg_on();
    Snapshot view;
    bool claimed = false;
    Plan p = pass(c, view, claimed);
    CHECK(ids(p, Action::Resume) == std::vector<JobId>{2});
    // Job 1's cores are taken (job 3, resumed job 2): it holds none.
    if (claimed) CHECK(held(view, 1).empty());
    const Decision* d = find(p, Action::Start, 10);
    REQUIRE(d);
    CHECK(cores_of(*d) == std::set<int>{3});
  }
}
