// The coordinator's orders to running jobs: suspend, resume, requeue and checkpoint, decided by
// its pass (NCI's suspensions and resumptions, PBA's preemptions, the checkpoint policy's end of
// a backfill window) or asked by a user. Each is one JobOrdered entry (decision `decision` of this
// term), pushed once committed to the run's node as a JobOrder and pushed again until the node
// acknowledges; the node carries it out as a standalone node carries out its own pass's decision.
// A requeue or checkpoint leaves the run "stopping": the job waits again only once its node
// reports the run's end (JobRequeued), so the pass never starts it elsewhere meanwhile. A
// node's acknowledgement of a suspend or resume is committed (JobSuspended): the log knows which
// nodes froze (thawed) the run, and puts the run back when one failed to.
#include <algorithm>

#include "coordinator/service/coordinator_loop.hpp"

namespace corral::service {

namespace {

namespace ord = proto::mesh::order;

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

// The cores job j's current run holds on `node`.
int slots_on(const MeshJob& j, const std::string& node) {
  const auto& nodes = j.runs.back().nodes;
  for (std::size_t i = 0; i < nodes.size(); ++i)
    if (nodes[i] == node) return share_slots(j, i);
  return share_slots(j, nodes.size());
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

// The current run's last order, to each of its nodes (again).
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
  if (run.order_failed) return;  // a node failed it: the log put the run back, nothing to carry out
  for (const std::string& node : run.nodes)
    if (std::find(run.order_acked.begin(), run.order_acked.end(), node) == run.order_acked.end())
      send_until_acked(job, node, proto::jobs::Message{o});
}

// A node's acknowledgement of a suspend or resume order, into the log (JobSuspended): done, the
// run is frozen (thawed) there; failed, the log puts the run back as it was.
void CoordinatorLoop::record_freeze(const proto::jobs::JobOrder& o, const std::string& node,
                                    const proto::jobs::StartAck& a) {
  if ((o.action != ord::kSuspend && o.action != ord::kResume) || (a.status != "done" && a.status != "failed")) return;
  proto::mesh::JobSuspended e;
  e.job = o.job;
  e.run = o.run;
  e.suspended = (o.action == ord::kSuspend) == (a.status == "done");
  e.reason = a.status == "done" ? "" : a.message;
  e.time = env_.wall_s();
  e.node = node;
  e.order_term = o.decided_term;
  e.order_decision = o.decision;
  c_.propose(proto::mesh::encode_entry(e), [this, alive = alive_](const Proposed&) {
    if (*alive) dirty_ = true;
  });
}

// Whether job j's run may be thawed now: on each of its nodes, its share and the running jobs
// there fit the node's cores (they went to other jobs meanwhile: thawing would share them).
std::string CoordinatorLoop::resume_room(const MeshJob& j) const {
  const MeshRun& run = j.runs.back();
  for (const std::string& node : run.nodes) {
    auto n = nodes_.find(node);
    if (n == nodes_.end()) continue;
    int used = 0;
    for (std::uint64_t other : state_.jobs_on(node)) {
      const MeshJob* o = state_.job(other);
      if (other != j.id && o->state == proto::state::kRunning) used += slots_on(*o, node);
    }
    if (used + slots_on(j, node) > n->second.cores)
      return "its node " + node + " has " + std::to_string(std::max(0, n->second.cores - used)) + " free core(s)";
  }
  return "";
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
  if (j->is_array()) return not_now("a job array: name one of its tasks, " + id + "[INDEX]");
  if (j->state == proto::state::kPending) return not_now(proposing_.count(ask.job) ? "starting" : "pending (not running)");
  const MeshRun& run = j->runs.back();
  if (!run.stopping.empty() || ordering_.count(ask.job)) return not_now("already being stopped or changed");
  if (act == ord::kSuspend && j->state != proto::state::kRunning) return not_now(j->state);
  if (act == ord::kResume && j->state != proto::state::kSuspended) return not_now(j->state);
  if (act == ord::kResume)
    if (std::string full = resume_room(*j); !full.empty())
      return done(order_refused(ask.job, "cannot resume job " + id + " now: " + full +
                                             "; try again when its jobs end (or suspend them)",
                                "busy"));
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
