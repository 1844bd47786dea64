// `corral mesh remove NODE`: a member leaves the mesh for good. Only a node drained and running
// nothing, so that no job is lost with it; or drained and down (not heard from for kNodeDownMs
// while this coordinator led): its runs could never end by its word, so they end node_fail (as
// Slurm's NODE_FAIL; the other nodes' shares are then strays, stopped at the next
// reconciliation). The node is first marked removed in the log (MemberAdmit then never adds it
// back, and no start may name it), then taken out of the raft configuration, so the
// coordinator stops replicating to it. An undrain lets it in again. A voter also by
// VoterChange's rules (checked first): at least 3 voters stay, most of them up.
#include "coordinator/names.hpp"
#include "coordinator/service/coordinator_loop.hpp"
#include "proto/mesh_link.hpp"

namespace corral::service {

namespace {

DeskAnswer remove_refused(std::string why, std::string code) { return DeskAnswer{"refused", 0, 0, std::move(why), std::move(code)}; }

}  // namespace

void CoordinatorLoop::remove_ask(const proto::jobs::CancelAsk& ask, const JobDesk::Done& done) {
  if (!ask.admin) return done(remove_refused("only root or an operator may remove a node", "permission"));
  const std::string& node = ask.node;
  auto admin = state_.data().nodes.find(node);
  const std::uint64_t id = member_of(node);
  const Member* member = nullptr;
  std::vector<Member> members = c_.members();
  for (const Member& m : members)
    if (m.id == id) member = &m;
  if (!nodes_.count(node) && !heard_of_.count(node) && admin == state_.data().nodes.end() && !member)
    return done(remove_refused("no node '" + node + "' in mesh " + mesh_, "not_found"));
  const bool voter = member && member->role == Role::voter;
  if (voter)
    if (std::string why = voter_remove_refusal(members, id, node, c_.id(), live_members()); !why.empty())
      return done(remove_refused(why, "invalid"));
  const std::string state = admin == state_.data().nodes.end() ? "" : admin->second.state;
  if (state == proto::mesh::admin::kRemoved && !member) return done(DeskAnswer{"ok", 0, 0, "removed", ""});
  if (!member && !heard_ids_.count(node)) {  // a voter is known by name only once heard: never "removed" by mistake
    std::string unheard;
    for (const Member& m : members) {
      bool heard = false;
      for (const auto& [name, hid] : heard_ids_) heard = heard || hid == m.id;
      if (m.role == Role::voter && !heard && m.id != c_.id()) unheard += (unheard.empty() ? "" : ", ") + std::to_string(m.id);
    }
    if (!unheard.empty())
      return done(remove_refused("this coordinator never heard " + node + ", and never heard voter(s) " + unheard +
                                     " either (corral mesh lists their ids): ask once a coordinator that heard it leads",
                                 "invalid"));
  }
  if (state != proto::mesh::admin::kDrain && state != proto::mesh::admin::kRemoved)
    return done(remove_refused("drain " + node + " first (corral drain " + node + " --reason TEXT) and wait for its jobs",
                               "invalid"));
  if (std::size_t n = state_.jobs_on(node).size(); n > 0) {
    if (!down(node))
      return done(remove_refused(std::to_string(n) + " job(s) still run on " + node +
                                     ": wait for them, or cancel them (a node not heard from for " +
                                     std::to_string(kNodeDownMs / 1000) + " s is removed with its jobs ended node_fail)",
                                 "invalid"));
    end_runs_on(node, ask.who);
  }
  commit(proto::mesh::NodeAdmin{node, std::string(proto::mesh::admin::kRemoved), "removed by " + ask.who}, 0, "removed",
         [this, alive = alive_, id, node, voter, found = member != nullptr, done](const DeskAnswer& a) {
           if (a.status != "ok" || !found || !*alive) return done(a);
           if (voter)
             return voters_.remove(id, node, live_members(), [done](bool ok, const std::string& message) {
               if (ok) return done(DeskAnswer{"ok", 0, 0, "removed", ""});
               done(DeskAnswer{"error", 0, 0, "marked removed, but " + message + " (corral mesh remove again)", ""});
             });
           c_.remove(id, [done](Status st) {
             if (st == Status::ok) return done(DeskAnswer{"ok", 0, 0, "removed", ""});
             done(DeskAnswer{"error", 0, 0,
                             "marked removed, but the raft configuration did not change (" +
                                 std::string(status_name(st)) + "): run corral mesh remove again",
                             ""});
           });
         });
}

bool CoordinatorLoop::down(const std::string& node) const {
  const std::uint64_t now = env_.now_ms();
  if (!ready_ || now - ready_at_ms_ < kNodeDownMs) return false;  // too new a coordinator to tell
  auto it = nodes_.find(node);
  return it == nodes_.end() || now - it->second.at_ms >= kNodeDownMs;
}

// Proposed before the removal's own entry, so the log applies them first; one refused (the job
// ended meanwhile) changes nothing.
void CoordinatorLoop::end_runs_on(const std::string& node, const std::string& who) {
  for (std::uint64_t id : state_.jobs_on(node)) {
    const MeshJob* j = state_.job(id);
    proto::mesh::JobEnded e{id, static_cast<std::int32_t>(j->runs.size()), std::string(name(EndReason::NodeFail)), -1,
                            env_.wall_s(), "node " + node + " was removed while down, by " + who};
    c_.propose(proto::mesh::encode_entry(e), [](const Proposed&) {});
  }
}

}  // namespace corral::service
