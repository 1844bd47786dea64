// The coordinator's pass loop on a one-voter raft in the deterministic world: what it tells
// nodes whose reports disagree with the log; PBA's demotions and `corral alloc set` in the log.
#include <catch2/catch.hpp>

#include <memory>
#include <optional>
#include <vector>

#include "coordinator/pba/calendar.hpp"
#include "coordinator/pba/plan_file.hpp"
#include "coordinator/service/coordinator_loop.hpp"
#include "coordinator/service/mesh_machine.hpp"
#include "coordinator/service/raft_disk.hpp"
#include "coordinator/service/raft_node.hpp"
#include "coordinator/service/sim_env.hpp"

namespace {

using namespace corral::service;
namespace jobs = corral::proto::jobs;
namespace mesh = corral::proto::mesh;

using Pushed = std::vector<std::pair<std::uint64_t, jobs::Message>>;

std::vector<corral::Queue> one_queue() {
  corral::Queue q;
  q.name = "normal";
  return {q};
}

// The CancelJob messages in `pushed` to `member` for `job`.
std::vector<jobs::CancelJob> stops_in(const Pushed& pushed, std::uint64_t member, std::uint64_t job) {
  std::vector<jobs::CancelJob> out;
  for (const auto& [to, m] : pushed)
    if (const auto* c = std::get_if<jobs::CancelJob>(&m); c && to == member && c->job == job) out.push_back(*c);
  return out;
}

struct OneVoter {
  corral::SchedConfig sched;  // before `loop`, which copies it
  std::vector<corral::Queue> queues;
  SimNet net{7};
  RaftDisk disk;
  MeshMachine fsm;
  RaftNode node{1, "n1", net.env(1), disk, fsm};
  Pushed pushed;
  CoordinatorLoop loop{net.env(1), node, fsm.state(), "m", sched, queues,
                       [this](std::uint64_t to, const jobs::Message& m) { pushed.emplace_back(to, m); }};

  explicit OneVoter(corral::SchedConfig s = {}, std::vector<corral::Queue> q = one_queue())
      : sched(std::move(s)), queues(std::move(q)) {
    REQUIRE(node.bootstrap({Member{1, "n1", Role::voter}}) == 0);
    node.on_leadership([this](bool leader, std::uint64_t term) { loop.leadership(leader, term); });
    REQUIRE(node.start() == 0);
    REQUIRE(net.run_until([this] { return loop.deciding(); }, 10000));
  }
  void report(std::uint64_t member, const std::string& name, std::vector<std::uint64_t> running, int cores = 4) {
    loop.node(NodeReport{member, name, cores, 1024, 0, std::move(running), net.env(1).now_ms()});
  }
  // The CancelJob messages pushed to `member` for `job`.
  std::vector<jobs::CancelJob> stops(std::uint64_t member, std::uint64_t job) const {
    return stops_in(pushed, member, job);
  }
  // A coordinator elected after `loop` on the same log (nothing of it in memory), deciding and
  // told that "a" (`cores`) runs `running`; what it pushes goes to `out`.
  std::unique_ptr<CoordinatorLoop> successor(Pushed& out, std::vector<std::uint64_t> running, int cores = 4) {
    loop.leadership(false, 0);
    auto fresh = std::make_unique<CoordinatorLoop>(net.env(1), node, fsm.state(), "m", sched, queues,
                                                   [&out](std::uint64_t to, const jobs::Message& m) { out.emplace_back(to, m); });
    fresh->leadership(true, node.term());
    REQUIRE(net.run_until([&] { return fresh->deciding(); }, 5000));
    fresh->node(NodeReport{1, "a", cores, 1024, 0, std::move(running), net.env(1).now_ms()});
    return fresh;
  }
  // Accepts a job of one cpu and runs the passes until it runs on "a"; its id.
  std::uint64_t running_job() {
    corral::proto::JobSpec spec;
    spec.ncpus = 1;
    spec.walltime = 600;
    bool accepted = false;
    node.propose(mesh::encode_entry(mesh::JobAccepted{spec, "u", 1000, 1000, 1.0, "t1"}),
                 [&](const Proposed& p) { accepted = p.status == Status::ok && p.applied.ok; });
    REQUIRE(net.run_until([&] { return accepted && fsm.state().job(1)->state == corral::proto::state::kRunning; }, 10000));
    REQUIRE(fsm.state().job(1)->runs.back().nodes == std::vector<std::string>{"a"});
    return 1;
  }
};

}  // namespace

TEST_CASE("coordinator loop: a node that runs a job the log places elsewhere, or ended, is told to stop it",
          "[mesh_state]") {
  OneVoter w;
  w.report(1, "a", {});
  // The pass starts it on "a", the only node.
  const std::uint64_t job = w.running_job();

  // "b" says it runs the job too; "a", where the log places it, and "c", which runs an id the
  // log never gave, are left alone.
  w.report(1, "a", {job});
  w.report(2, "b", {job}, 0);
  w.report(3, "c", {99}, 0);
  w.net.run_for(1200);
  auto b = w.stops(2, job);
  REQUIRE_FALSE(b.empty());
  CHECK(b.front().run == 1);
  CHECK(b.front().who == "the log does not place it here");
  CHECK(w.stops(1, job).empty());
  CHECK(w.stops(3, 99).empty());

  // Its end is committed while "a" still reports it: "a" is told to stop it, again until it
  // stops reporting it.
  bool ended = false;
  w.node.propose(mesh::encode_entry(mesh::JobEnded{job, 1, "completed", 0, 2.0}),
                 [&](const Proposed& p) { ended = p.status == Status::ok && p.applied.ok; });
  REQUIRE(w.net.run_until([&] { return ended; }, 5000));
  w.report(1, "a", {job});
  w.net.run_for(1200);
  auto a = w.stops(1, job);
  REQUIRE(a.size() >= 2);
  CHECK(a.front().who == "the job's end");
}

TEST_CASE("coordinator loop: why pending jobs wait, from the last pass and the nodes' room", "[mesh_state]") {
  OneVoter w;
  w.report(1, "a", {});
  auto submit = [&](int ncpus, std::vector<corral::proto::Dependency> depend, const char* token) {
    corral::proto::JobSpec spec;
    spec.ncpus = ncpus;
    spec.walltime = 600;
    spec.depend = std::move(depend);
    bool done = false;
    w.node.propose(mesh::encode_entry(mesh::JobAccepted{spec, "u", 1000, 1000, 1.0, token}),
                   [&](const Proposed& p) { done = p.status == Status::ok && p.applied.ok; });
    REQUIRE(w.net.run_until([&] { return done; }, 5000));
  };
  submit(4, {}, "t1");  // job 1 fills "a"
  REQUIRE(w.net.run_until([&] { return w.fsm.state().job(1)->state == corral::proto::state::kRunning; }, 10000));
  submit(2, {}, "t2");                                     // job 2 waits for cores
  submit(1, {corral::proto::Dependency{"afterok", 2}}, "t3");  // job 3 for job 2
  w.report(1, "a", {1});
  w.net.run_for(700);  // a pass after both
  w.report(1, "a", {1});

  jobs::WaitAnswer a = w.loop.waits({1, 2, 3, 42});
  CHECK(a.status == "ok");
  REQUIRE(a.waits.size() == 2);  // neither the running job nor an unknown id
  CHECK(a.waits[0].job == 2);
  CHECK(a.waits[0].reason == "resources");
  CHECK(a.waits[0].detail == "waits for 2 cores on one node (0 free) held by running jobs");
  CHECK(a.waits[0].planned_start >= 600);  // reserved from job 1's end
  CHECK(a.waits[1].job == 3);
  CHECK(a.waits[1].reason == "dependency");
  CHECK(a.waits[1].detail == "afterok:2 (job 2 is pending)");

  // A node that stopped reporting offers no room.
  w.net.run_for(3500);
  CHECK(w.loop.waits({2}).waits.at(0).detail == "waits for a node: none that takes jobs (up, not drained) is reporting");
}

// A user's cancel of a running job is committed before it is sent: a coordinator elected after
// it (nothing of its predecessor in memory) sends it again to the run's node until the job's
// end is committed.
TEST_CASE("coordinator loop: a cancel of a running job survives a change of coordinator", "[mesh_state]") {
  OneVoter w;
  w.report(1, "a", {});
  const std::uint64_t job = w.running_job();
  w.report(1, "a", {job});
  w.net.run_for(500);  // its start settled (a cancel meanwhile is answered "being committed")

  jobs::CancelAsk ask;
  ask.job = job;
  ask.uid = 1000;
  ask.who = "u";
  std::optional<DeskAnswer> answer;
  w.loop.cancel(ask, [&](const DeskAnswer& a) { answer = a; });
  REQUIRE(w.net.run_until([&] { return answer.has_value(); }, 5000));
  INFO(answer->message);
  CHECK(answer->status == "ok");
  CHECK(w.fsm.state().job(job)->runs.back().cancel_by == "u");
  auto first = w.stops(1, job);
  REQUIRE_FALSE(first.empty());
  CHECK(first.front().who == "u");

  // The coordinator goes before "a" stops the job; a new one is elected on the same log.
  const std::size_t old_sent = w.stops(1, job).size();
  Pushed pushed;
  std::unique_ptr<CoordinatorLoop> next = w.successor(pushed, {job});
  CoordinatorLoop& fresh = *next;
  w.net.run_for(1200);
  auto again = stops_in(pushed, 1, job);
  REQUIRE(again.size() >= 2);  // sent again every 500 ms
  CHECK(again.front().who == "u");
  CHECK(again.front().run == 1);
  CHECK(again.front().term == w.node.term());
  CHECK(w.stops(1, job).size() == old_sent);  // the old coordinator sent nothing more

  // A second cancel while it is being carried out: answered, nothing new in the log.
  const std::uint64_t applied = w.fsm.state().data().applied;
  ask.who = "root";
  answer.reset();
  fresh.cancel(ask, [&](const DeskAnswer& a) { answer = a; });
  REQUIRE(answer.has_value());
  CHECK(answer->status == "ok");
  CHECK(w.fsm.state().data().applied == applied);

  // Its end is committed ("a" no longer runs it): no more cancels.
  bool ended = false;
  w.node.propose(mesh::encode_entry(mesh::JobEnded{job, 1, "cancelled", -1, 3.0}),
                 [&](const Proposed& p) { ended = p.status == Status::ok && p.applied.ok; });
  REQUIRE(w.net.run_until([&] { return ended; }, 5000));
  fresh.node(NodeReport{1, "a", 4, 1024, 0, {}, w.net.env(1).now_ms()});
  const std::size_t sent = stops_in(pushed, 1, job).size();
  w.net.run_for(1200);
  CHECK(stops_in(pushed, 1, job).size() == sent);
}

namespace {

// A PBA coordinator: projects chem (8 slots this week) and phys (none); a job without -P, or of
// phys, fails pre-qualification.
corral::SchedConfig pba_config() {
  corral::SchedConfig cfg;
  cfg.pba.enabled = true;
  corral::pba::PlanParseOptions opt;
  opt.origin = 1800000000;  // sim_env.cpp: the wall clock at virtual time 0
  auto parsed = corral::pba::parse_plan(
      "project chem\nmember chem u\nproject phys\nmember phys u\nalloc chem +0 8\n", opt);
  REQUIRE(parsed.ok());
  cfg.pba.plan = parsed.plan;
  return cfg;
}

}  // namespace

// PBA's demotion (pre-qualification failed: no project) is a JobMoved in the log, as a
// standalone node moves the job's queue: a coordinator elected later finds it moved.
TEST_CASE("coordinator loop: PBA's demotion of a job is in the replicated state", "[mesh_state]") {
  std::vector<corral::Queue> queues = one_queue();
  corral::Queue lowest;
  lowest.name = "lowest";  // as the agent adds it (snapshot_queues)
  lowest.priority = -1;
  queues.push_back(lowest);
  OneVoter w(pba_config(), queues);
  w.report(1, "a", {}, 1);
  auto accept = [&](const std::string& project, int ncpus, const char* token) {
    corral::proto::JobSpec spec;
    spec.ncpus = ncpus;
    spec.walltime = 600;
    spec.queue = "normal";
    spec.project = project;
    bool done = false;
    w.node.propose(mesh::encode_entry(mesh::JobAccepted{spec, "u", 1000, 1000, 1.0, token}),
                   [&](const Proposed& p) { done = p.status == Status::ok && p.applied.ok; });
    REQUIRE(w.net.run_until([&] { return done; }, 5000));
  };
  accept("chem", 1, "t1");  // job 1 fills "a"
  REQUIRE(w.net.run_until([&] { return w.fsm.state().job(1)->state == corral::proto::state::kRunning; }, 10000));
  accept("", 1, "t2");      // job 2: no project; it waits (no free core)
  accept("chem", 1, "t3");  // job 3: tagged, stays in its queue
  w.report(1, "a", {1}, 1);
  REQUIRE(w.net.run_until([&] { return w.fsm.state().job(2)->spec.queue == "lowest"; }, 10000));
  CHECK(w.fsm.state().job(2)->state == corral::proto::state::kPending);
  CHECK(w.fsm.state().job(3)->spec.queue == "normal");

  // Moved once: later passes propose nothing more for it; a new coordinator reads it moved.
  const std::uint64_t applied = w.fsm.state().data().applied;
  w.report(1, "a", {1}, 1);
  w.net.run_for(1500);
  CHECK(w.fsm.state().data().applied == applied);
  Pushed pushed;
  std::unique_ptr<CoordinatorLoop> fresh = w.successor(pushed, {1}, 1);
  w.net.run_for(1500);
  CHECK(w.fsm.state().job(2)->spec.queue == "lowest");
}

// `corral alloc set` of several changes: one entry, all or none.
TEST_CASE("coordinator loop: alloc set of several changes is one log entry, all or none", "[mesh_state]") {
  OneVoter w(pba_config());
  w.report(1, "a", {});
  const std::string week =
      corral::pba::format_iso_week(corral::pba::iso_week(static_cast<corral::Time>(w.net.env(1).wall_s())));
  auto ask = [&](std::vector<mesh::AllocationSet> allocs) {
    jobs::CancelAsk a;
    a.admin = true;
    a.who = "root";
    a.action = "alloc_set";
    a.allocs = std::move(allocs);
    std::optional<DeskAnswer> answer;
    w.loop.operate(a, [&](const DeskAnswer& d) { answer = d; });
    REQUIRE(w.net.run_until([&] { return answer.has_value(); }, 5000));
    return *answer;
  };
  const std::uint64_t before = w.fsm.state().data().applied;
  DeskAnswer bad = ask({{"chem", week, 4}, {"nosuch", week, 2}, {"phys", week, 3}});
  CHECK(bad.status == "refused");
  CHECK(bad.message.find("nosuch") != std::string::npos);
  CHECK(w.fsm.state().data().allocations.empty());
  CHECK(w.fsm.state().data().applied == before);

  DeskAnswer good = ask({{"chem", week, 4}, {"phys", week, 3}});
  INFO(good.message);
  CHECK(good.status == "ok");
  CHECK(w.fsm.state().data().applied == before + 1);  // one entry for both
  CHECK(w.fsm.state().data().allocations.at("chem/" + week) == 4);
  CHECK(w.fsm.state().data().allocations.at("phys/" + week) == 3);
}

namespace {

// The JobOrder messages in `pushed` to `member` for `job`.
std::vector<jobs::JobOrder> orders_in(const Pushed& pushed, std::uint64_t member, std::uint64_t job) {
  std::vector<jobs::JobOrder> out;
  for (const auto& [to, m] : pushed)
    if (const auto* o = std::get_if<jobs::JobOrder>(&m); o && to == member && o->job == job) out.push_back(*o);
  return out;
}

// Node `from`'s acknowledgement of order `o` with `status` (mesh_orders.cpp's answer).
jobs::StartAck ack_of(const jobs::JobOrder& o, std::uint64_t from, const std::string& status, const std::string& why = "") {
  jobs::StartAck a;
  a.mesh = o.mesh;
  a.from = from;
  a.term = o.term;
  a.decision = o.decision;
  a.job = o.job;
  a.run = o.run;
  a.status = status;
  a.message = why;
  a.order = o.action;
  a.decided_term = o.decided_term;
  return a;
}

}  // namespace

// A suspension is in the log when ordered, and its node's acknowledgement is committed too (the
// nodes that froze it). A node that fails an order has the log put the run back; a coordinator
// elected later finds the job as the node left it and sends that order no more.
TEST_CASE("coordinator loop: a node's acknowledgement of a suspend or resume is in the log", "[mesh_state]") {
  OneVoter w;
  w.report(1, "a", {});
  const std::uint64_t job = w.running_job();
  w.report(1, "a", {job});
  w.net.run_for(500);
  auto control = [&](CoordinatorLoop& loop, const char* action) {
    jobs::CancelAsk ask;
    ask.job = job;
    ask.admin = true;
    ask.who = "root";
    ask.action = action;
    std::optional<DeskAnswer> answer;
    loop.operate(ask, [&](const DeskAnswer& a) { answer = a; });
    REQUIRE(w.net.run_until([&] { return answer.has_value(); }, 5000));
    INFO(answer->message);
    REQUIRE(answer->status == "ok");
  };
  control(w.loop, "suspend");
  const corral::service::MeshRun* run = &w.fsm.state().job(job)->runs.back();
  CHECK(w.fsm.state().job(job)->state == corral::proto::state::kSuspended);
  CHECK(run->order_acked.empty());
  auto sent = orders_in(w.pushed, 1, job);
  REQUIRE_FALSE(sent.empty());
  w.loop.on_ack(ack_of(sent.back(), 1, "done"));
  REQUIRE(w.net.run_until([&] { return !w.fsm.state().job(job)->runs.back().order_acked.empty(); }, 5000));
  run = &w.fsm.state().job(job)->runs.back();
  CHECK(run->order_acked == std::vector<std::string>{"a"});
  CHECK(run->held);  // a user's: only a user resumes it
  CHECK(run->order_reason == "suspended by root");

  // A resume its node fails: the log puts the job back suspended, with why.
  control(w.loop, "resume");
  CHECK(w.fsm.state().job(job)->state == corral::proto::state::kRunning);
  auto resume = orders_in(w.pushed, 1, job);
  REQUIRE(resume.back().action == "resume");
  w.loop.on_ack(ack_of(resume.back(), 1, "failed", "freezer: device busy"));
  REQUIRE(w.net.run_until([&] { return w.fsm.state().job(job)->state == corral::proto::state::kSuspended; }, 5000));
  run = &w.fsm.state().job(job)->runs.back();
  CHECK(run->order_failed);
  CHECK(run->order_reason == "resume failed on a: freezer: device busy");

  // A new coordinator on the same log (decisions of its own would need a new term: it makes
  // none here) finds the job suspended and sends the failed order no more.
  Pushed pushed;
  std::unique_ptr<CoordinatorLoop> fresh = w.successor(pushed, {job});
  w.net.run_for(1200);
  CHECK(w.fsm.state().job(job)->state == corral::proto::state::kSuspended);
  CHECK(orders_in(pushed, 1, job).empty());
}

TEST_CASE("coordinator loop: a drained node down for 10 s is removed with its jobs ended node_fail",
          "[mesh_state]") {
  OneVoter w;
  w.report(2, "b", {});
  corral::proto::JobSpec spec;
  spec.ncpus = 1;
  spec.walltime = 600;
  bool accepted = false;
  w.node.propose(mesh::encode_entry(mesh::JobAccepted{spec, "u", 1000, 1000, 1.0, "t1"}),
                 [&](const Proposed& p) { accepted = p.status == Status::ok && p.applied.ok; });
  REQUIRE(w.net.run_until([&] { return accepted && w.fsm.state().job(1)->state == corral::proto::state::kRunning; }, 10000));
  REQUIRE(w.fsm.state().job(1)->runs.back().nodes == std::vector<std::string>{"b"});
  auto ask = [&](const std::string& action) {
    jobs::CancelAsk a;
    a.admin = true;
    a.who = "root";
    a.action = action;
    a.node = "b";
    a.reason = "dead";
    std::optional<DeskAnswer> answer;
    w.loop.operate(a, [&](const DeskAnswer& d) { answer = d; });
    REQUIRE(w.net.run_until([&] { return answer.has_value(); }, 5000));
    return *answer;
  };
  REQUIRE(ask("drain").status == "ok");
  // Heard from just now: its job runs, the removal waits for it.
  w.report(2, "b", {1});
  DeskAnswer early = ask("remove");
  CHECK(early.status == "refused");
  CHECK(early.message.find("1 job(s) still run on b") != std::string::npos);
  CHECK(w.fsm.state().job(1)->state == corral::proto::state::kRunning);
  // Silent for 10 s: removed, its job ended node_fail with who removed it.
  w.net.run_for(corral::service::CoordinatorLoop::kNodeDownMs + 500);
  DeskAnswer removed = ask("remove");
  CHECK(removed.status == "ok");
  const MeshJob* j = w.fsm.state().job(1);
  CHECK(j->state == corral::proto::state::kEnded);
  CHECK(j->end_reason == "node_fail");
  CHECK(j->end_message == "node b was removed while down, by root");
  CHECK(w.fsm.state().data().nodes.at("b").state == mesh::admin::kRemoved);
}
