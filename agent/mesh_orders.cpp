// The coordinator's orders to a run on this node, the daemon's side: suspend, resume, requeue
// and checkpoint (coordinator/service/job_orders.cpp), each carried out with the code a
// standalone node runs for its own pass's decision (the freezer, the launcher's requeue or
// checkpoint signal) and acknowledged. An order from an older coordinator term is refused; each
// decision is carried out at most once, and never one older than the newest carried out for the
// job (a late resend of a suspension does not undo the resumption that followed it). The end of
// a requeued or checkpointed run goes to the mesh as JobRequeued (requeue(), mesh_give_back()).
#include <string>

#include "agent/daemon.hpp"
#include "agent/mesh_link.hpp"

namespace corral::agent {

void Daemon::mesh_control(const proto::jobs::JobOrder& o) {
  namespace ord = proto::mesh::order;
  proto::jobs::StartAck ack;
  ack.term = o.term;
  ack.decision = o.decision;
  ack.decided_term = o.decided_term;
  ack.job = o.job;
  ack.run = o.run;
  ack.order = o.action;
  auto answer = [&](const char* status, std::string msg) {
    ack.status = status;
    ack.message = std::move(msg);
    mesh_->start_ack(o.from, ack);
  };
  const std::string what = o.action + " of job " + std::to_string(o.job) + " run " + std::to_string(o.run);
  if (o.term < mesh_term_) {
    log_line("mesh: " + what + " refused: term " + std::to_string(o.term) + " is older than term " +
             std::to_string(mesh_term_));
    return answer("refused", "term " + std::to_string(o.term) + " is older than term " + std::to_string(mesh_term_));
  }
  mesh_term_ = o.term;
  JobRecord* rec = store_->find(o.job);
  // Its start has not arrived yet: no answer, so the order comes again after it.
  if (!rec || rec->requeues + 1 < o.run) return;
  if (rec->requeues + 1 > o.run || rec->ended() || !active_.count(o.job)) return answer("done", "the run is over here");
  auto& last = mesh_orders_[o.job];
  const std::pair<std::uint64_t, std::uint64_t> key{o.decided_term, o.decision};
  if (key <= last) return answer("done", "already applied");
  last = key;
  std::string err;
  const bool suspended = rec->state == proto::state::kSuspended;
  if (o.action == ord::kSuspend && !suspended) {
    err = suspend_resume(*rec, true, o.reason);
    if (err.empty() && o.held) {  // a user's suspension: the pass does not resume it
      rec->held = true;
      store_->put(*rec);
    }
  } else if (o.action == ord::kResume && suspended) {
    err = suspend_resume(*rec, false, o.reason);
  } else if ((o.action == ord::kRequeue || o.action == ord::kCheckpoint) && !rec->requeue_requested) {
    err = stop_for_requeue(*rec, o.action == ord::kCheckpoint, o.reason, o.pba_preemption);
    if (err.empty()) poll_launcher();  // a requeue's end is usually there at once
  }
  log_line("mesh: " + what + (err.empty() ? " carried out" : " failed: " + err) + " (term " +
           std::to_string(o.decided_term) + ", decision " + std::to_string(o.decision) + ")");
  mesh_report_node();
  answer(err.empty() ? "done" : "failed", err);
}

}  // namespace corral::agent
