// NCI National Facility policy (nci-pbs-policy.txt). Owned by the nci part;
// the planner part calls nci_stage() from schedule().
#pragma once
#include <cstdint>
#include "coordinator/model.hpp"
namespace corral {
struct NciConfig {
  bool enabled = false;
};
// Equal-access shuffling, priority-run / parallel-run with suspension scoring,
// resume, start window for one pass: may reorder st.order, add to st.freed,
// and append decisions/updates to plan. `seed` makes any tie-break repeatable.
void nci_stage(const Snapshot& snap, const NciConfig& cfg, std::uint64_t seed,
               PassState& st, Plan& plan);
}  // namespace corral
