#include "coordinator/service/voter_change.hpp"

#include <algorithm>

namespace corral::service {

namespace {

struct Count {
  std::size_t voters = 0, live = 0;
};

Count voters_of(const std::vector<Member>& ms, const std::set<std::uint64_t>& live) {
  Count c;
  for (const Member& m : ms)
    if (m.role == Role::voter) {
      ++c.voters;
      c.live += live.count(m.id);
    }
  return c;
}

const Member* find(const std::vector<Member>& ms, std::uint64_t id) {
  for (const Member& m : ms)
    if (m.id == id) return &m;
  return nullptr;
}

std::string up_of(std::size_t live, std::size_t voters) {
  return std::to_string(live) + " of " + std::to_string(voters) + " voters up, not a majority";
}

}  // namespace

std::string promote_refusal(const std::vector<Member>& ms, std::uint64_t id, const std::string& name,
                            const std::set<std::uint64_t>& live) {
  const Member* m = find(ms, id);
  if (!m) return name + " is not in the mesh's raft configuration (a member is, once `corral mesh` lists it)";
  if (m->role == Role::voter) return "";
  if (!live.count(id)) return name + " is not up (stopping, or not heard from lately): only a member that is up becomes a voter";
  Count c = voters_of(ms, live);
  if (c.voters + 1 > kMaxVoters)
    return "the mesh has " + std::to_string(c.voters) + " voters already (at most " + std::to_string(kMaxVoters) +
           "): remove one first";
  if (2 * (c.live + 1) <= c.voters + 1) return "promoting " + name + " would leave " + up_of(c.live + 1, c.voters + 1);
  return "";
}

std::string handover_refusal(const std::vector<Member>& ms, std::uint64_t id, const std::string& name,
                             std::uint64_t leader, const std::set<std::uint64_t>& live) {
  const Member* m = find(ms, id);
  if (!m) return "no voter '" + name + "' in the mesh's raft configuration";
  if (id == leader) return name + " is the coordinator already";
  if (m->role != Role::voter) return name + " is not a voter: only a voter can coordinate (corral mesh promote " + name + ")";
  if (!live.count(id)) return name + " is not up (stopping, or not heard from lately)";
  return "";
}

std::vector<std::uint64_t> handover_candidates(const std::vector<Member>& ms, std::uint64_t leader,
                                               const std::set<std::uint64_t>& live) {
  std::vector<std::uint64_t> ids;
  for (const Member& m : ms)
    if (m.role == Role::voter && m.id != leader && live.count(m.id)) ids.push_back(m.id);
  std::sort(ids.begin(), ids.end());
  return ids;
}

std::string voter_remove_refusal(const std::vector<Member>& ms, std::uint64_t id, const std::string& name,
                                 std::uint64_t leader, const std::set<std::uint64_t>& live) {
  const Member* m = find(ms, id);
  if (!m || m->role != Role::voter) return "";
  if (id == leader) return name + " is the coordinator: stop its corrald (another voter takes over), then remove it";
  Count c = voters_of(ms, live);
  const std::size_t after = c.voters - 1, live_after = c.live - live.count(id);
  if (after < kMinVoters)
    return "removing " + name + " would leave " + std::to_string(after) + " voters (at least " +
           std::to_string(kMinVoters) + "): promote a member first (corral mesh promote NODE)";
  if (2 * live_after <= after)
    return "removing " + name + " would leave " + up_of(live_after, after) + ": bring a voter back or promote a member first";
  return "";
}

void VoterChange::promote(std::uint64_t id, const std::string& name, const std::set<std::uint64_t>& live, Done done) {
  if (busy_) return done(false, "another change of the voters is under way: try again once it is done");
  std::vector<Member> ms = c_.members();
  if (std::string why = promote_refusal(ms, id, name, live); !why.empty()) return done(false, why);
  if (find(ms, id)->role == Role::voter) return done(true, name + " is a voter already");
  run(name, "is a voter", std::move(done), [this, id](Consensus::DoneCb cb) { c_.assign(id, Role::voter, std::move(cb)); });
}

void VoterChange::remove(std::uint64_t id, const std::string& name, const std::set<std::uint64_t>& live, Done done) {
  if (busy_) return done(false, "another change of the voters is under way: try again once it is done");
  std::vector<Member> ms = c_.members();
  const Member* m = find(ms, id);
  if (!m || m->role != Role::voter) return done(false, name + " is not a voter");
  if (std::string why = voter_remove_refusal(ms, id, name, c_.id(), live); !why.empty()) return done(false, why);
  run(name, "no longer votes", std::move(done), [this, id](Consensus::DoneCb cb) { c_.remove(id, std::move(cb)); });
}

void VoterChange::run(const std::string& name, const std::string& did, Done done,
                      const std::function<void(Consensus::DoneCb)>& change) {
  busy_ = true;
  change([this, alive = alive_, name, did, done = std::move(done)](Status s) {
    if (*alive) busy_ = false;
    if (s == Status::ok) return done(true, name + " " + did);
    done(false, "the raft configuration did not change (" + std::string(status_name(s)) + "): " + name +
                    " did not catch up with the log, another configuration change was under way, or the"
                    " coordinator changed; try again");
  });
}

}  // namespace corral::service
