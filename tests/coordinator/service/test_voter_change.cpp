// Who votes, changed one step at a time (coordinator/service/voter_change.hpp) on libraft over
// the deterministic simulated network: a dead voter replaced by promoting a member and
// removing the dead one, and every change that would break the majority refused.
#include <catch2/catch.hpp>

#include <set>

#include "coordinator/service/member_admit.hpp"
#include "coordinator/service/voter_change.hpp"
#include "sim_cluster.hpp"

using namespace corral;
using namespace corral_test;
namespace mesh = corral::proto::mesh;

namespace {

std::set<std::uint64_t> live_of(const SimCluster& c) {
  std::set<std::uint64_t> live;
  for (const auto& s : c.slots)
    if (s.node) live.insert(s.id);
  return live;
}

std::size_t voters_in(const std::vector<Member>& ms) {
  std::size_t n = 0;
  for (const Member& m : ms) n += m.role == Role::voter;
  return n;
}

struct Answer {
  bool done = false, ok = false;
  std::string message;
  VoterChange::Done cb() {
    return [this](bool o, const std::string& m) {
      done = true;
      ok = o;
      message = m;
    };
  }
};

// The message of change `a`, refused within 1 s of simulated time.
std::string refused(SimCluster& c, const Answer& a) {
  REQUIRE(c.net.run_until([&] { return a.done; }, 1000));
  CHECK_FALSE(a.ok);
  return a.message;
}

// Entry `token` committed by the leader of c within 5 s of simulated time.
bool commits(SimCluster& c, const std::string& token) {
  if (!c.net.run_until([&] { return c.leader() >= 0; }, 5000)) return false;
  mesh::JobAccepted a;
  a.token = token;
  Status got = Status::error;
  bool answered = false;
  c.slots[static_cast<unsigned>(c.leader())].node->propose(mesh::encode_entry(a), [&](const Proposed& p) {
    got = p.status;
    answered = true;
  });
  return c.net.run_until([&] { return answered; }, 5000) && got == Status::ok;
}

}  // namespace

TEST_CASE("voters: a dead voter is replaced by promoting a member, then removed; what breaks the majority is refused",
          "[voter_change]") {
  SimCluster c(11, 3);
  REQUIRE(commits(c, "first"));
  const unsigned l = static_cast<unsigned>(c.leader());
  Consensus& lead = *c.slots[l].node;
  MemberAdmit admit(lead, [](const std::string&) {});
  std::vector<unsigned> joined;
  for (int k = 0; k < 2; ++k) {  // two members, admitted as standbys from their hellos
    unsigned j = c.join();
    joined.push_back(j);
    const std::string addr = "n" + std::to_string(c.slots[j].id);
    REQUIRE(c.net.run_until([&] {
      admit.heard(c.slots[j].id, addr, addr);  // a hello, again until it is in
      std::vector<Member> ms = lead.members();
      return ms.size() == 3 + joined.size() && ms.back().role == Role::standby;
    }, 5000));
  }
  REQUIRE(commits(c, "admitted"));  // the last admission's change is committed
  const unsigned dead = (l + 1) % 3, other = (l + 2) % 3, mem = joined[0], down = joined[1];
  c.crash(dead);
  c.crash(down);
  VoterChange change(lead);

  // Removing the dead voter first would leave 2 voters; a member that is down is not promoted.
  Answer early;
  change.remove(c.slots[dead].id, "dead", live_of(c), early.cb());
  CHECK(refused(c, early).find("would leave 2 voters (at least 3)") != std::string::npos);
  Answer asleep;
  change.promote(c.slots[down].id, "down", live_of(c), asleep.cb());
  CHECK(refused(c, asleep).find("is not up") != std::string::npos);

  // Promote the member (a second change meanwhile is refused), then remove the dead voter.
  Answer up, twice;
  change.promote(c.slots[mem].id, "mem", live_of(c), up.cb());
  change.promote(c.slots[mem].id, "mem", live_of(c), twice.cb());
  CHECK(twice.done);
  CHECK_FALSE(twice.ok);
  CHECK(twice.message.find("under way") != std::string::npos);
  REQUIRE(c.net.run_until([&] { return up.done; }, 5000));
  INFO(up.message);
  REQUIRE(up.ok);
  CHECK(voters_in(lead.members()) == 4);
  Answer self;
  change.remove(lead.id(), "lead", live_of(c), self.cb());
  CHECK(refused(c, self).find("is the coordinator") != std::string::npos);
  Answer gone;
  change.remove(c.slots[dead].id, "dead", live_of(c), gone.cb());
  REQUIRE(c.net.run_until([&] { return gone.done; }, 5000));
  INFO(gone.message);
  REQUIRE(gone.ok);
  std::vector<Member> ms = lead.members();
  CHECK(voters_in(ms) == 3);
  for (const Member& m : ms) CHECK(m.id != c.slots[dead].id);

  // The old leader (an original voter) dies too: the other original voter and the promoted
  // member are a majority of 3, elect a coordinator and commit. Without the promotion the
  // other voter would be alone.
  c.crash(l);
  REQUIRE(commits(c, "after"));
  const int nl = c.leader();
  CHECK((static_cast<unsigned>(nl) == other || static_cast<unsigned>(nl) == mem));
  CHECK(c.net.run_until([&] { return c.slots[mem].fsm->state().data().jobs.size() == 3; }, 5000));
}

TEST_CASE("voters: the rules of a change, on configurations with voters down", "[voter_change]") {
  std::vector<Member> five;
  for (std::uint64_t id = 1; id <= 5; ++id) five.push_back(Member{id, "n" + std::to_string(id), Role::voter});
  five.push_back(Member{1001, "m", Role::standby});
  // 1, 2, 3 up; 4 and 5 down: removing an up voter leaves 2 of 4 up.
  const std::set<std::uint64_t> live{1, 2, 3, 1001};
  CHECK(voter_remove_refusal(five, 3, "n3", 1, live).find("2 of 4 voters up, not a majority") != std::string::npos);
  CHECK(voter_remove_refusal(five, 5, "n5", 1, live).empty());  // a dead one: 3 of 4 up
  CHECK(voter_remove_refusal(five, 1001, "m", 1, live).empty());  // no voter: the member rules only
  CHECK(promote_refusal(five, 1001, "m", live).empty());          // 4 of 6 up
  CHECK(promote_refusal(five, 1001, "m", {1, 2, 1001}).find("3 of 6 voters up") != std::string::npos);
  CHECK(promote_refusal(five, 77, "x", live).find("not in the mesh's raft configuration") != std::string::npos);
  CHECK(handover_refusal(five, 2, "n2", 1, live).empty());
  CHECK(handover_refusal(five, 1, "n1", 1, live) == "n1 is the coordinator already");
  CHECK(handover_refusal(five, 1001, "m", 1, live).find("m is not a voter") == 0);
  CHECK(handover_refusal(five, 4, "n4", 1, live) == "n4 is not up (stopping, or not heard from lately)");
  CHECK(handover_refusal(five, 77, "x", 1, live).find("no voter 'x'") == 0);
  // Naming none: the live voters but the leader (n4, n5 down; m no voter), in id order.
  CHECK(handover_candidates(five, 1, live) == std::vector<std::uint64_t>{2, 3});
  CHECK(handover_candidates(five, 2, live) == std::vector<std::uint64_t>{1, 3});
  CHECK(handover_candidates(five, 1, {1, 1001}).empty());
  five.push_back(Member{1002, "m2", Role::voter});
  five.push_back(Member{1003, "m3", Role::standby});
  CHECK(promote_refusal(five, 1003, "m3", {1, 2, 3, 1001, 1002, 1003}).find("6 voters already") != std::string::npos);
}
