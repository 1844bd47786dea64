// Queue-ordering policies (owned by the sim part): the order in which the
// planner considers pending jobs when no allocation policy reorders them.
#pragma once
#include "coordinator/model.hpp"
namespace corral {
struct OrderConfig {
  // "fifo": submit time, then job id (the SWF/textbook convention).
  std::string policy = "fifo";
};
// Fills st.order with every pending job, best first.
void order_pending(const Snapshot& snap, const OrderConfig& cfg, PassState& st);
}  // namespace corral
