// Priority-based allocation of job slots to projects (pba-synopsys-patent.txt).
// Owned by the pba part; the planner part calls pba_stage() from schedule().
#pragma once
#include <cstdint>
#include "coordinator/model.hpp"
namespace corral {
struct PbaConfig {
  bool enabled = false;
};
// Pre-qualification, priority arithmetic, ordering and preemption for one pass:
// may reorder st.order, add to st.freed, and append decisions/updates to plan.
void pba_stage(const Snapshot& snap, const PbaConfig& cfg, PassState& st, Plan& plan);
}  // namespace corral
