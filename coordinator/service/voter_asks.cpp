// `corral mesh promote NODE`: a member that is up becomes a voter (VoterChange: one raft
// configuration change, refused when it would leave the live voters short of a majority).
// With `corral mesh remove` of a dead voter (member_remove.cpp) it replaces that voter.
#include "coordinator/service/coordinator_loop.hpp"
#include "proto/mesh_link.hpp"

namespace corral::service {

std::uint64_t CoordinatorLoop::member_of(const std::string& node) const {
  if (auto r = nodes_.find(node); r != nodes_.end()) return r->second.member;
  if (auto h = heard_ids_.find(node); h != heard_ids_.end()) return h->second;
  return proto::link::member_id_of(node);
}

std::set<std::uint64_t> CoordinatorLoop::live_members() const {
  std::set<std::uint64_t> live{c_.id()};
  const std::uint64_t now = env_.now_ms();
  for (const auto& [name, r] : nodes_)
    if (now - r.at_ms <= kNodeStaleMs && !r.stopping) live.insert(r.member);
  return live;
}

void CoordinatorLoop::promote_ask(const proto::jobs::CancelAsk& ask, const JobDesk::Done& done) {
  auto refuse = [&done](std::string why, std::string code) { done(DeskAnswer{"refused", 0, 0, std::move(why), std::move(code)}); };
  if (!ask.admin) return refuse("only root or an operator may promote a node", "permission");
  if (removed(ask.node)) return refuse(ask.node + " was removed from the mesh (corral undrain " + ask.node + " lets it in again)", "invalid");
  const std::uint64_t id = member_of(ask.node);
  bool member = false;
  for (const Member& m : c_.members()) member = member || m.id == id;
  if (!member && !nodes_.count(ask.node) && !heard_of_.count(ask.node))
    return refuse("no node '" + ask.node + "' in mesh " + mesh_, "not_found");
  voters_.promote(id, ask.node, live_members(), [done](bool ok, const std::string& message) {
    done(ok ? DeskAnswer{"ok", 0, 0, message, ""} : DeskAnswer{"refused", 0, 0, message, "invalid"});
  });
}

std::string CoordinatorLoop::name_of(std::uint64_t member) const {
  for (const auto& [name, id] : heard_ids_)
    if (id == member) return name;
  for (const auto& [name, r] : nodes_)
    if (r.member == member) return name;
  return "member " + std::to_string(member);
}

// `corral mesh handover [NODE]`: this coordinator hands its role to NODE, a voter that is up
// (none named: each voter that is up, in turn), e.g. before its machine goes down for
// maintenance; corrald asks it of itself on SIGTERM.
void CoordinatorLoop::handover_ask(const proto::jobs::CancelAsk& ask, const JobDesk::Done& done) {
  auto refuse = [&done](std::string why, std::string code) { done(DeskAnswer{"refused", 0, 0, std::move(why), std::move(code)}); };
  if (!ask.admin) return refuse("only root or an operator may hand the coordinator over", "permission");
  const std::vector<Member> ms = c_.members();
  std::vector<std::uint64_t> ids;
  if (!ask.node.empty()) {
    const std::uint64_t id = member_of(ask.node);
    bool member = false;
    for (const Member& m : ms) member = member || m.id == id;
    if (!member) return refuse("no voter '" + ask.node + "' in mesh " + mesh_, "not_found");
    if (std::string why = handover_refusal(ms, id, ask.node, c_.id(), live_members()); !why.empty())
      return refuse(why, "invalid");
    ids.push_back(id);
  } else {
    ids = handover_candidates(ms, c_.id(), live_members());
    if (ids.empty()) return refuse("no other voter is up to take over", "invalid");
  }
  hand_over(std::move(ids), 0, 3, done);
}

// A target still writing entries ignores the leader's TimeoutNow, and the transfer ends
// unchanged after an election timeout: asked again, of the next candidate, up to `tries` times.
void CoordinatorLoop::hand_over(std::vector<std::uint64_t> ids, std::size_t next, int tries, const JobDesk::Done& done) {
  const std::uint64_t id = ids[next % ids.size()];
  c_.transfer(id, [this, alive = alive_, ids = std::move(ids), next, tries, done, from = c_.id()](Status s) mutable {
    if (!*alive) return;
    if (s != Status::ok)
      return done(DeskAnswer{"refused", 0, 0, s == Status::error ? "no other voter is up to take over" : std::string(status_name(s)), "invalid"});
    const std::uint64_t now = c_.leader_id();
    if (now != from && now != 0) return done(DeskAnswer{"ok", 0, 0, name_of(now), ""});
    if (now == from && tries > 1 && c_.is_leader()) return hand_over(std::move(ids), next + 1, tries - 1, done);
    done(DeskAnswer{"error", 0, 0, "no voter took over within an election timeout; " + std::string(now ? "this node still coordinates" : "an election is under way"), ""});
  });
}

}  // namespace corral::service
