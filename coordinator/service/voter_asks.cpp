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
    if (now - r.at_ms <= kNodeStaleMs) live.insert(r.member);
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

}  // namespace corral::service
