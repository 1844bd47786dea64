#include "coordinator/service/job_shares.hpp"

#include <algorithm>

#include "coordinator/service/coordinator_loop.hpp"

namespace corral::service {

bool job_shares(const Decision& d, const std::vector<std::string>& names, const proto::JobSpec& spec,
                proto::mesh::JobStarted& e) {
  e.nodes.clear();
  e.slots.clear();
  e.mem_mb.clear();
  std::vector<std::int32_t> slots;
  std::int64_t total = 0;
  for (const Placement& p : d.placement)
    for (std::uint32_t k = 0; k < std::max<std::uint32_t>(1, p.count); ++k) {
      if (p.node + k >= names.size()) return false;
      const std::string& name = names[p.node + k];
      auto at = std::find(e.nodes.begin(), e.nodes.end(), name);
      if (at == e.nodes.end()) {
        e.nodes.push_back(name);
        slots.push_back(0);
        at = e.nodes.end() - 1;
      }
      slots[static_cast<std::size_t>(at - e.nodes.begin())] += static_cast<std::int32_t>(p.slots);
      total += p.slots;
    }
  if (e.nodes.empty()) return false;
  if (e.nodes.size() == 1) return true;  // one node holds the whole job: no shares to record
  for (std::int32_t sl : slots)
    if (sl < 1 || (spec.chunk_ncpus > 0 && sl % spec.chunk_ncpus != 0)) return false;
  e.slots = slots;
  for (std::int32_t sl : slots)
    e.mem_mb.push_back(spec.mem_per_slot_mb > 0 ? proto::mem_for_slots(spec, sl)
                       : spec.mem_mb > 0        ? (spec.mem_mb * sl + total - 1) / total
                                                : 0);
  return true;
}

// A node reports a job the log does not place there: a share of a run across nodes that ended
// or was requeued, or any run that is over, or that the log now places on other nodes (a start
// that reached the node late, a process adopted after a restart). It is stopped there: the stop
// names the newest run, which also stops any older one the node holds, and never a newer one.
// The node's own end of a run it gave back is already in the log: a stale report of it costs
// one stop the node ignores.
void CoordinatorLoop::release_shares(const NodeReport& n) {
  for (std::uint64_t id : n.running) {
    const MeshJob* j = state_.job(id);
    if (!j || j->runs.empty() || proposing_.count(id)) continue;
    const auto& nodes = j->runs.back().nodes;
    bool current = (j->state == proto::state::kRunning || j->state == proto::state::kSuspended) &&
                   std::find(nodes.begin(), nodes.end(), n.name) != nodes.end();
    if (current) continue;
    const auto run = static_cast<std::int32_t>(j->runs.size());
    const char* why = j->state == proto::state::kEnded ? "the job's end" : "the log does not place it here";
    push_(n.member, proto::jobs::Message{proto::jobs::CancelJob{mesh_, c_.id(), term_, id, run, why}});
  }
}

bool CoordinatorLoop::shares_released(const MeshJob& j, const std::set<std::uint64_t>& held) const {
  if (held.count(j.id)) return false;
  if (j.runs.empty() || j.runs.back().nodes.size() <= 1) return true;
  const std::uint64_t now = env_.now_ms();
  for (const std::string& node : j.runs.back().nodes) {
    auto n = nodes_.find(node);
    if (n == nodes_.end() || now - n->second.at_ms > kNodeStaleMs) return false;
  }
  return true;
}

// A committed cancel may be lost on its way, or committed by an earlier coordinator: again to
// every node of the run until the job's end is in the log (a node stopping the job already
// does nothing).
void CoordinatorLoop::resend_cancels() {
  const std::uint64_t now = env_.now_ms();
  if (now < next_cancel_ms_) return;
  next_cancel_ms_ = now + kResendMs;
  for (std::uint64_t id : state_.live()) {
    const MeshJob& j = *state_.job(id);
    if ((j.state == proto::state::kRunning || j.state == proto::state::kSuspended) && !j.runs.back().cancel_by.empty())
      push_cancel(j, j.runs.back().cancel_by);
  }
}

bool CoordinatorLoop::push_cancel(const MeshJob& j, const std::string& who) {
  bool sent = false;
  const auto run = static_cast<std::int32_t>(j.runs.size());
  for (const std::string& node : j.runs.back().nodes) {
    auto n = nodes_.find(node);
    if (n == nodes_.end()) continue;
    push_(n->second.member, proto::jobs::Message{proto::jobs::CancelJob{mesh_, c_.id(), term_, j.id, run, who}});
    sent = true;
  }
  return sent;
}

}  // namespace corral::service
