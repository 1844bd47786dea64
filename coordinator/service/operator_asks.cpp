// The coordinator's answer to operator requests forwarded by any member: hold, release and
// qmove of a pending job, drain and undrain of a node. Each is checked with a standalone node's
// rules (who may, what state the job is in, whether the queue exists) and becomes one entry of
// the replicated log, answered once committed; the pass obeys the new state (a held job is left
// out, a drained node gets no start). alloc_set changes the PBA calendar: one AllocationSet
// entry for all the changes of one request (all or none), laid over the plan file's calendar
// before the next pass.
#include <ctime>

#include "coordinator/pba/allocation_use.hpp"

#include "coordinator/service/coordinator_loop.hpp"

namespace corral::service {

namespace {

DeskAnswer refused(std::uint64_t job, std::string why, std::string code) {
  return DeskAnswer{"refused", job, 0, std::move(why), std::move(code)};
}

}  // namespace

void CoordinatorLoop::operate(const proto::jobs::CancelAsk& ask, const JobDesk::Done& done) {
  const std::string& a = ask.action;
  if (a == "hold" || a == "release" || a == "qmove") return job_ask(ask, done);
  namespace na = proto::node_action;
  if (a == na::kDrain || a == na::kUndrain) return node_ask(ask, done);
  if (a == na::kRemove) return remove_ask(ask, done);
  if (a == na::kPromote) return promote_ask(ask, done);
  if (a == "alloc_set") return alloc_ask(ask, done);
  if (a == "task") return task_ask(ask, done);
  if (a == "suspend" || a == "resume" || a == "requeue" || a == "checkpoint") return control(ask, done);
  done(refused(ask.job, "unknown request '" + a.substr(0, 32) + "'", "invalid"));
}

void CoordinatorLoop::job_ask(const proto::jobs::CancelAsk& ask, const JobDesk::Done& done) {
  const std::string id = std::to_string(ask.job), &act = ask.action;
  const MeshJob* j = state_.job(ask.job);
  if (!j) return done(refused(ask.job, "unknown job id " + id, "not_found"));
  if (!ask.admin && ask.uid != j->uid)
    return done(refused(ask.job, "job " + id + " belongs to " + j->user + "; only its owner, root or an operator may " + act + " it",
                        "permission"));
  if (j->state != proto::state::kPending || j->ending() || proposing_.count(ask.job)) {
    std::string now = j->state == proto::state::kEnded ? "ended (" + j->end_reason + ")"
                      : j->ending()                    ? "ending (" + j->end_reason + ")"
                      : j->state == proto::state::kPending ? "starting" : j->state;
    std::string hint = act == "qmove" ? "; only a pending job moves (corral requeue puts a running one back first)"
                                      : "; only a pending job is held or released";
    return done(refused(ask.job, "cannot " + act + " job " + id + ": it is " + now + hint, "invalid"));
  }
  if (act == "hold") {
    if (!j->hold.empty()) return done(DeskAnswer{"ok", ask.job, 0, "already held by " + j->hold_by, ""});
    std::string kind(ask.admin ? proto::hold::kOperator : proto::hold::kUser);
    return commit(proto::mesh::JobHeld{ask.job, kind, ask.who}, ask.job, "held", done);
  }
  if (act == "release") {
    if (j->hold.empty()) return done(refused(ask.job, "job " + id + " is not held", "invalid"));
    if (j->hold == proto::hold::kOperator && !ask.admin)
      return done(refused(ask.job, "job " + id + " was held by " + j->hold_by +
                                       " (an operator hold); only root or an operator may release it", "permission"));
    return commit(proto::mesh::JobHeld{ask.job, "", ask.who}, ask.job, "released", done);
  }
  std::string names;
  bool known = false;
  for (const Queue& q : queues_) {
    known |= q.name == ask.queue;
    names += (names.empty() ? "" : ", ") + q.name;
  }
  if (!known) return done(refused(ask.job, "unknown queue '" + ask.queue + "' (queues here: " + names + ")", "invalid"));
  if (ask.queue == j->spec.queue) return done(refused(ask.job, "job " + id + " is already in queue " + ask.queue, "invalid"));
  commit(proto::mesh::JobMoved{ask.job, ask.queue, ask.who}, ask.job, "moved to queue " + ask.queue, done);
}

void CoordinatorLoop::node_ask(const proto::jobs::CancelAsk& ask, const JobDesk::Done& done) {
  if (!ask.admin) return done(refused(0, "only root or an operator may " + ask.action + " a node", "permission"));
  const bool drain = ask.action == proto::node_action::kDrain;
  if (drain && ask.reason.empty()) return done(refused(0, "drain needs a reason (--reason TEXT)", "invalid"));
  if (!nodes_.count(ask.node) && !heard_of_.count(ask.node) && !state_.data().nodes.count(ask.node)) {
    std::set<std::string> known(heard_of_);
    for (const auto& [name, r] : nodes_) known.insert(name);
    std::string names;
    for (const std::string& name : known) names += (names.empty() ? "" : ", ") + name;
    return done(refused(0, "no node '" + ask.node + "' in mesh " + mesh_ + " (nodes: " + names + ")", "not_found"));
  }
  std::string state(drain ? proto::mesh::admin::kDrain : proto::mesh::admin::kUp);
  commit(proto::mesh::NodeAdmin{ask.node, state, drain ? ask.reason : ""}, 0, std::string(drain ? proto::node_state::kDrained : proto::node_state::kUp), done);
}

void CoordinatorLoop::alloc_ask(const proto::jobs::CancelAsk& ask, const JobDesk::Done& done) {
  if (!ask.admin) return done(refused(0, "only root or an operator may change allocations", "permission"));
  if (!sched_.pba.enabled)
    return done(refused(0, "the coordinator has no project plan (pba = no): no allocation calendar", "invalid"));
  if (ask.allocs.empty()) return done(refused(0, "no allocation to set", "invalid"));
  follow_allocations();
  pba::ProjectPlan trial = sched_.pba.plan;
  const Time now = static_cast<Time>(env_.wall_s());
  proto::mesh::AllocationSet entry;  // every change in one entry: all or none; weeks spelled one way
  for (const proto::mesh::AllocationSet& e : ask.allocs) {
    std::string err;
    auto week = pba::parse_iso_week(e.week, &err);
    if (!week) return done(refused(0, "week '" + e.week + "': " + err, "invalid"));
    if (pba::week_index(*week) < pba::week_index(now))
      return done(refused(0, "week " + e.week + " has ended; only this week and later ones change", "invalid"));
    pba::Allocation a;
    a.project = e.project;
    a.week = *week;
    a.slots = e.slots;
    if (auto why = pba::set_allocation(trial, std::move(a), now)) return done(refused(0, *why, "invalid"));
    entry.changes.push_back(proto::AllocSetting{e.project, pba::format_iso_week(*week), e.slots});
  }
  commit(entry, 0, "set", done);
}

void CoordinatorLoop::follow_allocations() {
  if (!sched_.pba.enabled || state_.data().allocations == allocations_) return;
  allocations_ = state_.data().allocations;
  sched_.pba.plan = plan_file_;
  pba::overlay_allocations(sched_.pba.plan, allocations_);
}

void CoordinatorLoop::commit(const proto::mesh::Entry& e, std::uint64_t job, std::string message, const JobDesk::Done& done) {
  c_.propose(proto::mesh::encode_entry(e), [this, alive = alive_, done, job, message](const Proposed& p) {
    if (*alive) dirty_ = true;  // the pass sees the new state
    if (p.status == Status::ok && p.applied.ok) done(DeskAnswer{"ok", job, 0, message, ""});
    else if (p.status == Status::ok) done(refused(job, p.applied.reason, "invalid"));
    else done(DeskAnswer{"error", 0, 0, std::string(status_name(p.status)), ""});
  });
}

}  // namespace corral::service
