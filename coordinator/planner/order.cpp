#include "coordinator/planner/order.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string_view>

namespace corral {

namespace {

Time est_of(const Job& j) {
  Time e = j.predicted > 0 ? j.predicted : j.estimate > 0 ? j.estimate : j.walltime;
  return std::max<Time>(1, e - j.work_done);
}

}  // namespace

Time aging_of(const Job& job, const OrderConfig& cfg, std::int64_t cores) {
  if (cfg.aging <= 0) return 0;  // no aging at all
  Time a = cfg.aging;
  if (cfg.aging_wide > 0 && is_wide(job, cfg, cores)) a = std::min(a, cfg.aging_wide);
  return std::min(a, factor_wait(job, cfg.aging_factor));
}

std::int64_t up_cores(const Snapshot& snap) {
  std::int64_t c = 0;
  for (const Node& nd : snap.nodes)
    if (nd.up) c += nd.cores;
  return c;
}

void order_pending(const Snapshot& snap, const OrderConfig& cfg, PassState& st, const PassHints& hints) {
  const auto& pend = snap.pending;
  const std::size_t n = pend.size();
  const Order pol = cfg.policy;

  st.order.resize(n);
  st.order_is_pending_order = false;
  bool given = false;  // order is hints.pending.order so far
  // FIFO order first (callers usually keep pending in submit order already):
  // one sweep numbers the jobs and checks that, unless the caller promises
  // it (PendingHints::fifo): then no job is read.
  bool sorted = true;
  std::uint32_t* o = st.order.data();
  const std::vector<std::uint32_t>& fifo = hints.pending.order;
  if (n > 0 && fifo.size() == n) {  // the caller's FIFO order
    std::copy(fifo.begin(), fifo.end(), o);
    given = true;
  } else if (hints.pending.fifo) {
    // Four at a time (one vector store at -O2).
    std::uint32_t i = 0;
    for (; i + 4 <= n; i += 4) {
      o[i] = i;
      o[i + 1] = i + 1;
      o[i + 2] = i + 2;
      o[i + 3] = i + 3;
    }
    for (; i < n; ++i) o[i] = i;
  } else {
    if (n > 0) o[0] = 0;
    for (std::size_t i = 1; i < n; ++i) {
      o[i] = static_cast<std::uint32_t>(i);
      if (sorted && fifo_less(pend[i], pend[i - 1])) sorted = false;
    }
  }
  if (!sorted)
    std::stable_sort(st.order.begin(), st.order.end(),
                     [&](std::uint32_t a, std::uint32_t b) { return fifo_less(pend[a], pend[b]); });

  // Aged jobs (waited >= aging) keep FIFO order at the front.
  auto rest = st.order.begin();
  if (cfg.aging > 0) {
    const std::int64_t cores = up_cores(snap);
    rest = std::stable_partition(st.order.begin(), st.order.end(), [&](std::uint32_t i) {
      const Time a = aging_of(pend[i], cfg, cores);
      return a > 0 && (snap.now - pend[i].submit >= a || (pend[i].age_at > 0 && snap.now >= pend[i].age_at));
    });
    if (cfg.aged_ahead > 0 && rest - st.order.begin() > cfg.aged_ahead) rest = st.order.begin() + cfg.aged_ahead;
  }
  // PassState::order_is_pending_order: unless aging moved some jobs (not
  // none, not all), the FIFO order stands.
  if (pol == Order::Fifo || rest == st.order.end()) {
    st.order_is_pending_order = given && (rest == st.order.begin() || rest == st.order.end());
    return;
  }

  if (pol == Order::Sjbf || pol == Order::Lxbf) {
    // The FIFO prefix that fits in the free cores now, then the head (first
    // that does not fit); only the remaining candidates are reordered.
    std::int64_t free = 0;
    for (const Node& nd : snap.nodes)
      if (nd.up) free += nd.cores;
    for (const RunningJob& r : snap.running)
      if (!r.suspended) free -= r.slots;
    auto it = st.order.begin();
    while (it != st.order.end() && pend[*it].slots_min <= free) free -= pend[*it++].slots_min;
    if (it == st.order.end()) return;
    rest = std::max(rest, it + 1);
    if (rest == st.order.end()) return;
  }

  // Sort the rest by a precomputed key (ties: FIFO).
  std::vector<std::pair<double, std::uint32_t>> keyed;
  keyed.reserve(static_cast<std::size_t>(st.order.end() - rest));
  for (auto it = rest; it != st.order.end(); ++it) {
    const Job& j = pend[*it];
    double e = static_cast<double>(est_of(j));
    double key = 0;
    switch (pol) {
      case Order::Sjf:
      case Order::Sjbf: key = e; break;
      case Order::Saf: key = e * std::max(1, j.slots_min); break;
      case Order::Wfp3: {
        double w = static_cast<double>(std::max<Time>(0, snap.now - j.submit)) / e;
        key = -(w * w * w) * std::max(1, j.slots_min);
        break;
      }
      case Order::Lxf:  // largest expansion factor (wait + estimate) / estimate
      case Order::Lxbf:
        key = -(static_cast<double>(std::max<Time>(0, snap.now - j.submit)) + e) / e;
        break;
      default: break;
    }
    keyed.emplace_back(key, *it);
  }
  // `keyed` is in FIFO order, so a stable sort keeps FIFO among equal keys.
  std::stable_sort(keyed.begin(), keyed.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  for (std::size_t k = 0; k < keyed.size(); ++k) rest[static_cast<std::ptrdiff_t>(k)] = keyed[k].second;
}

}  // namespace corral
