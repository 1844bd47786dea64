// The coordinator's orders to running jobs: suspend, resume, requeue and checkpoint, decided by
// its pass (NCI's suspensions and resumptions, PBA's preemptions, the checkpoint policy's end of
// a backfill window) or asked by a user. Each is one JobOrdered entry (decision `decision` of this
// term), pushed once committed to the run's node as a JobOrder and pushed again until the node
// acknowledges; the node carries it out as a standalone node carries out its own pass's decision.
// A requeue or checkpoint leaves the run "stopping": the job waits again only once its node
// reports the run's end (JobRequeued), so the pass never starts it elsewhere meanwhile.
#include <algorithm>

#include "coordinator/service/coordinator_loop.hpp"

namespace corral::service {

namespace {

namespace ord = proto::mesh::order;

constexpr std::uint64_t kOrderResendMs = 500;

std::string_view action_name(Action a) {
  switch (a) {
    case Action::Suspend: return ord::kSuspend;
    case Action::Resume: return ord::kResume;
    case Action::Requeue: return ord::kRequeue;
    case Action::Checkpoint: return ord::kCheckpoint;
    default: return {};
  }
}

DeskAnswer order_refused(std::uint64_t job, std::string why, std::string code) {
  return DeskAnswer{"refused", job, 0, std::move(why), std::move(code)};
}

}  // namespace

// A decision of the pass, checked as a standalone node's apply() checks it.
void CoordinatorLoop::order(const Decision& d) {
  const MeshJob* j = state_.job(d.job);
  if (!j || j->runs.empty() || ordering_.count(d.job)) return;
  const MeshRun& run = j->runs.back();
  const std::string_view act = action_name(d.action);
  const bool running = j->state == proto::state::kRunning, suspended = j->state == proto::state::kSuspended;
  if (!run.stopping.empty() || !(running || suspended)) return;
  if (act == ord::kSuspend && !running) return;
  if (act == ord::kResume && (!suspended || run.held)) return;  // a user's suspension: only a user resumes
  proto::mesh::JobOrdered e;
  e.job = d.job;
  e.run = static_cast<std::int32_t>(j->runs.size());
  e.action = std::string(act);
  e.reason = d.reason;
  e.pba_preemption = d.pba_preemption;
  propose_order(std::move(e), nullptr);
}

void CoordinatorLoop::propose_order(proto::mesh::JobOrdered e, const JobDesk::Done& done) {
  e.decision = ++next_decision_;
  e.term = term_;
  e.time = env_.wall_s();
  ordering_.insert(e.job);
  c_.propose(proto::mesh::encode_entry(e), [this, alive = alive_, job = e.job, done](const Proposed& p) {
    if (*alive) {
      ordering_.erase(job);
      dirty_ = true;
      if (p.status == Status::ok && p.applied.ok) push_order(job);
    }
    if (!done) return;
    if (p.status == Status::ok && p.applied.ok) done(DeskAnswer{"ok", job, 0, "", ""});
    else if (p.status == Status::ok) done(order_refused(job, p.applied.reason, "invalid"));
    else done(DeskAnswer{"error", 0, 0, std::string(status_name(p.status)), ""});
  });
}

// The current run's last order, to its node (again).
void CoordinatorLoop::push_order(std::uint64_t job) {
  const MeshJob* j = state_.job(job);
  if (!j || j->runs.empty() || j->runs.back().order.empty() || j->runs.back().nodes.empty()) return;
  const MeshRun& run = j->runs.back();
  proto::jobs::JobOrder o;
  o.mesh = mesh_;
  o.from = c_.id();
  o.term = term_;
  o.decided_term = run.order_term;
  o.decision = run.order_decision;
  o.job = job;
  o.run = static_cast<std::int32_t>(j->runs.size());
  o.action = run.order;
  o.reason = run.order_reason;
  o.pba_preemption = run.order_pba;
  o.held = run.held;
  auto n = nodes_.find(run.nodes.front());
  UnackedOrder& u = unacked_orders_[job];
  u.member = n == nodes_.end() ? 0 : n->second.member;
  u.order = std::move(o);
  u.sent_ms = env_.now_ms();
  if (u.member != 0) push_(u.member, proto::jobs::Message{u.order});
}

void CoordinatorLoop::order_acked(const proto::jobs::StartAck& a) {
  auto it = unacked_orders_.find(a.job);
  if (it == unacked_orders_.end() || it->second.order.decision != a.decision ||
      it->second.order.decided_term != a.decided_term)
    return;
  unacked_orders_.erase(it);
}

void CoordinatorLoop::resend_orders(std::uint64_t now) {
  for (auto it = unacked_orders_.begin(); it != unacked_orders_.end();) {
    const MeshJob* j = state_.job(it->first);
    UnackedOrder& u = it->second;
    if (!j || static_cast<std::int32_t>(j->runs.size()) != u.order.run ||
        (j->state != proto::state::kRunning && j->state != proto::state::kSuspended)) {
      it = unacked_orders_.erase(it);  // the run is over: nothing left to deliver
      continue;
    }
    if (now - u.sent_ms >= kOrderResendMs) {
      if (u.member == 0)
        if (auto n = nodes_.find(j->runs.back().nodes.front()); n != nodes_.end()) u.member = n->second.member;
      u.sent_ms = now;
      if (u.member != 0) push_(u.member, proto::jobs::Message{u.order});
    }
    ++it;
  }
}

// A user's request, with a standalone node's rules (agent/commands.cpp on_control).
void CoordinatorLoop::control(const proto::jobs::CancelAsk& ask, const JobDesk::Done& done) {
  const std::string& act = ask.action;
  const std::string id = std::to_string(ask.job);
  const MeshJob* j = state_.job(ask.job);
  if (!j) return done(order_refused(ask.job, "unknown job id " + id, "not_found"));
  const bool admin_only = act == ord::kSuspend || act == ord::kResume;
  if (!ask.admin && (admin_only || ask.uid != j->uid))
    return done(order_refused(ask.job,
                        admin_only ? "only root or an operator may " + act + " jobs (job " + id + " belongs to " + j->user + ")"
                                   : "job " + id + " belongs to " + j->user + "; only its owner, root or an operator may " +
                                         act + " it",
                        "permission"));
  auto not_now = [&](const std::string& why) { done(order_refused(ask.job, "cannot " + act + " job " + id + ": it is " + why, "invalid")); };
  if (j->state == proto::state::kEnded) return not_now("ended (" + j->end_reason + ")");
  if (j->state == proto::state::kPending) return not_now(proposing_.count(ask.job) ? "starting" : "pending (not running)");
  const MeshRun& run = j->runs.back();
  if (!run.stopping.empty() || ordering_.count(ask.job)) return not_now("already being stopped or changed");
  if (act == ord::kSuspend && j->state != proto::state::kRunning) return not_now(j->state);
  if (act == ord::kResume && j->state != proto::state::kSuspended) return not_now(j->state);
  if (act == ord::kResume && !run.nodes.empty()) {
    // Its cores went to other jobs meanwhile: thawing now would share them.
    auto n = nodes_.find(run.nodes.front());
    int used = 0;
    for (std::uint64_t other : state_.jobs_on(run.nodes.front())) {
      const MeshJob* o = state_.job(other);
      if (other != ask.job && o->state == proto::state::kRunning) used += std::max(1, o->spec.ncpus);
    }
    if (n != nodes_.end() && used + std::max(1, j->spec.ncpus) > n->second.cores)
      return done(order_refused(ask.job, "cannot resume job " + id + " now: its node " + run.nodes.front() +
                                       " has " + std::to_string(n->second.cores - used) +
                                       " free core(s); try again when its jobs end (or suspend them)",
                          "busy"));
  }
  proto::mesh::JobOrdered e;
  e.job = ask.job;
  e.run = static_cast<std::int32_t>(j->runs.size());
  e.action = act;
  e.held = act == ord::kSuspend;
  e.reason = (act == ord::kSuspend ? "suspended by " : act == ord::kResume ? "resumed by " : act + " requested by ") + ask.who;
  const std::string message = act == ord::kSuspend ? "suspended" : act == ord::kResume ? "resumed"
                              : act == ord::kRequeue ? "requeueing" : "checkpointing";
  propose_order(std::move(e), [done, message](const DeskAnswer& a) {
    DeskAnswer b = a;
    if (b.status == "ok") b.message = message;
    done(b);
  });
}

}  // namespace corral::service
