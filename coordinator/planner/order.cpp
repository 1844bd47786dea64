#include "coordinator/planner/order.hpp"
#include <algorithm>
#include <numeric>
namespace corral {
void order_pending(const Snapshot& snap, const OrderConfig&, PassState& st) {
  st.order.resize(snap.pending.size());
  std::iota(st.order.begin(), st.order.end(), 0u);
  std::stable_sort(st.order.begin(), st.order.end(), [&](std::uint32_t a, std::uint32_t b) {
    const Job& x = snap.pending[a];
    const Job& y = snap.pending[b];
    return x.submit != y.submit ? x.submit < y.submit : x.id < y.id;
  });
}
}  // namespace corral
