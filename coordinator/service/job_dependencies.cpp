// Dependencies in a mesh (-W depend=afterok|afterany|afternotok:ID, -hold_jid ID), judged by the
// coordinator over the replicated state with a standalone node's rules (proto/dependency.hpp): a
// pending job whose dependency is unmet stays out of the pass; one whose dependency can never be
// met (its job unknown, or ended the wrong way) ends dependency_never_met, with the reason, in
// the log (JobEnded of run 0). The jobs depended on may have run on any node.
#include "coordinator/names.hpp"
#include "coordinator/service/coordinator_loop.hpp"
#include "proto/dependency.hpp"

namespace corral::service {

void CoordinatorLoop::settle_dependencies() {
  blocked_.clear();
  const std::string completed(name(EndReason::Completed));
  for (std::uint64_t id : state_.live()) {
    const MeshJob& j = *state_.job(id);
    if (j.state != proto::state::kPending || j.spec.depend.empty() || j.ending()) continue;
    std::string never;
    bool waiting = false;
    for (const proto::Dependency& d : j.spec.depend) {
      const MeshJob* o = state_.job(d.job);
      const bool ended = o && o->state == proto::state::kEnded;
      auto v = proto::judge_dependency(d, o != nullptr, ended, ended && o->end_reason == completed,
                                       o ? o->end_reason : "", never);
      if (v == proto::DependVerdict::Never) break;
      waiting |= v == proto::DependVerdict::Waiting;
    }
    if (never.empty() && !waiting) continue;
    blocked_.insert(id);
    if (!never.empty()) end_pending(id, EndReason::DependencyNeverMet, never);
  }
}

}  // namespace corral::service
