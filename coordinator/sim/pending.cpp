// The pending queue's order: FIFO places of arrivals and requeues, and the
// compaction after a pass when jobs start or are rejected.
#include "coordinator/sim/simulator.hpp"

namespace corral::sim::detail {

void Simulator::fifo_insert(std::size_t pos) {
  auto& ord = snap_.pending_order;
  const auto& pend = snap_.pending;
  if (fifo_at_.size() < pend.size()) fifo_at_.resize(pend.size() + pend.size() / 2 + 16);
  const Job& j = pend[pos];
  pend_pos_[j.id - 1] = static_cast<std::int32_t>(pos);
  // Snapshot::pending_slots_min (model.hpp): parallel to pending; pos is
  // its last entry (both callers append), so the arrays grow by one.
  const Time floor = duration_floor(j);
  const auto floor32 = static_cast<std::int32_t>(std::min<Time>(floor, INT32_MAX));
  snap_.pending_slots_min.push_back(j.slots_min);
  snap_.pending_min_duration.push_back(floor);
  if (ord.empty() || !fifo_less(j, pend[ord.back()])) {  // arrivals: at the end
    fifo_at_[pos] = static_cast<std::uint32_t>(ord.size());
    ord.push_back(static_cast<std::uint32_t>(pos));
    snap_.pending_order_slots_min.push_back(j.slots_min);
    snap_.pending_order_min_duration.push_back(floor32);
    return;
  }
  auto it = std::upper_bound(ord.begin(), ord.end(), pos,
                             [&](std::size_t a, std::uint32_t b) { return fifo_less(pend[a], pend[b]); });
  const std::size_t k = static_cast<std::size_t>(it - ord.begin());
  ord.insert(it, static_cast<std::uint32_t>(pos));
  const auto at = static_cast<std::ptrdiff_t>(k);
  snap_.pending_order_slots_min.insert(snap_.pending_order_slots_min.begin() + at, j.slots_min);
  snap_.pending_order_min_duration.insert(snap_.pending_order_min_duration.begin() + at, floor32);
  for (std::size_t m = k; m < ord.size(); ++m) fifo_at_[ord[m]] = static_cast<std::uint32_t>(m);
}

void Simulator::requeue(std::size_t idx, Job&& j) {
  Rec& r = recs_[idx];
  Hot& h = hot_[idx];
  h.st = St::Pending;
  ++h.gen;
  j.work_done = r.work_done;
  slots_add(j.slots_min, +1);
  count_pending(idx, +1);
  set_odd(idx, j);
  if (swap_pending_) {
    snap_.pending.push_back(std::move(j));
    fifo_insert(snap_.pending.size() - 1);
    return;
  }
  auto pos = std::lower_bound(snap_.pending.begin(), snap_.pending.end(), j, fifo_less);
  snap_.pending.insert(pos, std::move(j));
}

bool Simulator::leave(std::size_t idx, Job& job) {
  Rec& r = recs_[idx];
  Hot& h = hot_[idx];
  if (!h.starting && h.st != St::Rejected) return false;
  clear_odd(idx);
  slots_add(job.slots_min, -1);
  count_pending(idx, -1);
  if (h.starting) {
    h.starting = false;
    StartNote& sn = note_of(idx);
    add_running(idx, job, sn.slots, sn.place, sn.backfilled);
    sn.place.clear();
  } else {
    ++res_.rejected;
    if (ProjAcc* a = acc(idx); a && within_[idx] && r.first_start < 0) a->pend_within -= job.slots_min;
  }
  return true;
}

void Simulator::leave_swapped() {
  auto& pend = snap_.pending;
  auto& ord = snap_.pending_order;
  std::sort(leaving_.begin(), leaving_.end());
  leaving_.erase(std::unique(leaving_.begin(), leaving_.end()), leaving_.end());
  // The FIFO places that empty (the order list ahead of the first stays).
  gone_.clear();
  for (std::size_t idx : leaving_) {
    if (pend_pos_[idx] < 0) continue;
    const auto p = static_cast<std::size_t>(pend_pos_[idx]);
    if (!leave(idx, pend[p])) continue;  // stays pending
    gone_.push_back(fifo_at_[p]);
    const std::size_t last = pend.size() - 1;
    if (p != last) {
      shift_job(pend[p], pend[last]);
      pend_pos_[pend[p].id - 1] = static_cast<std::int32_t>(p);
      fifo_at_[p] = fifo_at_[last];
      ord[fifo_at_[p]] = static_cast<std::uint32_t>(p);
      put_need(p, pend[p]);
    }
    pend.pop_back();
    snap_.pending_slots_min.pop_back();
    snap_.pending_min_duration.pop_back();
    pend_pos_[idx] = -1;
  }
  leaving_.clear();
  if (gone_.empty()) return;
  // The places between two that emptied move up by the number emptied
  // ahead of them: one plain loop a stretch (no test per entry).
  std::sort(gone_.begin(), gone_.end());
  std::size_t w = gone_.front();
  std::uint32_t* const o = ord.data();
  std::int32_t* const on = snap_.pending_order_slots_min.data();
  std::int32_t* const od = snap_.pending_order_min_duration.data();
  std::uint32_t* const at = fifo_at_.data();
  for (std::size_t g = 0; g < gone_.size(); ++g) {
    const std::size_t end = g + 1 < gone_.size() ? gone_[g + 1] : ord.size();
    std::size_t m = gone_[g] + 1;
    // Four entries a step (16-byte loads and stores; w < m, so a step's
    // stores never reach entries not yet loaded), then one at a time.
    for (; m + 4 <= end; m += 4, w += 4) {
      std::uint32_t p4[4];
      std::int32_t n4[4], d4[4];
      std::memcpy(p4, o + m, sizeof p4);
      std::memcpy(n4, on + m, sizeof n4);
      std::memcpy(d4, od + m, sizeof d4);
      std::memcpy(o + w, p4, sizeof p4);
      std::memcpy(on + w, n4, sizeof n4);
      std::memcpy(od + w, d4, sizeof d4);
      at[p4[0]] = static_cast<std::uint32_t>(w);
      at[p4[1]] = static_cast<std::uint32_t>(w + 1);
      at[p4[2]] = static_cast<std::uint32_t>(w + 2);
      at[p4[3]] = static_cast<std::uint32_t>(w + 3);
    }
    for (; m < end; ++m, ++w) {
      const std::uint32_t pos = o[m];
      o[w] = pos;
      on[w] = on[m];
      od[w] = od[m];
      at[pos] = static_cast<std::uint32_t>(w);
    }
  }
  ord.resize(w);
  snap_.pending_order_slots_min.resize(w);
  snap_.pending_order_min_duration.resize(w);
}

}  // namespace corral::sim::detail
