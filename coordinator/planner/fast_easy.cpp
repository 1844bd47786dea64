// The fast path under fcfs and easy: one reservation at most, so the profile
// after it is known in closed form: free cores never drop after now except
// for the reservation [shadow, shadow + d), and the least free over a window
// that reaches past the shadow time is the free count at the shadow time.
#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstring>
#include <string>

#include "coordinator/planner/fast_path.hpp"
#include "coordinator/planner/general_pass.hpp"

namespace corral::planning {

namespace {

// The scan past the reservation over Snapshot::pending_order_slots_min /
// pending_order_min_duration (model.hpp: contiguous, in the pass's order):
// the first position k' >= k whose job may do something, or `no`. A job is
// passed over when lo < need <= total (fits neither now nor in the least
// free count before the shadow time), and with kShadow also when ash < need
// <= lo and its least duration exceeds room (ends after the shadow time
// where it does not fit). The thresholds are int64 clamped into int32, which
// keeps every compare with an int32 need exact; a duration capped at
// INT32_MAX is a lower bound, so a cap only passes over fewer jobs. Eight
// jobs a step with GCC vector types (two SSE2 compares each), as the full
// path gives the same answer for any job not passed over.
using V4 = std::int32_t __attribute__((vector_size(16)));
inline std::int32_t clamp32(std::int64_t v) {
  return static_cast<std::int32_t>(std::clamp<std::int64_t>(v, INT32_MIN, INT32_MAX));
}
template <bool kShadow>
std::size_t scan_skip(const std::int32_t* need, const std::int32_t* mind, std::size_t k, std::size_t no,
                      std::int32_t lo, std::int32_t total, std::int32_t ash, std::int32_t room) {
  auto passed = [&](std::int32_t n, std::int32_t m) {
    return (n > lo && n <= total) || (kShadow && n > ash && n <= lo && m > room);
  };
  // 16-byte vectors only: wider ones are split through memory without AVX.
  const V4 vlo = V4{} + lo, vtot = V4{} + total, vash = V4{} + ash, vroom = V4{} + room;
  auto keep4 = [&](std::size_t at) {
    V4 n;
    std::memcpy(&n, need + at, sizeof n);
    V4 pass = (n > vlo) & (n <= vtot);
    if constexpr (kShadow) {
      V4 m;
      std::memcpy(&m, mind + at, sizeof m);
      pass |= (n > vash) & (n <= vlo) & (m > vroom);
    }
    return ~pass;
  };
  for (; k + 8 <= no; k += 8) {
    const V4 keep = keep4(k) | keep4(k + 4);
    std::uint64_t w[2];
    std::memcpy(w, &keep, sizeof w);
    if ((w[0] | w[1]) != 0) break;
  }
  for (; k < no; ++k)
    if (!passed(need[k], kShadow ? mind[k] : 0)) break;
  return k;
}

}  // namespace

// The state of one easy or fcfs scan.
struct FastPath::EasyScan {
  const PlannerConfig* c = nullptr;
  Backfill pol = Backfill::Easy;
  std::int64_t free_now = 0;
  std::int64_t pass_used = 0;
  bool prof_ready = false, have_res = false;
  std::int64_t at_now = 0, at_shadow = 0;  // profile values at now / at the shadow time
  Time shadow = kForever;
  int reservations_left = 0;
  std::size_t np = 0;
  bool all_plain = false;
  const std::uint32_t* ord = nullptr;
  std::size_t no = 0;
  // Snapshot::pending_slots_min / pending_min_duration, by pending position
  // (null: not given), and the same laid out in the pass's order.
  const int* need = nullptr;
  const Time* mind = nullptr;
  const std::int32_t* oneed = nullptr;
  const std::int32_t* omind = nullptr;
};

// Past the reservation: passes over the jobs from position k on that do
// nothing, reading only the compact arrays. True when the pass is over.
[[gnu::always_inline]] inline bool FastPath::easy_skip(const Snapshot&, EasyScan& e, std::size_t& k) {
  const std::uint32_t* ord = e.ord;
  const std::size_t no = e.no, np = e.np;
  if (e.free_now <= 0) {
    // Every valid job needs more: the first one ends the pass.
    while (k < no && ord[k] >= np) ++k;
    if (k == no) return true;
    return (e.oneed != nullptr ? e.oneed[k] : e.need[ord[k]]) <= layout_.total;
  }
  // Skipped: n in (lo, total] (fits neither now nor in the least free count
  // before the shadow time; one unsigned compare).
  const std::int64_t lo = std::min(e.free_now, e.at_now);
  const auto span = static_cast<std::uint64_t>(layout_.total - lo);
  if (e.oneed != nullptr) {
    const std::int32_t lo32 = clamp32(lo), tot32 = clamp32(layout_.total);
    if (e.at_shadow >= lo) k = scan_skip<false>(e.oneed, e.omind, k, no, lo32, tot32, 0, 0);
    else k = scan_skip<true>(e.oneed, e.omind, k, no, lo32, tot32, clamp32(e.at_shadow), clamp32(e.shadow - now));
  } else if (e.mind == nullptr || e.at_shadow >= lo) {
    for (; k < no; ++k) {
      const std::uint32_t i = ord[k];
      if (i < np && static_cast<std::uint64_t>(e.need[i] - lo - 1) >= span) break;
    }
  } else {
    // Also n in (at_shadow, lo] with an end surely past the shadow time.
    const Time room = e.shadow - now;
    for (; k < no; ++k) {
      const std::uint32_t i = ord[k];
      if (i >= np) continue;
      const int n = e.need[i];
      if (static_cast<std::uint64_t>(n - lo - 1) < span) continue;
      if (n > e.at_shadow && n <= lo && e.mind[i] > room) continue;
      break;
    }
  }
  return k == no;
}

// j (needing at most the free cores now) starts now if its run leaves the
// reservation whole; true if it started.
[[gnu::always_inline]] inline bool FastPath::easy_start(Plan& plan, const Snapshot& s, const Job& j, EasyScan& e) {
  const int smin = j.slots_min;
  // The duration only matters for a start, or when the job's end decides
  // whether the reservation's lower free count applies.
  Time d = -1, end = 0;
  auto need_end = [&] {
    if (d < 0) {
      d = planned_duration(j, *e.c);
      end = sat_add(now, d);
    }
  };
  const int cap = static_cast<int>(std::min<std::int64_t>(j.slots_max, e.free_now));
  int sl = cap;
  if (e.prof_ready) {
    // m = least free cores over its run: at_shadow counts only if it ends
    // after the shadow time (and is lower).
    std::int64_t m = e.at_now;
    if (e.at_now >= smin && e.have_res && e.at_shadow < e.at_now) {
      need_end();
      if (end > e.shadow) m = e.at_shadow;
    }
    if (m < smin) return false;
    if (cap != smin) sl = static_cast<int>(std::max<std::int64_t>(smin, std::min<std::int64_t>(cap, m)));
    else sl = smin;
  }
  need_end();
  start(plan, s, j, sl, d);
  e.free_now -= sl;
  e.pass_used += sl;
  if (e.prof_ready) {
    e.at_now -= sl;
    if (e.have_res && end > e.shadow) e.at_shadow -= sl;
  }
  return true;
}

// The reservation for j, the first job that cannot start: the earliest time
// the running jobs' and this pass's ends free its cores.
void FastPath::easy_reserve(Plan& plan, const Job& j, EasyScan& e) {
  const int smin = j.slots_min;
  const auto& ends = cores_.ends();
  // Free cores over time before any reservation: non-decreasing.
  std::int64_t v = layout_.total - cores_.used_now() - e.pass_used;
  std::sort(pass_ends_.begin(), pass_ends_.end());
  std::size_t a = 0, b = 0;
  while (a < ends.size() && ends[a].first <= now) v += ends[a++].second;
  if (!e.prof_ready) {
    e.prof_ready = true;
    e.at_now = v;
  }
  Time t = now;
  if (pass_ends_.empty() && v < smin) {
    // No start this pass (most passes that reach here): the running ends
    // alone, in order until enough cores are free, then the rest of that
    // instant (the merge below, without its second list). Ends at kForever
    // never free anything.
    const FreeCores::FEnd* en = ends.data();
    const std::size_t ne = ends.size();
    std::size_t lim = ne;  // ends at kForever sort last
    while (lim > a && en[lim - 1].first >= kForever) --lim;
    // Four ends a step while they leave v short of smin (the cores an end
    // frees are >= 0, so no end inside the four reaches it), then one at a
    // time to the end that does.
    while (a + 4 <= lim) {
      const std::int64_t v4 = v + en[a].second + en[a + 1].second + en[a + 2].second + en[a + 3].second;
      if (v4 >= smin) break;
      v = v4;
      a += 4;
    }
    while (v < smin && a < lim) {
      t = en[a].first;
      v += en[a++].second;
    }
    if (v < smin) t = kForever;
    else
      while (a < ne && en[a].first == t) v += en[a++].second;
  }
  while (v < smin) {
    const Time ta = a < ends.size() ? ends[a].first : kForever;
    const Time tb = b < pass_ends_.size() ? pass_ends_[b].first : kForever;
    t = std::min(ta, tb);
    if (t >= kForever) break;
    while (a < ends.size() && ends[a].first == t) v += ends[a++].second;
    while (b < pass_ends_.size() && pass_ends_[b].first == t) v += pass_ends_[b++].second;
  }
  if (v >= smin && t < kForever) {
    const int sl = j.slots_max == smin
                       ? smin
                       : static_cast<int>(std::max<std::int64_t>(smin, std::min<std::int64_t>(j.slots_max, v)));
    reserve(plan, j, t, sl);
    e.have_res = true;
    e.shadow = t;
    e.at_shadow = v - sl;
    --e.reservations_left;
  }
}

void FastPath::easy(const Snapshot& s, const PlannerConfig& c, const PassState& st, Plan& plan) {
  const Backfill pol = c.backfill;
  const auto& pend = s.pending;
  EasyScan e;
  e.c = &c;
  e.pol = pol;
  e.free_now = std::min(cores_.sum_free(), layout_.total - cores_.used_now());
  e.reservations_left = pol == Backfill::Fcfs ? 0 : 1;
  e.np = pend.size();
  e.all_plain = s.pending_cores_only;  // model.hpp: no job needs the check
  e.ord = st.order.data();
  e.no = st.order.size();
  // Snapshot::pending_slots_min (model.hpp): past the reservation, the jobs
  // that do nothing are passed over in this compact array without reading
  // their Job: those that need more than the free cores (and no more than
  // the machine), and with pending_min_duration those that fit now but not
  // at the shadow time and surely end after it (the path below ends in the
  // same `continue`).
  if (e.all_plain && e.np > 0 && s.pending_slots_min.size() == e.np && pol != Backfill::Fcfs) {
    e.need = s.pending_slots_min.data();
    if (s.pending_min_duration.size() == e.np) e.mind = s.pending_min_duration.data();
  }
  // Snapshot::pending_order_slots_min / _min_duration (model.hpp): when this
  // pass's order is exactly pending_order, the same figures in order
  // (scan_skip), checked by one memcmp unless order_pending says so
  // (PassState::order_is_pending_order).
  const std::size_t no = e.no;
  if (e.all_plain && pol != Backfill::Fcfs && no > 0 && s.pending_order.size() == no &&
      s.pending_order_slots_min.size() == no && s.pending_order_min_duration.size() == no &&
      (st.order_is_pending_order || std::memcmp(e.ord, s.pending_order.data(), no * sizeof *e.ord) == 0)) {
    e.oneed = s.pending_order_slots_min.data();
    e.omind = s.pending_order_min_duration.data();
  }
  for (std::size_t k = 0; k < no; ++k) {
    if ((e.oneed != nullptr || e.need != nullptr) && e.reservations_left == 0 && easy_skip(s, e, k)) return;
    const std::uint32_t idx = e.ord[k];
    if (idx >= e.np) continue;
    const Job& j = pend[idx];
    // Past easy's one reservation, a valid job that needs more cores than
    // are free now does nothing (the path below ends in the same `continue`
    // or `break`); most of a pass's visits end here, so they end early.
    if (e.reservations_left == 0 && j.slots_min > e.free_now && j.slots_min <= layout_.total &&
        pol != Backfill::Fcfs && (e.all_plain || cores_only_job(j))) {
      if (e.free_now <= 0) break;
      continue;
    }
    if (!e.all_plain && !cores_only_job(j)) {
      if (std::string err = check(j); !err.empty()) {
        reject(plan, j, "job " + std::to_string(j.id) + ": " + err);
        continue;
      }
    }
    if (j.slots_min <= e.free_now && easy_start(plan, s, j, e)) continue;
    if (j.slots_min > layout_.total) {
      reject(plan, j, never_fits_text(j));
      continue;
    }
    if (pol == Backfill::Fcfs) break;
    if (e.reservations_left != 0) easy_reserve(plan, j, e);
    if (e.free_now <= 0 && e.reservations_left == 0) break;
  }
}

}  // namespace corral::planning
