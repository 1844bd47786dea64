// NCI charging, the coordinator's side (coordinator_loop.hpp): the grants go into the log, each
// pass sees every project's grant left with its running jobs' charges so far (a project with
// none left has its pending jobs moved to the bonus queue, in the log, as on a standalone
// node), and each start records its queue's charge factor, by which the run is charged when
// its end is applied (mesh_charges.hpp). PBA's demotions are moves in the log too.
#include "coordinator/service/coordinator_loop.hpp"
#include "coordinator/service/mesh_charges.hpp"

namespace corral::service {

void CoordinatorLoop::follow_grants() {
  if (grants_term_ == term_ || !sched_.nci.enabled) return;
  grants_term_ = term_;  // a grant lost with this coordinator is proposed by the next one
  for (const proto::mesh::GrantSet& g : grants_) {
    auto it = state_.data().grants.find(g.project);
    if (it != state_.data().grants.end() && it->second == MeshGrant{g.su, g.every}) continue;
    c_.propose(proto::mesh::encode_entry(g), [](const Proposed&) {});
  }
}

void CoordinatorLoop::charge_view(Time now) {
  std::erase_if(demoted_, [&](const auto& x) {  // moves committed (or refused: a start came first)
    const MeshJob* j = state_.job(x.first);
    return !j || j->state != proto::state::kPending || j->spec.queue == x.second;
  });
  if (!sched_.nci.enabled) return;
  sched_.nci.grant_left = mesh_ledger(state_.data(), now).grants_left(now);
}

// A demotion of the pass, a JobMoved in the log as a standalone node moves the job's queue:
// NCI's to the bonus queue (no grant left), PBA's to its lowest queue (pre-qualification failed).
void CoordinatorLoop::demote(const Decision& d) {
  const MeshJob* j = state_.job(d.job);
  const bool nci = sched_.nci.enabled && d.queue == sched_.nci.bonus_queue;
  const bool pba = sched_.pba.enabled && d.queue == sched_.pba.lowest_queue;
  if (!(nci || pba) || !j || j->state != proto::state::kPending || demoted_.count(d.job)) return;
  demoted_[d.job] = d.queue;
  proto::mesh::JobMoved e{d.job, d.queue, nci ? "nci" : "pba"};
  c_.propose(proto::mesh::encode_entry(e), [this, alive = alive_](const Proposed&) {
    if (*alive) dirty_ = true;
  });
}

double CoordinatorLoop::start_charge(const MeshJob& j) const {
  if (!sched_.nci.enabled || queues_.empty()) return 0;
  auto moved = demoted_.find(j.id);
  std::string q = moved != demoted_.end() ? moved->second : j.spec.queue.empty() ? queues_.front().name : j.spec.queue;
  for (const Queue& x : queues_)
    if (x.name == q) return x.charge_factor;
  return 0;  // a queue no longer configured: not charged, as on a standalone node
}

}  // namespace corral::service
