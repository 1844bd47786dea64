// Who votes, changed by an operator (`corral mesh promote NODE`, `corral mesh remove VOTER`):
// one raft configuration change at a time, each refused when it would leave fewer than
// kMinVoters voters or a configuration whose live voters are not a majority of its voters
// (the change itself commits under the new configuration, and so does everything after it).
// A dead voter is replaced by two steps: promote a member (4 voters, 3 of them live), then
// remove the dead voter. libraft brings a promoted standby up to date with the log before
// the configuration that makes it a voter is appended (it gives up after a few rounds).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "coordinator/service/consensus.hpp"

namespace corral::service {

inline constexpr std::size_t kMinVoters = 3;
inline constexpr std::size_t kMaxVoters = 6;  // 5 and the member that replaces one of them

// Why member `id` (called `name`) may not become a voter of configuration `ms` ("" when it
// may); `live`: the members heard from lately, this one included.
std::string promote_refusal(const std::vector<Member>& ms, std::uint64_t id, const std::string& name,
                            const std::set<std::uint64_t>& live);
// Why member `id` (called `name`, in configuration `ms`) may not take over from coordinator
// `leader` ("" when it may): it must be a voter other than the leader, and live.
std::string handover_refusal(const std::vector<Member>& ms, std::uint64_t id, const std::string& name,
                             std::uint64_t leader, const std::set<std::uint64_t>& live);
// The voters a handover naming none tries, in turn: the live ones other than `leader`, in id
// order (libraft's own pick, the most up to date, may be a voter that has just died).
std::vector<std::uint64_t> handover_candidates(const std::vector<Member>& ms, std::uint64_t leader,
                                               const std::set<std::uint64_t>& live);
// Why voter `id` may not leave configuration `ms` ("" when it may, or when it is no voter);
// `leader`: the member asking (the coordinator does not remove itself).
std::string voter_remove_refusal(const std::vector<Member>& ms, std::uint64_t id, const std::string& name,
                                 std::uint64_t leader, const std::set<std::uint64_t>& live);

class VoterChange {
 public:
  // ok, and what was done or why not.
  using Done = std::function<void(bool ok, const std::string& message)>;
  explicit VoterChange(Consensus& c) : c_(c) {}
  ~VoterChange() { *alive_ = false; }
  VoterChange(const VoterChange&) = delete;
  VoterChange& operator=(const VoterChange&) = delete;

  // While this member leads: member `id` becomes a voter (already one: ok).
  void promote(std::uint64_t id, const std::string& name, const std::set<std::uint64_t>& live, Done done);
  // While this member leads: voter `id` leaves the raft configuration.
  void remove(std::uint64_t id, const std::string& name, const std::set<std::uint64_t>& live, Done done);

 private:
  void run(const std::string& name, const std::string& did, Done done,
           const std::function<void(Consensus::DoneCb)>& change);

  Consensus& c_;
  bool busy_ = false;  // a change asked here is under way
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace corral::service
