// Operator commands on a standalone node: hold and release a pending job (qhold/qrls), move it
// to another queue (qmove), drain and undrain the node, and list the nodes (a mesh of one).
// Through a mesh the same requests go to the coordinator (mesh_operator.cpp).
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <tuple>

#include "agent/daemon.hpp"
#include "agent/durable_file.hpp"
#include "agent/job_accounting.hpp"
#include "agent/node/launcher.hpp"
#include "agent/node/topology.hpp"
#include "proto/spec_check.hpp"

namespace corral::agent {

namespace {

std::string caller(const Peer& p) {
  std::string who = user_name(p.uid);
  return who.empty() ? std::to_string(p.uid) : who;
}

proto::ErrorRep refuse(std::string code, std::string message) {
  return proto::ErrorRep{std::move(code), std::move(message)};
}

}  // namespace

proto::Message Daemon::on_job_admin(const Peer& p, const proto::ControlReq& r) {
  JobRecord* rec = store_->find(r.id);
  const std::string id = std::to_string(r.id);
  if (!rec) return refuse("not_found", "unknown job id " + id);
  if (!p.admin && p.uid != rec->uid)
    return refuse("permission", "job " + id + " belongs to " + rec->user + "; only its owner" +
                                    (have_operators_ ? ", " : " or ") + admins() + " may " + r.action + " it");
  if (rec->is_array() && !rec->ended()) {
    if (r.action == "qmove") return refuse("invalid", "cannot qmove job array " + id + " (its tasks keep its queue)");
    return hold_array(p, *rec, r.action == "hold");
  }
  if (rec->state != proto::state::kPending) {
    std::string now = rec->ended() ? "ended (" + rec->end_reason + ")" : rec->state;
    std::string hint = r.action == "qmove" ? "; only a pending job moves (corral requeue puts a running one back first)"
                                           : "; only a pending job is held or released";
    return refuse("invalid", "cannot " + r.action + " job " + id + ": it is " + now + hint);
  }
  if (r.action == "qmove") return on_qmove(p, *rec, r.queue);
  return on_hold(p, *rec, r.action == "hold");
}

proto::Message Daemon::on_hold(const Peer& p, JobRecord& rec, bool hold) {
  const std::string id = std::to_string(rec.id), who = caller(p);
  if (hold) {
    if (!rec.hold.empty()) return proto::ControlRep{rec.id, rec.state, "already held by " + rec.hold_by};
    rec.hold = std::string(p.admin ? proto::hold::kOperator : proto::hold::kUser);
    rec.hold_by = who;
    rec.comment = "held by " + who;
    pending_.erase(rec.id);
    held_.insert(rec.id);
  } else {
    if (rec.hold.empty()) return refuse("invalid", "job " + id + " is not held");
    if (rec.hold == proto::hold::kOperator && !p.admin)
      return refuse("permission", "job " + id + " was held by " + rec.hold_by + " (an operator hold); only " +
                                      admins() + " may release it");
    rec.hold.clear();
    rec.hold_by.clear();
    rec.comment = "released by " + who;
    held_.erase(rec.id);
    if (!dep_waiting_.count(rec.id)) pending_.insert(rec.id);
  }
  store_->put(rec);
  dirty_ = true;
  log_line("job " + id + (hold ? " held by " : " released by ") + who);
  return proto::ControlRep{rec.id, rec.state, hold ? "held" : "released"};
}

proto::Message Daemon::on_qmove(const Peer& p, JobRecord& rec, const std::string& queue) {
  const std::string id = std::to_string(rec.id);
  std::string names;
  bool known = false;
  for (const auto& q : cfg_.queues) {
    known |= q.name == queue;
    names += (names.empty() ? "" : ", ") + q.name;
  }
  if (!known) return refuse("invalid", "unknown queue '" + proto::printable(queue) + "' (queues here: " + names + ")");
  if (queue == rec.spec.queue) return refuse("invalid", "job " + id + " is already in queue " + queue);
  if (sched_.nci.enabled) {  // the new queue's bounds, as at submit
    Job j;
    j.queue = queue;
    j.walltime = rec.spec.walltime;
    std::tie(j.slots_min, j.slots_max) = slot_range(rec.spec);
    j.mem_mb = proto::mem_for_slots(rec.spec, j.slots_min);
    j.jobfs_mb = rec.spec.jobfs_mb;
    NciVerdict v = validate_request(j, snapshot_queues(), sched_.nci);
    if (!v.ok) return refuse("invalid", "cannot move job " + id + " to queue " + queue + ": " + v.reason);
  }
  const std::string from = rec.spec.queue, who = caller(p);
  rec.spec.queue = queue;
  rec.comment = "moved from queue " + from + " to " + queue + " by " + who;
  snap_stale_.push_back(rec.id);  // the kept pass snapshot holds its old queue
  store_->put(rec);
  dirty_ = true;
  log_line("job " + id + " " + rec.comment);
  return proto::ControlRep{rec.id, rec.state, "moved to queue " + queue};
}

// The drain survives a restart: state_dir/drain holds its reason while the node is drained.
void Daemon::load_drain() {
  const std::string path = cfg_.state_dir + "/drain";
  if (::access(path.c_str(), F_OK) != 0) return;
  drained_ = true;
  drain_reason_ = durable::read_file(path);
  while (!drain_reason_.empty() && drain_reason_.back() == '\n') drain_reason_.pop_back();
  log_line("node " + node_name() + " is drained: " + drain_reason_);
}

proto::Message Daemon::on_node_admin(const Peer& p, const proto::NodeAdminReq& r) {
  namespace na = proto::node_action;
  if (r.action == na::kHandover) return refuse("invalid", "this corrald is standalone: it has no mesh to hand over");
  if (r.action == na::kRemove || r.action == na::kPromote)
    return refuse("invalid", "this corrald is standalone: there is no mesh to " + r.action + " " + proto::printable(r.node) +
                                 (r.action == na::kRemove ? " from" : " in"));
  if (r.action != na::kDrain && r.action != na::kUndrain)
    return refuse("invalid", "unknown node action '" + proto::printable(r.action.substr(0, 32)) + "' (drain or undrain)");
  if (!p.admin) return refuse("permission", "only " + admins() + " may " + r.action + " a node");
  if (r.node != node_name())
    return refuse("not_found", "no node '" + proto::printable(r.node) + "' here: this corrald is standalone, its node is " +
                                   node_name());
  const bool drain = r.action == na::kDrain;
  if (drain && r.reason.empty()) return refuse("invalid", "drain needs a reason (--reason TEXT)");
  const std::string path = cfg_.state_dir + "/drain";
  try {
    if (drain) {
      durable::replace_file(cfg_.state_dir, path, r.reason + "\n", cfg_.fsync);
    } else if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
      durable::fail("cannot remove", path);
    } else if (cfg_.fsync) {
      durable::sync_dir(cfg_.state_dir);
    }
  } catch (const std::exception& e) {
    return refuse("internal", std::string("node state not changed: ") + e.what());
  }
  drained_ = drain;
  drain_reason_ = drain ? r.reason : "";
  dirty_ = true;
  log_line("node " + node_name() + (drain ? " drained by " + caller(p) + ": " + r.reason : " undrained by " + caller(p)));
  return proto::NodeAdminRep{node_name(), std::string(drain ? proto::node_state::kDrained : proto::node_state::kUp), drain_reason_};
}

proto::Message Daemon::on_nodes(const Peer&, const proto::NodesReq&) {
  const node::Topology& topo = launcher_->topology();
  proto::NodeLine n;
  n.name = node_name();
  n.state = drained_ ? proto::node_state::kDrained : proto::node_state::kUp;
  n.reason = drain_reason_;
  n.cores = static_cast<int>(topo.cores.size());
  n.cores_used = slots_used();
  n.mem_mb = topo.mem_mb;
  for (auto id : active_) n.mem_used_mb += store_->jobs().at(id).spec.mem_mb;
  n.jobs = static_cast<int>(active_.size());
  proto::NodesRep rep;
  rep.nodes.push_back(std::move(n));
  return rep;
}

}  // namespace corral::agent
