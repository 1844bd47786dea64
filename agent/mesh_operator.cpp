// Operator commands through the mesh, the daemon's side: hold, release, qmove, suspend, resume,
// requeue and checkpoint of a job and
// drain and undrain of a node go to the coordinator with the user as this node's local socket
// saw them; the coordinator decides with a standalone node's rules and answers once the change
// is in the replicated log. `corral nodes` lists every node as this member sees the mesh. A
// coordinator told to stop hands its role over first.
#include "agent/daemon.hpp"
#include "agent/local_socket.hpp"
#include "agent/mesh_link.hpp"
#include "proto/spec_check.hpp"

namespace corral::agent {

proto::jobs::CancelAsk mesh_ask(const Peer& p, std::string action) {
  proto::jobs::CancelAsk ask;
  ask.uid = p.uid;
  ask.gid = p.gid;
  ask.admin = p.admin;
  ask.who = user_name(p.uid);
  if (ask.who.empty()) ask.who = std::to_string(p.uid);
  ask.action = std::move(action);
  return ask;
}

void Daemon::mesh_job_admin(Client& c, const proto::ControlReq& r) {
  proto::jobs::CancelAsk ask = mesh_ask(c.peer, r.action);
  ask.job = r.id;
  ask.queue = r.queue;
  std::uint64_t ticket = c.mesh_ticket = ++mesh_tickets_;
  const std::string& a = r.action;
  const bool waits = a == "hold" || a == "release" || a == "qmove";
  const std::string done_text = a == "hold" ? "held" : a == "release" ? "released" : "moved to queue " + r.queue;
  // suspend, resume, requeue and checkpoint: the coordinator says what it did; a requeued job
  // runs until its node has stopped it.
  const std::string state(a == "suspend" ? proto::state::kSuspended : waits ? proto::state::kPending : proto::state::kRunning);
  mesh_->cancel(std::move(ask), [this, fd = c.fd, ticket, id = r.id, done_text, waits, state](const SubmitResult& res) {
    if (res.ok) mesh_answer(fd, ticket, proto::ControlRep{id, state, waits ? done_text : res.message});
    else mesh_answer(fd, ticket, proto::ErrorRep{res.code, res.message});
  });
}

void Daemon::mesh_node_admin(Client& c, const proto::NodeAdminReq& r) {
  namespace na = proto::node_action;
  if (r.action != na::kDrain && r.action != na::kUndrain && r.action != na::kRemove && r.action != na::kPromote &&
      r.action != na::kHandover) {
    send(c, proto::ErrorRep{"invalid", "unknown node action '" + proto::printable(r.action.substr(0, 32)) +
                                           "' (drain, undrain, remove, promote or handover)"});
    return;
  }
  if (!c.peer.admin) {  // also checked by the coordinator: refused here without a round trip
    send(c, proto::ErrorRep{"permission", "only " + admins() + " may " +
                                              (r.action == na::kHandover ? "hand the coordinator over" : r.action + " a node")});
    return;
  }
  proto::jobs::CancelAsk ask = mesh_ask(c.peer, r.action);
  ask.node = r.node;
  ask.reason = r.reason;
  std::uint64_t ticket = c.mesh_ticket = ++mesh_tickets_;
  const std::string state = r.action == na::kDrain      ? std::string(proto::node_state::kDrained)
                            : r.action == na::kRemove   ? "removed"
                            : r.action == na::kPromote  ? "voter"
                            : r.action == na::kHandover ? "coordinator"
                                                        : std::string(proto::node_state::kUp);
  mesh_->cancel(std::move(ask), [this, fd = c.fd, ticket, r, state](const SubmitResult& res) {
    // A handover answers with the node that took over (the one named, or the one chosen).
    const std::string node = r.action == na::kHandover ? res.message : r.node;
    if (res.ok) mesh_answer(fd, ticket, proto::NodeAdminRep{node, state, r.action == na::kDrain ? r.reason : ""});
    else mesh_answer(fd, ticket, proto::ErrorRep{res.code, res.message});
  });
}

bool Daemon::mesh_leave() {
  if (!mesh_ || mesh_->status().state != "leader") return false;
  log_line("shutting down: handing the coordinator over to another voter first");
  leave_by_ = mono_now() + kLeaveS;
  proto::jobs::CancelAsk ask;
  ask.admin = true;
  ask.who = "corrald";
  ask.action = proto::node_action::kHandover;
  mesh_->cancel(std::move(ask), [this](const SubmitResult& res) {
    if (stop_) return;
    log_line((res.ok ? "coordinator handed over to " + res.message : "no handover: " + res.message) +
             ": shutting down (running jobs keep running)");
    stop_ = true;
  });
  return true;
}

// The answer may not come: the coordinator that answers is gone, or lost its majority when the
// voter it picked had just died (the others' silence tells after an election timeout). A node
// that stepped down learns the new coordinator from its first message, within a round trip.
void Daemon::mesh_left() {
  const proto::MeshStatus st = mesh_->status();
  const double mono = mono_now();
  std::string why;
  if (st.state == "leader") {
    if (mono >= leave_by_) why = "no voter took over within " + std::to_string(static_cast<int>(kLeaveS)) + " s";
  } else if (!st.coordinator.empty() && st.coordinator != cfg_.node_name) {
    why = "coordinator handed over to " + st.coordinator;
  } else if (stepped_down_ == 0) {
    stepped_down_ = mono;
  } else if (mono - stepped_down_ >= kNamedS || mono >= leave_by_) {
    why = "no longer the coordinator, none named since";
  }
  if (why.empty()) return;
  log_line(why + ": shutting down (running jobs keep running)");
  stop_ = true;
}

void Daemon::mesh_nodes(Client& c, const proto::NodesReq&) {
  std::uint64_t ticket = c.mesh_ticket = ++mesh_tickets_;
  mesh_->nodes([this, fd = c.fd, ticket](std::vector<proto::NodeLine> nodes) {
    mesh_answer(fd, ticket, proto::NodesRep{std::move(nodes)});
  });
}

}  // namespace corral::agent
