// Three real libraft members in one process, their raft messages over
// ZeroMQ on loopback TCP (127.0.0.1, free ports): election, replication, and
// failover after the leader is killed.
#include <catch2/catch.hpp>

#include <sstream>

#include "coordinator/service/loopback_mesh.hpp"

using namespace corral;
using namespace corral::service;
namespace mesh = corral::proto::mesh;

TEST_CASE("loopback: elect, replicate, kill the leader, the new one has every committed entry",
          "[raft_loopback]") {
  LoopbackMesh m(3);
  std::uint64_t t0 = m.loop.now_ms();
  REQUIRE(m.loop.run_until([&] { return m.leader() >= 0; }, 10000));
  std::uint64_t elected_ms = m.loop.now_ms() - t0;
  unsigned l = static_cast<unsigned>(m.leader());

  std::vector<std::uint64_t> ids;
  for (int i = 0; i < 50; ++i) {
    mesh::JobAccepted a;
    a.token = "t" + std::to_string(i);
    m.members[l].node->propose(mesh::encode_entry(a), [&](const Proposed& p) {
      if (p.status == Status::ok) ids.push_back(p.applied.value);
    });
  }
  REQUIRE(m.loop.run_until([&] { return ids.size() == 50; }, 10000));
  CHECK(ids.back() == 50);

  std::uint64_t old_term = m.members[l].node->term();
  std::uint64_t killed = m.loop.now_ms();
  m.kill(l);
  REQUIRE(m.loop.run_until([&] { return m.leader() >= 0; }, 10000));
  std::uint64_t failover_ms = m.loop.now_ms() - killed;
  unsigned nl = static_cast<unsigned>(m.leader());
  CHECK(m.members[nl].node->term() > old_term);
  bool barrier = false;
  m.members[nl].node->barrier([&](Status s) { barrier = s == Status::ok; });
  REQUIRE(m.loop.run_until([&] { return barrier; }, 10000));
  const MeshState& st = m.members[nl].fsm->state();
  CHECK(st.data().jobs.size() == 50);
  CHECK(st.data().next_id == 51);
  // The surviving follower holds the same state.
  unsigned other = 3 - l - nl;
  REQUIRE(m.loop.run_until(
      [&] { return m.members[other].node->last_applied() == m.members[nl].node->last_applied(); },
      5000));
  CHECK(m.members[other].fsm->snapshot() == m.members[nl].fsm->snapshot());

  std::ostringstream out;
  out << "loopback: first election " << elected_ms << " ms, new leader " << failover_ms
      << " ms after the kill";
  WARN(out.str());  // figures only: bench/raft_failover measures them; raft_sim pins the timeouts
}
