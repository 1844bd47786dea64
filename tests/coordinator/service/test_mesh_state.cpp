// The mesh's replicated state machine alone: entries, refusals, snapshots.
#include <map>
#include <set>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "coordinator/service/mesh_charges.hpp"
#include "coordinator/service/mesh_state.hpp"
#include "proto/mesh_jobs.hpp"
#include "proto/mesh_link.hpp"

using namespace corral;
using namespace corral::service;
namespace mesh = corral::proto::mesh;

namespace {

mesh::JobAccepted accepted(std::string token = {}) {
  mesh::JobAccepted a;
  a.spec.name = "run1";
  a.spec.ncpus = 2;
  a.spec.walltime = 3600;
  a.user = "alice";
  a.uid = 1000;
  a.submit_time = 100;
  a.token = std::move(token);
  return a;
}

mesh::JobStarted started(std::uint64_t job, std::int32_t run, std::uint64_t term,
                         std::uint64_t decision, std::vector<std::string> nodes = {"n1"}) {
  return mesh::JobStarted{job, run, std::move(nodes), decision, term, 200};
}

// A run as a snapshot of an older version holds it (no cancel_by).
struct OlderRun {
  std::vector<std::string> nodes;
  double start = 0;
  CORRAL_MSGPACK_MAP(nodes, start)
};

// The jobs of `st` that have not ended, from the whole job table.
std::set<std::uint64_t> not_ended(const MeshState& st) {
  std::set<std::uint64_t> out;
  for (const auto& [id, j] : st.data().jobs)
    if (j.state != "ended") out.insert(id);
  return out;
}

}  // namespace

TEST_CASE("the live jobs are those not ended, after every entry and after a restore", "[mesh_state]") {
  MeshState st;
  std::vector<mesh::Entry> entries = {accepted("a"), accepted("b"), accepted("c"), accepted("a"),
                                      started(1, 1, 1, 1), started(2, 1, 1, 2),
                                      mesh::JobSuspended{2, 1, true, "", 1}, mesh::JobEnded{3, 0, "cancelled", -1, 2},
                                      mesh::JobRequeued{1, 1, "checkpoint", 3}, started(1, 2, 1, 3),
                                      mesh::JobEnded{1, 2, "completed", 0, 4}, mesh::JobEnded{1, 2, "completed", 0, 5},
                                      mesh::JobEnded{9, 1, "completed", 0, 5}, mesh::JobSuspended{2, 1, false, "", 6}};
  for (const mesh::Entry& e : entries) {
    st.apply(e);
    CHECK(st.live() == not_ended(st));
  }
  CHECK(st.live() == std::set<std::uint64_t>{2});
  MeshState copy;
  copy.apply(accepted("x"));  // a job the restore replaces
  copy.restore(st.snapshot());
  CHECK(copy.live() == std::set<std::uint64_t>{2});
  CHECK(copy.jobs_on("n1") == std::vector<std::uint64_t>{2});
}

TEST_CASE("mesh entries round-trip and bad bytes are refused", "[mesh_state]") {
  mesh::Entry e = started(7, 1, 3, 42, {"n1", "n2"});
  mesh::Entry back = mesh::decode_entry(mesh::encode_entry(e));
  REQUIRE(back.index() == e.index());
  const auto& s = std::get<mesh::JobStarted>(back);
  CHECK(s.job == 7);
  CHECK(s.nodes == std::vector<std::string>{"n1", "n2"});
  CHECK(s.term == 3);
  CHECK(s.decision == 42);
  CHECK(mesh::kind_name(back) == "job_started");

  CHECK_THROWS_WITH(mesh::decode_entry(""), Catch::Contains("empty"));
  CHECK_THROWS_WITH(mesh::decode_entry("garbage!"), Catch::Contains("not a mesh entry"));
  std::string other = proto::encode(proto::StatReq{});
  CHECK_THROWS_WITH(mesh::decode_entry(other), Catch::Contains("bad magic"));

  MeshState st;
  Outcome o = st.apply_bytes("\x93\x01\x02\x03");
  CHECK_FALSE(o.ok);
  CHECK(o.reason.find("not a mesh entry") != std::string::npos);
  CHECK(st.data().jobs.empty());
}

TEST_CASE("accepted jobs get ids from the state machine, never reused", "[mesh_state]") {
  MeshState st;
  Outcome a = st.apply(accepted());
  Outcome b = st.apply(accepted());
  REQUIRE(a.ok);
  REQUIRE(b.ok);
  CHECK(a.job == 1);
  CHECK(b.job == 2);
  REQUIRE(st.apply(mesh::JobEnded{1, 0, "cancelled", -1, 150}).ok);
  CHECK(st.apply(accepted()).job == 3);
  CHECK(st.job(1)->state == "ended");
  CHECK(st.job(1)->end_reason == "cancelled");

  SECTION("a retried submission keeps its first id") {
    Outcome t1 = st.apply(accepted("n1/17"));
    Outcome t2 = st.apply(accepted("n1/17"));
    CHECK(t1.ok);
    CHECK(t2.ok);
    CHECK(t1.job == t2.job);
    CHECK(st.data().jobs.size() == 4);
  }
}

TEST_CASE("a job starts once per run, from a current decision", "[mesh_state]") {
  MeshState st;
  std::uint64_t id = st.apply(accepted()).job;
  REQUIRE(st.apply(started(id, 1, 2, 1)).ok);
  CHECK(st.job(id)->state == "running");
  CHECK(st.jobs_on("n1") == std::vector<std::uint64_t>{id});

  Outcome again = st.apply(started(id, 1, 2, 2));
  CHECK_FALSE(again.ok);
  CHECK(again.reason == "job 1 is running, not pending");

  Outcome dup = st.apply(started(st.apply(accepted()).job, 1, 2, 1));
  CHECK_FALSE(dup.ok);
  CHECK(dup.reason == "decision 1 of term 2 already applied");

  Outcome old = st.apply(started(2, 1, 1, 9));
  CHECK_FALSE(old.ok);
  CHECK(old.reason == "decision of term 1 is older than the current term 2");

  Outcome skip = st.apply(started(2, 2, 3, 1));
  CHECK_FALSE(skip.ok);
  CHECK(skip.reason == "run 2 is not the next run (1) of job 2");

  CHECK_FALSE(st.apply(started(99, 1, 3, 1)).ok);
  CHECK_FALSE(st.apply(started(2, 1, 3, 1, {})).ok);
  // A newer term's decision ids start afresh.
  CHECK(st.apply(started(2, 1, 3, 1)).ok);
  CHECK(st.data().term == 3);
}

TEST_CASE("orders: suspend, resume, requeue and checkpoint are decisions of the current run", "[mesh_state]") {
  MeshState st;
  std::uint64_t id = st.apply(accepted()).job;
  REQUIRE(st.apply(started(id, 1, 2, 1)).ok);
  auto ordered = [&](const char* action, std::uint64_t term, std::uint64_t decision, double t, bool held = false) {
    return st.apply(mesh::JobOrdered{id, 1, action, "why", decision, term, t, false, held});
  };
  CHECK(ordered("suspend", 1, 9, 210).reason == "decision of term 1 is older than the current term 2");
  CHECK(ordered("suspend", 2, 1, 210).reason == "decision 1 of term 2 already applied");
  CHECK(ordered("resume", 2, 2, 210).reason == "cannot resume job 1: it is running");
  CHECK(ordered("kill", 2, 2, 210).reason == "order 'kill' is not suspend, resume, requeue or checkpoint");
  REQUIRE(ordered("suspend", 2, 2, 210).ok);
  CHECK(st.job(id)->state == "suspended");
  CHECK(st.job(id)->runs.back().suspended_since == 210);
  CHECK(st.job(id)->runs.back().order_decision == 2);
  REQUIRE(ordered("resume", 2, 3, 230).ok);
  CHECK(st.job(id)->state == "running");
  CHECK(st.job(id)->runs.back().suspended_s == 20);
  // A checkpoint leaves it running (its node stops it); the node's requeue then keeps its work.
  REQUIRE(ordered("checkpoint", 2, 4, 240).ok);
  CHECK(st.job(id)->state == "running");
  CHECK(st.job(id)->runs.back().stopping == "checkpoint");
  CHECK(ordered("suspend", 2, 5, 241).reason == "job 1 is being stopped already (checkpoint)");
  REQUIRE(st.apply(mesh::JobRequeued{id, 1, "checkpointed", 250, 1, 40}).ok);
  CHECK(st.job(id)->state == "pending");
  CHECK(st.job(id)->work_done == 40);
  CHECK(st.job(id)->checkpoints == 1);
  CHECK(st.job(id)->runs.back().stopping.empty());
  CHECK(ordered("resume", 2, 6, 260).reason == "job 1 is pending, not running");
  // A PBA requeue counts toward its bound.
  REQUIRE(st.apply(started(id, 2, 2, 7)).ok);
  REQUIRE(st.apply(mesh::JobOrdered{id, 2, "requeue", "pba", 8, 2, 270, true, false}).ok);
  CHECK(st.job(id)->pba_preemptions == 1);
  // The snapshot keeps all of it.
  MeshState back;
  back.restore(st.snapshot());
  CHECK(back.job(id)->runs.back().stopping == "requeue");
  CHECK(back.job(id)->work_done == 40);
}

// A node's acknowledgement of a suspend or resume order (JobSuspended with the order): confirms
// it, or, when the node failed it, puts the run back; only for the run's last such order.
TEST_CASE("nodes' acknowledgements of suspend and resume orders", "[mesh_state]") {
  MeshState st;
  std::uint64_t id = st.apply(accepted()).job;
  REQUIRE(st.apply(started(id, 1, 1, 1, {"n1", "n2"})).ok);
  auto ack = [&](bool suspended, std::uint64_t decision, const char* node, double t, const char* why = "") {
    return st.apply(mesh::JobSuspended{id, 1, suspended, why, t, node, 1, decision});
  };
  REQUIRE(st.apply(mesh::JobOrdered{id, 1, "suspend", "suspended by root", 2, 1, 100, false, true}).ok);
  CHECK(ack(true, 9, "n1", 101).reason == "not the last suspend or resume order of job 1");
  CHECK(ack(true, 2, "n9", 101).reason == "node 'n9' does not run job 1");
  REQUIRE(ack(true, 2, "n1", 101).ok);
  REQUIRE(ack(true, 2, "n1", 101).ok);  // again: once in the list
  REQUIRE(ack(true, 2, "n2", 102).ok);
  CHECK(st.job(id)->runs.back().order_acked == std::vector<std::string>{"n1", "n2"});
  CHECK(st.job(id)->state == "suspended");

  // A resume n2 fails: suspended again from then; n1's later "done" changes nothing.
  REQUIRE(st.apply(mesh::JobOrdered{id, 1, "resume", "resumed by root", 3, 1, 110, false, false}).ok);
  CHECK(st.job(id)->runs.back().order_acked.empty());
  CHECK(st.job(id)->runs.back().suspended_s == 10);
  REQUIRE(ack(true, 3, "n2", 111, "freezer: device busy").ok);
  CHECK(st.job(id)->state == "suspended");
  CHECK(st.job(id)->runs.back().order_failed);
  CHECK(st.job(id)->runs.back().suspended_since == 111);
  CHECK(st.job(id)->runs.back().order_reason == "resume failed on n2: freezer: device busy");
  REQUIRE(ack(false, 3, "n1", 112).ok);
  CHECK(st.job(id)->state == "suspended");

  // A suspend that fails: running again, no longer held; the snapshot keeps it all.
  REQUIRE(st.apply(mesh::JobOrdered{id, 1, "resume", "", 4, 1, 120, false, false}).ok);
  REQUIRE(st.apply(mesh::JobOrdered{id, 1, "suspend", "suspended by root", 5, 1, 130, false, true}).ok);
  REQUIRE(ack(false, 5, "n1", 131, "no freezer").ok);
  CHECK(st.job(id)->state == "running");
  CHECK_FALSE(st.job(id)->runs.back().held);
  MeshState back;
  back.restore(st.snapshot());
  CHECK(back.job(id)->runs.back().order_failed);
  CHECK(back.job(id)->runs.back().order_reason == "suspend failed on n1: no freezer");
}

TEST_CASE("runs end, requeue, suspend and resume only as the current run", "[mesh_state]") {
  MeshState st;
  std::uint64_t id = st.apply(accepted()).job;
  REQUIRE(st.apply(started(id, 1, 1, 1)).ok);

  CHECK_FALSE(st.apply(mesh::JobSuspended{id, 1, false, "", 0}).ok);  // not suspended
  REQUIRE(st.apply(mesh::JobSuspended{id, 1, true, "root", 210}).ok);
  CHECK(st.job(id)->state == "suspended");
  CHECK(st.apply(mesh::JobSuspended{id, 1, true, "", 0}).reason == "job 1 is already suspended");
  REQUIRE(st.apply(mesh::JobSuspended{id, 1, false, "", 220}).ok);

  REQUIRE(st.apply(mesh::JobRequeued{id, 1, "checkpoint", 300}).ok);
  CHECK(st.job(id)->state == "pending");
  CHECK(st.job(id)->runs.at(0).end_reason == "preempted");
  CHECK(st.apply(mesh::JobEnded{id, 1, "completed", 0, 301}).reason == "job 1 is pending, not running");

  REQUIRE(st.apply(started(id, 2, 1, 2, {"n2", "n3"})).ok);
  CHECK(st.jobs_on("n3") == std::vector<std::uint64_t>{id});
  CHECK(st.apply(mesh::JobEnded{id, 1, "completed", 0, 400}).reason ==
        "run 1 is not the current run (2) of job 1");
  CHECK_FALSE(st.apply(mesh::JobEnded{id, 0, "cancelled", -1, 400}).ok);
  CHECK_FALSE(st.apply(mesh::JobEnded{id, 2, "", 0, 400}).ok);
  REQUIRE(st.apply(mesh::JobEnded{id, 2, "completed", 0, 400}).ok);
  const MeshJob* j = st.job(id);
  CHECK(j->state == "ended");
  CHECK(j->exit_code == 0);
  CHECK(j->runs.size() == 2);
  CHECK(j->runs.at(1).end == 400);
  CHECK(st.jobs_on("n2").empty());
  CHECK(st.apply(mesh::JobEnded{id, 2, "completed", 0, 401}).reason == "job 1 is ended, not running");
}

TEST_CASE("a running job's cancel is replicated; a run requeued meanwhile ends the job", "[mesh_state]") {
  MeshState st;
  std::uint64_t id = st.apply(accepted()).job;
  REQUIRE(st.apply(started(id, 1, 1, 1)).ok);
  CHECK(st.apply(mesh::CancelAsked{id, 2, "alice", 250}).reason == "run 2 is not the current run (1) of job 1");
  CHECK(st.apply(mesh::CancelAsked{id, 1, "", 250}).reason == "a cancel needs who asked it");
  REQUIRE(st.apply(mesh::CancelAsked{id, 1, "alice", 250}).ok);
  REQUIRE(st.apply(mesh::CancelAsked{id, 1, "root", 251}).ok);
  CHECK(st.job(id)->runs.back().cancel_by == "alice");  // the first, being carried out
  CHECK(st.job(id)->state == "running");                // its nodes stop it; its end comes as any end

  mesh::Entry back = mesh::decode_entry(mesh::encode_entry(mesh::CancelAsked{id, 1, "alice", 250}));
  CHECK(mesh::kind_name(back) == "cancel_asked");
  CHECK(std::get<mesh::CancelAsked>(back).who == "alice");
  MeshState copy;
  copy.restore(st.snapshot());
  CHECK(copy.job(id)->runs.back().cancel_by == "alice");

  // Its node was requeueing it when the cancel came: the job does not wait again.
  REQUIRE(st.apply(mesh::JobRequeued{id, 1, "requeued by root", 300}).ok);
  CHECK(st.job(id)->state == "ended");
  CHECK(st.job(id)->end_reason == "cancelled");
  CHECK(st.job(id)->end_message == "cancelled by alice while its run was being stopped (requeued by root)");
  CHECK(st.job(id)->runs.back().end_reason == "preempted");
  CHECK(st.live().empty());
  CHECK(st.apply(mesh::CancelAsked{id, 1, "alice", 301}).reason == "job 1 is ended, not running");

  // A run of an older snapshot (no cancel_by) reads as not cancelled.
  msgpack::sbuffer buf;
  msgpack::pack(buf, OlderRun{{"n1", "n2"}, 5});
  MeshRun run = msgpack::unpack(buf.data(), buf.size()).get().as<MeshRun>();
  CHECK(run.nodes == std::vector<std::string>{"n1", "n2"});
  CHECK(run.cancel_by.empty());
}

TEST_CASE("drained nodes get no starts; grants, charges and allocations", "[mesh_state]") {
  MeshState st;
  std::uint64_t id = st.apply(accepted()).job;
  REQUIRE(st.apply(mesh::NodeAdmin{"n2", "drain", "disk swap"}).ok);
  CHECK(st.apply(started(id, 1, 1, 1, {"n1", "n2"})).reason == "node n2 is drained");
  CHECK(st.apply(mesh::NodeAdmin{"n2", "sideways", ""}).reason == "node state 'sideways' is not up, drain or removed");
  REQUIRE(st.apply(mesh::NodeAdmin{"n2", "up", ""}).ok);
  REQUIRE(st.apply(started(id, 1, 1, 1, {"n1", "n2"})).ok);

  REQUIRE(st.apply(mesh::GrantSet{"chem", "", 1000, 7 * 86400}).ok);
  CHECK_FALSE(st.apply(mesh::GrantSet{"chem", "", -1, 0}).ok);
  CHECK(st.apply(mesh::GrantSet{"chem", "", 5, -1}).reason == "a grant's period cannot be negative");
  CHECK(st.apply(mesh::Charge{id, 1, "chem", "2026Q4", 12.5}).reason ==
        "a run is charged when its end is applied, not by a charge entry");
  CHECK(st.data().grants.at("chem").su == 1000);
  CHECK(st.data().grants.at("chem").every == 7 * 86400);

  REQUIRE(st.apply(mesh::AllocationSet{"chem", "2026-W48", 64}).ok);
  CHECK_FALSE(st.apply(mesh::AllocationSet{"chem", "2026-W48", -2}).ok);
  CHECK(st.data().allocations.at("chem/2026-W48") == 64);
  // One entry of several changes (corral alloc set): all, or none when one is bad.
  mesh::AllocationSet several;
  several.changes = {{"chem", "2026-W49", 8}, {"phys", "2026-W49", -1}, {"bio", "2026-W49", 2}};
  CHECK(st.apply(several).reason == "an allocation cannot be negative (phys 2026-W49)");
  CHECK(st.data().allocations.size() == 1);
  several.changes[1].slots = 3;
  REQUIRE(st.apply(mesh::decode_entry(mesh::encode_entry(several))).ok);
  CHECK(st.data().allocations.at("chem/2026-W49") == 8);
  CHECK(st.data().allocations.at("phys/2026-W49") == 3);
  CHECK(st.data().allocations.at("bio/2026-W49") == 2);
}

TEST_CASE("each run is charged once as its end applies, across a snapshot, by the ledger's rules",
          "[mesh_state]") {
  MeshState st;
  mesh::JobAccepted a = accepted();
  a.spec.project = "chem";
  std::uint64_t id = st.apply(a).job;
  REQUIRE(st.apply(mesh::GrantSet{"chem", "", 100, 0}).ok);
  // 3600 SU per cpu-hour: one unit per cpu-second, on the job's 2 cpus.
  mesh::JobStarted s1 = started(id, 1, 1, 1);
  s1.charge = 3600;
  REQUIRE(st.apply(s1).ok);
  CHECK(st.data().charge_origin == week_monday(200));
  // Run 1: 30 s, 10 of them suspended, then requeued: 20 running seconds, 40 units.
  REQUIRE(st.apply(mesh::JobOrdered{id, 1, "suspend", "", 2, 1, 210}).ok);
  REQUIRE(st.apply(mesh::JobOrdered{id, 1, "resume", "", 3, 1, 220}).ok);
  CHECK(mesh_ledger(st.data(), 225).grants_left(225).at("chem") == Approx(100 - 30));  // running: so far
  REQUIRE(st.apply(mesh::JobRequeued{id, 1, "requeue", 230}).ok);
  CHECK(st.job(id)->runs[0].charged_s == 20);
  CHECK(st.job(id)->runs[0].su == Approx(40));
  CHECK_FALSE(st.apply(mesh::JobRequeued{id, 1, "requeue", 260}).ok);
  CHECK(st.job(id)->runs[0].su == Approx(40));
  // Run 2 ends on the state and on a copy restored from a snapshot taken while it ran.
  mesh::JobStarted s2 = started(id, 2, 1, 4);
  s2.charge = 3600;
  s2.time = 300;
  REQUIRE(st.apply(s2).ok);
  MeshState copy;
  copy.restore(st.snapshot());
  for (MeshState* m : {&st, &copy}) {
    REQUIRE(m->apply(mesh::JobEnded{id, 2, "completed", 0, 310.7}).ok);
    CHECK(m->apply(mesh::JobEnded{id, 2, "completed", 0, 400}).reason == "job 1 is ended, not running");
    CHECK(m->job(id)->runs[1].charged_s == 10);  // whole seconds, as on a standalone node
    CHECK(job_su(*m->job(id), 1000) == Approx(60));
    Ledger l = mesh_ledger(m->data(), 1000);
    CHECK(l.grant_left("chem", 1000) == Approx(40));
    CHECK(l.user_weeks().at({"alice", 0}).su == Approx(60));
  }
  CHECK(copy.snapshot() == st.snapshot());
  // A run of a coordinator without charging (factor 0) costs nothing; its cpu time still counts.
  std::uint64_t free_job = st.apply(a).job;
  REQUIRE(st.apply(started(free_job, 1, 1, 5)).ok);
  REQUIRE(st.apply(mesh::JobEnded{free_job, 1, "completed", 0, 250}).ok);
  CHECK(st.job(free_job)->runs[0].su == 0);
  CHECK(mesh_ledger(st.data(), 1000).project_weeks().at({"chem", 0}).cpu_seconds == Approx(2 * 20 + 2 * 10 + 2 * 50));
}

TEST_CASE("holds and queue moves apply to pending jobs only, and survive the bytes", "[mesh_state]") {
  MeshState st;
  std::uint64_t id = st.apply(accepted()).job;
  mesh::Entry e = mesh::decode_entry(mesh::encode_entry(mesh::JobHeld{id, "operator", "ops"}));
  REQUIRE(std::holds_alternative<mesh::JobHeld>(e));
  CHECK(mesh::kind_name(e) == "job_held");
  REQUIRE(st.apply(e).ok);
  CHECK(st.job(id)->hold == "operator");
  CHECK(st.job(id)->hold_by == "ops");
  CHECK(st.apply(mesh::JobHeld{id, "sideways", "x"}).reason == "hold 'sideways' is not user or operator");
  REQUIRE(st.apply(mesh::JobHeld{id, "", "ops"}).ok);
  CHECK(st.job(id)->hold.empty());
  CHECK(st.apply(mesh::JobHeld{id, "", "ops"}).reason == "job 1 is not held");
  REQUIRE(st.apply(mesh::JobMoved{id, "express", "alice"}).ok);
  CHECK(st.job(id)->spec.queue == "express");
  CHECK(st.apply(mesh::JobMoved{id, "", "alice"}).reason == "no queue named");
  CHECK(st.apply(mesh::JobMoved{99, "express", "alice"}).reason == "no job 99");
  // Held jobs keep their hold in a snapshot; a running job is neither held nor moved.
  REQUIRE(st.apply(mesh::JobHeld{id, "user", "alice"}).ok);
  MeshState copy;
  copy.restore(st.snapshot());
  CHECK(copy.job(id)->hold == "user");
  REQUIRE(st.apply(mesh::JobHeld{id, "", "alice"}).ok);
  REQUIRE(st.apply(started(id, 1, 1, 1)).ok);
  CHECK(st.apply(mesh::JobHeld{id, "user", "alice"}).reason == "job 1 is running, not pending");
  CHECK(st.apply(mesh::JobMoved{id, "normal", "alice"}).reason == "job 1 is running, not pending");
}

namespace {

mesh::JobAccepted array_of(std::int64_t first, std::int64_t last, std::int64_t step, std::int32_t max_running) {
  mesh::JobAccepted a = accepted();
  a.spec.array = proto::ArraySpec{first, last, step, max_running};
  return a;
}

// The tasks of `array` in `st`: index -> id.
std::map<std::int64_t, std::uint64_t> tasks_of(const MeshState& st, std::uint64_t array) {
  std::map<std::int64_t, std::uint64_t> out;
  for (std::uint64_t id : st.tasks(array)) out[st.job(id)->array_index] = id;
  return out;
}

// `o` packed again without the map keys `drop`, at any depth: the bytes an older writer made.
void pack_without(msgpack::packer<msgpack::sbuffer>& pk, const msgpack::object& o, const std::set<std::string>& drop) {
  if (o.type == msgpack::type::ARRAY) {
    pk.pack_array(o.via.array.size);
    for (std::uint32_t i = 0; i < o.via.array.size; ++i) pack_without(pk, o.via.array.ptr[i], drop);
  } else if (o.type == msgpack::type::MAP) {
    std::uint32_t kept = 0;
    for (std::uint32_t i = 0; i < o.via.map.size; ++i)
      kept += !(o.via.map.ptr[i].key.type == msgpack::type::STR && drop.count(o.via.map.ptr[i].key.as<std::string>()));
    pk.pack_map(kept);
    for (std::uint32_t i = 0; i < o.via.map.size; ++i) {
      const msgpack::object_kv& kv = o.via.map.ptr[i];
      if (kv.key.type == msgpack::type::STR && drop.count(kv.key.as<std::string>())) continue;
      pack_without(pk, kv.key, drop);
      pack_without(pk, kv.val, drop);
    }
  } else {
    pk.pack(o);
  }
}

}  // namespace

TEST_CASE("a job array is one entry; each task is handed out once, starts once, and the last ends it",
          "[mesh_state]") {
  MeshState st;
  const std::uint64_t arr = st.apply(array_of(1, 6, 1, 2)).job;
  REQUIRE(st.job(arr)->is_array());
  CHECK(st.data().jobs.size() == 1);  // 6 tasks, one job until they are handed out
  CHECK(st.apply(started(arr, 1, 1, 1)).reason == "job 1 is a job array: its tasks run, never the array itself");
  mesh::Entry e = mesh::decode_entry(mesh::encode_entry(mesh::TasksHanded{arr, -1, 2}));
  CHECK(mesh::kind_name(e) == "tasks_handed");
  REQUIRE(st.apply(e).ok);
  CHECK(tasks_of(st, arr) == std::map<std::int64_t, std::uint64_t>{{1, 2}, {2, 3}});
  CHECK(st.live_tasks(arr) == std::set<std::uint64_t>{2, 3});
  CHECK(st.job(2)->array_id == arr);
  CHECK(st.job(2)->spec.array.on());
  CHECK_FALSE(st.job(2)->is_array());
  // Task 5 ahead of its turn; named again it is the same task.
  CHECK(st.apply(mesh::TasksHanded{arr, 5, 0}).job == 4);
  CHECK(st.apply(mesh::TasksHanded{arr, 5, 0}).job == 4);
  CHECK(st.data().next_id == 5);
  CHECK(st.apply(mesh::TasksHanded{arr, 7, 0}).reason == "1[7]: array 1 has no task 7 (its tasks: 1-6)");
  CHECK(st.apply(mesh::TasksHanded{2, -1, 1}).reason == "job 2 is not a job array");
  CHECK(st.apply(mesh::TasksHanded{arr, -1, 0}).reason == "no tasks to hand out");
  // A task starts once, as a job does.
  REQUIRE(st.apply(started(2, 1, 1, 1)).ok);
  CHECK(st.apply(started(2, 1, 1, 2)).reason == "job 2 is running, not pending");
  CHECK(st.apply(started(2, 2, 1, 3)).reason == "job 2 is running, not pending");
  // The rest in index order, task 5 skipped: 3, 4, 6.
  REQUIRE(st.apply(mesh::TasksHanded{arr, -1, 10}).ok);
  CHECK(tasks_of(st, arr) == std::map<std::int64_t, std::uint64_t>{{1, 2}, {2, 3}, {3, 5}, {4, 6}, {5, 4}, {6, 7}});
  CHECK(st.job(arr)->array_handed == 6);
  CHECK(st.apply(mesh::TasksHanded{arr, -1, 1}).ok);  // nothing left: no new task
  CHECK(st.data().next_id == 8);

  // The snapshot carries the array and its tasks; the copy refuses what the original refuses.
  MeshState copy;
  copy.restore(st.snapshot());
  CHECK(copy.snapshot() == st.snapshot());
  CHECK(tasks_of(copy, arr) == tasks_of(st, arr));
  CHECK(copy.live_tasks(arr) == st.live_tasks(arr));
  CHECK(copy.apply(started(2, 1, 1, 4)).reason == "job 2 is running, not pending");
  CHECK(copy.apply(mesh::TasksHanded{arr, 3, 0}).job == 5);

  // Task 2 cancelled while waiting: the array ends failed once its last task ends, in that entry.
  REQUIRE(st.apply(mesh::JobEnded{3, 0, "cancelled", -1, 300}).ok);
  REQUIRE(st.apply(mesh::JobEnded{2, 1, "completed", 0, 310}).ok);
  std::uint64_t decision = 10;
  for (std::uint64_t t : {4, 5, 6, 7}) {
    REQUIRE(st.apply(started(t, 1, 1, ++decision)).ok);
    CHECK(st.job(arr)->state == "pending");
    REQUIRE(st.apply(mesh::JobEnded{t, 1, "completed", 0, 400.0 + static_cast<double>(t)}).ok);
  }
  const MeshJob& a = *st.job(arr);
  CHECK(a.state == "ended");
  CHECK(a.end_reason == "failed");
  CHECK(a.end_message == "1 of 6 tasks did not complete");
  CHECK(a.end_time == 407);
  CHECK(st.live().empty());
  CHECK(st.live_tasks(arr).empty());
  CHECK(st.apply(mesh::TasksHanded{arr, -1, 1}).reason == "job array 1 has ended (failed): no task of it runs any more");
}

TEST_CASE("an array's cancel ends its waiting tasks and the array once its running ones ended; its hold "
          "holds them; all tasks completed: completed",
          "[mesh_state]") {
  MeshState st;
  const std::uint64_t arr = st.apply(array_of(0, 9, 3, 0)).job;  // tasks 0, 3, 6, 9
  REQUIRE(st.apply(mesh::JobHeld{arr, "user", "alice"}).ok);
  REQUIRE(st.apply(mesh::TasksHanded{arr, -1, 2}).ok);
  for (const auto& task : tasks_of(st, arr)) CHECK(st.job(task.second)->hold == "user");
  REQUIRE(st.apply(mesh::JobHeld{arr, "", "alice"}).ok);
  for (const auto& task : tasks_of(st, arr)) CHECK(st.job(task.second)->hold.empty());
  REQUIRE(st.apply(mesh::JobMoved{arr, "express", "alice"}).ok);
  CHECK(st.job(tasks_of(st, arr).at(3))->spec.queue == "express");
  REQUIRE(st.apply(started(tasks_of(st, arr).at(0), 1, 1, 1)).ok);
  REQUIRE(st.apply(mesh::JobEnded{arr, 0, "cancelled", -1, 50, "cancelled by alice"}).ok);
  const auto t = tasks_of(st, arr);
  CHECK(st.job(t.at(3))->state == "ended");
  CHECK(st.job(t.at(3))->end_message == "ended with its array 1: cancelled by alice");
  CHECK(st.job(t.at(0))->state == "running");  // its node stops it
  CHECK(st.live_tasks(arr) == std::set<std::uint64_t>{t.at(0)});
  // Live, as on a standalone node, until that task ended: ending, handing out nothing more.
  CHECK(st.job(arr)->state == "pending");
  CHECK(st.job(arr)->ending());
  CHECK(st.live().count(arr) == 1);
  CHECK(st.apply(mesh::TasksHanded{arr, 6, 0}).reason == "job array 1 is ending (cancelled): no task of it runs any more");
  CHECK(st.apply(mesh::TasksHanded{arr, -1, 1}).reason == "job array 1 is ending (cancelled): no task of it runs any more");
  CHECK(st.apply(mesh::JobEnded{arr, 0, "cancelled", -1, 50, "cancelled by bob"}).reason ==
        "job array 1 is ending (cancelled): its running tasks are being stopped");
  CHECK(st.apply(mesh::JobHeld{arr, "user", "alice"}).reason == "job array 1 is ending (cancelled), not pending");
  CHECK(st.apply(mesh::JobMoved{arr, "normal", "alice"}).reason == "job array 1 is ending (cancelled), not pending");
  {  // a snapshot taken meanwhile ends it the same way
    MeshState copy;
    copy.restore(st.snapshot());
    CHECK(copy.job(arr)->ending());
    REQUIRE(copy.apply(mesh::JobEnded{t.at(0), 1, "cancelled", -1, 51}).ok);
    CHECK(copy.job(arr)->state == "ended");
  }
  REQUIRE(st.apply(mesh::JobEnded{t.at(0), 1, "cancelled", -1, 51}).ok);
  CHECK(st.job(arr)->state == "ended");
  CHECK_FALSE(st.job(arr)->ending());
  CHECK(st.job(arr)->end_reason == "cancelled");  // the cancel's, not its last task's
  CHECK(st.job(arr)->end_message == "cancelled by alice");
  CHECK(st.job(arr)->end_time == 51);
  CHECK(st.job(arr)->array_failed == 0);  // a task stopped by the cancel did not fail
  CHECK(st.live().count(arr) == 0);
  CHECK(st.apply(mesh::TasksHanded{arr, 6, 0}).reason == "job array 1 has ended (cancelled): no task of it runs any more");

  // No task running: the cancel ends the array at once.
  const std::uint64_t idle = st.apply(array_of(1, 3, 1, 0)).job;
  REQUIRE(st.apply(mesh::TasksHanded{idle, -1, 1}).ok);
  REQUIRE(st.apply(mesh::JobEnded{idle, 0, "cancelled", -1, 52, "cancelled by alice"}).ok);
  CHECK(st.job(idle)->state == "ended");
  CHECK(st.job(idle)->end_time == 52);

  const std::uint64_t ok = st.apply(array_of(1, 2, 1, 0)).job;
  REQUIRE(st.apply(mesh::TasksHanded{ok, -1, 64}).ok);
  std::uint64_t decision = 1;
  for (const auto& task : tasks_of(st, ok)) {
    REQUIRE(st.apply(started(task.second, 1, 1, ++decision)).ok);
    REQUIRE(st.apply(mesh::JobEnded{task.second, 1, "completed", 0, 60}).ok);
  }
  CHECK(st.job(ok)->end_reason == "completed");
  CHECK(st.job(ok)->end_message == "all 2 tasks completed");
}

TEST_CASE("a snapshot written before arrays existed still loads", "[mesh_state]") {
  MeshState st;
  st.apply(accepted("a"));
  st.apply(accepted("b"));
  st.apply(started(1, 1, 1, 1));
  st.apply(mesh::JobEnded{2, 0, "cancelled", -1, 5});
  const std::string now = st.snapshot();
  msgpack::object_handle oh = msgpack::unpack(now.data(), now.size());
  msgpack::sbuffer old;
  msgpack::packer<msgpack::sbuffer> pk(old);
  pack_without(pk, oh.get(),
               {"array_id", "array_index", "array_next", "array_ahead", "array_handed", "array_failed"});
  REQUIRE(old.size() < now.size());
  MeshState copy;
  copy.restore(std::string_view(old.data(), old.size()));
  CHECK(copy.snapshot() == now);
  CHECK(copy.live() == std::set<std::uint64_t>{1});
  CHECK(copy.job(1)->array_id == 0);
  CHECK(copy.apply(mesh::JobEnded{1, 1, "completed", 0, 9}).ok);
}

TEST_CASE("a snapshot restores the whole state; bad bytes change nothing", "[mesh_state]") {
  MeshState st;
  for (int i = 0; i < 5; ++i) st.apply(accepted("t" + std::to_string(i)));
  st.apply(started(2, 1, 4, 7, {"n1", "n3"}));
  st.apply(mesh::JobEnded{3, 0, "cancelled", -1, 1});
  st.apply(mesh::NodeAdmin{"n4", "drain", ""});
  st.apply(mesh::GrantSet{"p", "q", 5});
  st.apply(mesh::Charge{2, 1, "p", "q", 1});
  st.apply(mesh::AllocationSet{"p", "w", 3});

  std::string snap = st.snapshot();
  MeshState copy;
  copy.restore(snap);
  CHECK(copy.snapshot() == snap);
  // The restored state goes on exactly as the original.
  CHECK(copy.apply(accepted()).job == st.apply(accepted()).job);
  CHECK(copy.apply(accepted("t1")).job == 2);
  CHECK(copy.apply(started(4, 1, 4, 7)).reason == "decision 7 of term 4 already applied");

  CHECK_THROWS_AS(copy.restore("nonsense"), proto::ProtoError);
  CHECK_THROWS_AS(copy.restore(proto::mesh::encode_entry(accepted())), proto::ProtoError);
  CHECK(copy.data().jobs.size() == 6);
}

TEST_CASE("link messages: each kind survives its bytes; raft's bytes and bad ones are not taken",
          "[mesh_state]") {
  namespace link = corral::proto::link;
  auto back = [](const link::Message& m) { return link::decode(link::encode(m)); };
  auto h = std::get<link::Hello>(back(link::Hello{"rack1", 1001, "node7", "10.0.0.7:7470"}));
  CHECK(h.id == 1001);
  CHECK(h.address == "10.0.0.7:7470");
  auto n = std::get<link::NodeEvent>(back(link::NodeEvent{"rack1", 2, 77, 1, 16, 64000, 500}));
  CHECK(n.incarnation == 77);
  CHECK(n.cores == 16);
  CHECK(n.jobfs_mb == 500);
  auto j = std::get<link::JobsEvent>(back(link::JobsEvent{"rack1", 2, 77, 2, {7, 9}}));
  CHECK(j.seq == 2);
  CHECK(j.running == std::vector<std::uint64_t>{7, 9});
  auto b =
      std::get<link::Heartbeat>(back(link::Heartbeat{"rack1", 2, 77, 2, "node2", "10.0.0.2:7470", "follower", 4, 12}));
  CHECK(b.seq == 2);
  CHECK(b.name == "node2");
  CHECK(b.commit_index == 12);
  auto rm = std::get<link::Removed>(back(link::Removed{"rack1", 1001, "node7", "node2"}));
  CHECK((rm.mesh == "rack1" && rm.id == 1001 && rm.name == "node7" && rm.by == "node2"));
  auto a = std::get<link::SnapshotAsk>(back(link::SnapshotAsk{"rack1", 3, "10.0.0.3:7470"}));
  CHECK(a.address == "10.0.0.3:7470");
  auto s = std::get<link::Snapshot>(
      back(link::Snapshot{"rack1", 2, 77, 2, "node2", "10.0.0.2:7470", "leader", 4, 12, 16, 64000, 0, {7, 9}}));
  CHECK(s.state == "leader");
  CHECK(s.cores == 16);
  CHECK(s.running == std::vector<std::uint64_t>{7, 9});

  std::string bytes = link::encode(link::Heartbeat{});
  CHECK(link::is_link(bytes));
  CHECK_FALSE(link::is_link(mesh::encode_entry(mesh::NodeAdmin{"n1", "drain", "x"})));
  CHECK_FALSE(link::is_link(""));
  CHECK_THROWS_WITH(link::decode(bytes.substr(0, bytes.size() - 3)), Catch::Contains("not a link message"));
  // Version 1 (every report in a hello) is refused, saying so.
  std::string v1 = bytes;
  v1[2 + link::kMagic.size()] = 1;
  CHECK_THROWS_WITH(link::decode(v1), Catch::Contains("of another version"));
}

TEST_CASE("link: a member publishes on its listen port + 1", "[mesh_state]") {
  namespace link = corral::proto::link;
  CHECK(link::publish_address("10.0.0.2:7470") == "10.0.0.2:7471");
  CHECK(link::publish_address("127.0.0.1:65534") == "127.0.0.1:65535");
  CHECK(link::publish_address("127.0.0.1:65535").empty());
  CHECK(link::publish_address("10.0.0.2").empty());
  CHECK(link::publish_address("10.0.0.2:x").empty());
  CHECK(link::publish_address("10.0.0.2:").empty());
}

TEST_CASE("jobs messages: each kind survives its bytes; other messages and bad bytes are not taken",
          "[mesh_state]") {
  namespace jobs = corral::proto::jobs;
  namespace link = corral::proto::link;
  jobs::Forward f{"rack1", 2, 7, mesh::encode_entry(accepted("n2/1")), {}};
  std::string bytes = jobs::encode(f);
  CHECK(jobs::is_jobs(bytes));
  CHECK_FALSE(link::is_link(bytes));
  auto fb = std::get<jobs::Forward>(jobs::decode(bytes));
  CHECK(fb.request == 7);
  CHECK(std::get<mesh::JobAccepted>(mesh::decode_entry(fb.entry)).token == "n2/1");
  CHECK(fb.cancel.job == 0);

  jobs::StartJob s{"rack1", 1, 5, 4, 3, 12, 2, {"n3"}, accepted()};
  auto sb = std::get<jobs::StartJob>(jobs::decode(jobs::encode(s)));
  CHECK(sb.term == 5);
  CHECK(sb.decided_term == 4);
  CHECK(sb.run == 2);
  CHECK(sb.nodes == std::vector<std::string>{"n3"});
  CHECK(sb.spec.spec.name == "run1");
  CHECK(sb.spec.uid == 1000);

  jobs::CancelJob x{"rack1", 1, 5, 12, 2, "alice"};
  CHECK(std::get<jobs::CancelJob>(jobs::decode(jobs::encode(x))).who == "alice");
  jobs::ForwardAck a{"rack1", 1, 7, "refused", 12, 0, "job 12 belongs to bob", "permission"};
  CHECK(std::get<jobs::ForwardAck>(jobs::decode(jobs::encode(a))).code == "permission");
  CHECK(std::get<jobs::ExecAlive>(jobs::decode(jobs::encode(jobs::ExecAlive{"rack1", 2, 9}))).request == 9);
  auto cb = std::get<jobs::ExecCancel>(jobs::decode(jobs::encode(jobs::ExecCancel{"rack1", 2, 9, "its caller went away"})));
  CHECK(cb.request == 9);
  CHECK(cb.why == "its caller went away");
  auto ci = std::get<jobs::ExecInput>(jobs::decode(jobs::encode(jobs::ExecInput{"rack1", 2, 9, "x\n", true})));
  CHECK(ci.request == 9);
  CHECK(ci.data == "x\n");
  CHECK(ci.eof);
  jobs::ExecStart xs{"rack1", 2, 9, 12, 1, "n2", "cat", "alice", true};
  CHECK(std::get<jobs::ExecStart>(jobs::decode(jobs::encode(xs))).input);

  CHECK_FALSE(jobs::is_jobs(link::encode(link::Hello{})));
  CHECK_FALSE(jobs::is_jobs(mesh::encode_entry(mesh::NodeAdmin{"n1", "drain", "x"})));
  CHECK_FALSE(jobs::is_jobs(""));
  CHECK_THROWS_WITH(jobs::decode(bytes.substr(0, bytes.size() - 3)), Catch::Contains("not a jobs message"));
}
