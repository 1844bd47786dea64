#include "coordinator/planner/profile.hpp"

#include <algorithm>
#include <tuple>

namespace corral {

void Profile::build(Time origin, std::int64_t capacity, std::int64_t free0,
                    const std::vector<std::pair<Time, std::int64_t>>& events) {
  origin_ = origin;
  capacity_ = capacity;
  ++gen_;
  // Blocks are refilled in place: their point vectors keep their storage
  // across builds (the planner rebuilds a profile every pass).
  std::size_t nb = 0;
  auto next_block = [&]() -> Block& {
    if (nb == blocks_.size()) blocks_.emplace_back();
    Block& b = blocks_[nb++];
    b.p.clear();
    b.lazy = 0;
    return b;
  };
  Block* cur = &next_block();
  cur->p.push_back({origin, free0});
  Point last = cur->p.front();
  for (const auto& [t, d] : events) {
    if (t <= origin || last.t == t) {  // events are sorted: merge into the last point
      last.f += d;
      cur->p.back().f = last.f;
      continue;
    }
    if (cur->p.size() == kBlock) cur = &next_block();
    last = {t, last.f + d};
    cur->p.push_back(last);
  }
  blocks_.resize(nb);
  firsts_.resize(nb);
  for (std::size_t b = 0; b < nb; ++b) {
    refresh(blocks_[b]);
    firsts_[b] = blocks_[b].p.front().t;
  }
}

void Profile::refresh(Block& b) {
  std::int64_t mn = b.p.front().f, mx = mn;
  for (const Point& q : b.p) {
    mn = std::min(mn, q.f);
    mx = std::max(mx, q.f);
  }
  b.mn = mn + b.lazy;
  b.mx = mx + b.lazy;
}

std::size_t Profile::points() const {
  std::size_t n = 0;
  for (const Block& b : blocks_) n += b.p.size();
  return n;
}

std::pair<std::size_t, std::size_t> Profile::locate(Time t) const {
  // Most queries start at the origin (now): no search.
  if (t <= origin_) return {0, 0};
  // Last block whose first point is <= t, then the last point <= t in it.
  const auto bit = std::upper_bound(firsts_.begin(), firsts_.end(), t);
  const std::size_t lo = bit == firsts_.begin() ? 0 : static_cast<std::size_t>(bit - firsts_.begin()) - 1;
  const auto& p = blocks_[lo].p;
  auto it = std::upper_bound(p.begin(), p.end(), t, [](Time x, const Point& q) { return x < q.t; });
  const std::size_t i = it == p.begin() ? 0 : static_cast<std::size_t>(it - p.begin()) - 1;
  return {lo, i};
}

std::pair<std::size_t, std::size_t> Profile::locate_from(std::size_t b, std::size_t i, Time t) const {
  // Like locate(t) for t >= the time of point (b, i), but searching forward
  // from there: windows of short jobs usually end a few points later.
  if (b + 1 < firsts_.size() && firsts_[b + 1] <= t) {
    // Gallop: the target block is usually near.
    std::size_t lo = b + 1, step = 1;
    while (lo + step < firsts_.size() && firsts_[lo + step] <= t) {
      lo += step;
      step *= 2;
    }
    const std::size_t hi = std::min(firsts_.size(), lo + step);
    const auto it = std::upper_bound(firsts_.begin() + static_cast<std::ptrdiff_t>(lo), firsts_.begin() + static_cast<std::ptrdiff_t>(hi), t);
    b = static_cast<std::size_t>(it - firsts_.begin()) - 1;
    i = 0;
  }
  const auto& p = blocks_[b].p;
  for (int probe = 0; probe < 8; ++probe) {
    if (i + 1 >= p.size() || p[i + 1].t > t) return {b, i};
    ++i;
  }
  auto it = std::upper_bound(p.begin() + static_cast<std::ptrdiff_t>(i), p.end(), t,
                             [](Time x, const Point& q) { return x < q.t; });
  return {b, static_cast<std::size_t>(it - p.begin()) - 1};
}

void Profile::maybe_split(std::size_t bi) {
  if (blocks_[bi].p.size() <= 2 * kBlock) return;
  Block nb;
  nb.lazy = blocks_[bi].lazy;
  auto& p = blocks_[bi].p;
  const auto mid = p.begin() + static_cast<std::ptrdiff_t>(p.size() / 2);
  nb.p.assign(mid, p.end());
  p.erase(mid, p.end());
  refresh(blocks_[bi]);
  refresh(nb);
  firsts_.insert(firsts_.begin() + static_cast<std::ptrdiff_t>(bi) + 1, nb.p.front().t);
  blocks_.insert(blocks_.begin() + static_cast<std::ptrdiff_t>(bi) + 1, std::move(nb));
}

std::pair<std::size_t, std::size_t> Profile::split_at(Time t) {
  // earliest() remembers where its answer is: the reservation that follows
  // it starts there, so no search is needed.
  auto [b, i] = hint_gen_ == gen_ && hint_t_ == t ? std::pair<std::size_t, std::size_t>{hint_b_, hint_i_} : locate(t);
  return insert_point(b, i, t);
}

std::pair<std::size_t, std::size_t> Profile::insert_point(std::size_t b, std::size_t i, Time t) {
  auto& p = blocks_[b].p;
  if (p[i].t == t) return {b, i};
  // The new point repeats its left neighbour's value: min/max stay valid.
  p.insert(p.begin() + static_cast<std::ptrdiff_t>(i) + 1, Point{t, p[i].f});
  if (p.size() <= 2 * kBlock) return {b, i + 1};
  maybe_split(b);
  return locate(t);
}

// After points [i, e) of block bl changed by delta: its min/max without a
// rescan unless a changed point held the extreme that moved away.
void Profile::refresh_range(Block& bl, std::size_t i, std::size_t e, std::int64_t delta) {
  std::int64_t cmin = bl.p[i].f, cmax = cmin;
  for (std::size_t k = i + 1; k < e; ++k) {
    cmin = std::min(cmin, bl.p[k].f);
    cmax = std::max(cmax, bl.p[k].f);
  }
  if (delta < 0) {
    if (cmax - delta + bl.lazy >= bl.mx) {
      refresh(bl);
      return;
    }
    bl.mn = std::min(bl.mn, cmin + bl.lazy);
  } else {
    if (cmin - delta + bl.lazy <= bl.mn) {
      refresh(bl);
      return;
    }
    bl.mx = std::max(bl.mx, cmax + bl.lazy);
  }
}

void Profile::add(Time t0, Time t1, std::int64_t delta) {
  t0 = std::max(t0, origin_);
  if (t1 <= t0 || delta == 0) return;
  auto [b, i] = split_at(t0);
  ++gen_;
  if (t1 < kForever) {
    // t1 is found walking forward from t0 (windows are usually short).
    const auto [b1, i1] = locate_from(b, i, t1);
    if (blocks_[b1].p[i1].t != t1) {
      const std::size_t nblocks = blocks_.size();
      insert_point(b1, i1, t1);
      if (blocks_.size() != nblocks && b1 == b) std::tie(b, i) = locate(t0);  // t0's block was split
    }
  }
  // Walk forward from t0: whole blocks before t1 take the delta lazily, the
  // block holding t1 point by point.
  for (; b < blocks_.size(); ++b, i = 0) {
    Block& bl = blocks_[b];
    const bool whole = i == 0 && (b + 1 < blocks_.size() ? firsts_[b + 1] <= t1 : t1 >= kForever);
    if (whole) {
      bl.lazy += delta;
      bl.mn += delta;
      bl.mx += delta;
      continue;
    }
    std::size_t e = i;
    while (e < bl.p.size() && bl.p[e].t < t1) bl.p[e++].f += delta;
    if (e > i) refresh_range(bl, i, e, delta);
    if (e < bl.p.size()) break;
  }
}

std::int64_t Profile::free_at(Time t) const {
  const auto [b, i] = locate(std::max(t, origin_));
  return blocks_[b].p[i].f + blocks_[b].lazy;
}

std::int64_t Profile::min_free(Time t0, Time t1) const {
  t0 = std::max(t0, origin_);
  auto [b, i] = locate(t0);
  std::int64_t mn = blocks_[b].p[i].f + blocks_[b].lazy;
  for (; b < blocks_.size(); ++b, i = 0) {
    const Block& bl = blocks_[b];
    if (bl.p.front().t >= t1) break;
    if (i == 0 && bl.p.back().t < t1) {
      mn = std::min(mn, bl.mn);
      continue;
    }
    for (; i < bl.p.size() && bl.p[i].t < t1; ++i) mn = std::min(mn, bl.p[i].f + bl.lazy);
  }
  return mn;
}

Time Profile::run_end(Time t0, std::int64_t need) const {
  t0 = std::max(t0, origin_);
  auto [b, i] = locate(t0);
  for (; b < blocks_.size(); ++b, i = 0) {
    const Block& bl = blocks_[b];
    if (i == 0 && bl.mn >= need) continue;
    for (; i < bl.p.size(); ++i)
      if (bl.p[i].f + bl.lazy < need) return std::max(bl.p[i].t, t0);
  }
  return kForever;
}

Time Profile::run_end_now(std::int64_t need) {
  if (need < 0 || need >= 4096) return run_end(origin_, need);
  const auto k = static_cast<std::size_t>(need);
  if (cache_.size() <= k) cache_.resize(k + 1, {0, 0});
  if (cache_[k].first != gen_) cache_[k] = {gen_, run_end(origin_, need)};
  return cache_[k].second;
}

Time Profile::first_at_least(Time t0, std::int64_t need) const {
  t0 = std::max(t0, origin_);
  auto [b, i] = locate(t0);
  for (; b < blocks_.size(); ++b, i = 0) {
    const Block& bl = blocks_[b];
    if (i == 0 && bl.mx < need) continue;
    for (; i < bl.p.size(); ++i)
      if (bl.p[i].f + bl.lazy >= need) return std::max(bl.p[i].t, t0);
  }
  return kForever;
}

Time Profile::last_below(Time t0, Time t1, std::int64_t need) const {
  // Scan backwards from the point containing t1 - 1 down to the one holding t0.
  if (t1 <= t0) return kForever;
  auto [b0, i0] = locate(t0);
  auto [b, i] = locate(t1 - 1);
  for (;;) {
    const Block& bl = blocks_[b];
    const std::size_t lo = b == b0 ? i0 : 0;
    if (!(lo == 0 && bl.mn >= need)) {
      for (std::size_t k = i + 1; k-- > lo;)
        if (bl.p[k].f + bl.lazy < need) return std::max(bl.p[k].t, t0);
    }
    if (b == b0) return kForever;
    --b;
    i = blocks_[b].p.size() - 1;
  }
}

Time Profile::earliest(std::int64_t need, Time dur, Time t0) const {
  t0 = std::max(t0, origin_);
  if (need <= 0) return t0;
  if (need > capacity_) return kForever;
  // A candidate is the first point with free >= need. Its window is scanned
  // forward, the next candidate sought after the first shortage, for the
  // first 64 window points of the call (small profiles: no search at all);
  // after that a window is checked from its end backwards, so a round jumps
  // past the LAST shortage inside it and long stretches of short gaps are
  // skipped together (large profiles). Blocks whose max (seek) or
  // min (window) decides are skipped whole.
  // Plain variables, not a structured binding: the lambdas below capture them (clang 14 cannot).
  const auto at = locate(t0);
  std::size_t b = at.first, i = at.second;
  const std::size_t nb = blocks_.size();
  auto val = [&](std::size_t bb, std::size_t ii) { return blocks_[bb].p[ii].f + blocks_[bb].lazy; };
  // Advance (b, i) to the first point at/after it with free >= need.
  auto seek_ok = [&]() -> bool {
    std::size_t bb = b, ii = i;  // locals: the loops keep them in registers
    for (; bb < nb; ++bb, ii = 0) {
      const Block& bl = blocks_[bb];
      if (ii == 0 && bl.mx < need) continue;
      const Point* q = bl.p.data();
      const std::size_t n = bl.p.size();
      const std::int64_t want = need - bl.lazy;
      while (ii < n && q[ii].f < want) ++ii;
      if (ii < n) {
        b = bb;
        i = ii;
        return true;
      }
    }
    return false;
  };
  auto answer = [&](Time cand) {
    hint_gen_ = gen_;  // the point holding cand, for the add() that usually follows
    hint_t_ = cand;
    hint_b_ = b;
    hint_i_ = i;
    return cand;
  };
  if (!seek_ok()) return kForever;
  int budget = 64;  // window points scanned forward in this call, then jumps
  for (;;) {
    const Time cand = std::max(blocks_[b].p[i].t, t0);
    const Time end = sat_add(cand, dur);
    // Forward probe of the window (cand, end).
    std::size_t sb = b, si = i + 1;
    enum { kClear, kShort, kFar } res = kFar;
    for (;; ++sb, si = 0) {
      if (sb == nb) {
        res = kClear;
        break;
      }
      const Block& bl = blocks_[sb];
      const Point* q = bl.p.data();
      const std::size_t n = bl.p.size();
      if (si >= n) continue;
      if (q[si].t >= end) {
        res = kClear;
        break;
      }
      if (si == 0 && bl.mn >= need && q[n - 1].t < end) {  // no shortage in the whole block
        --budget;
        continue;
      }
      const std::int64_t want = need - bl.lazy;
      const std::size_t from = si;
      const std::size_t cap = budget > 0 ? std::min(n, si + static_cast<std::size_t>(budget)) : si;
      while (si < cap && q[si].t < end && q[si].f >= want) ++si;
      budget -= static_cast<int>(si - from);
      if (si == n) continue;
      if (q[si].t >= end) res = kClear;
      else if (si < cap) res = kShort;  // else kFar: (sb, si) unchecked, t < end
      break;
    }
    if (res == kClear) return answer(cand);
    if (res == kShort && budget > 0) {  // forward mode: the next candidate follows it
      b = sb;
      i = si + 1;
      if (!seek_ok()) return kForever;
      continue;
    }
    // (sb, si) has t < end and is a shortage (kShort) or unchecked (kFar);
    // everything before it is clear. Find the last shortage in
    // [t(sb, si), end) scanning backwards, and jump past it.
    auto [eb, ei] = end >= kForever ? std::pair<std::size_t, std::size_t>{nb - 1, blocks_.back().p.size() - 1}
                                    : locate_from(sb, si, end - 1);
    bool found = false;
    for (;;) {
      const Block& bl = blocks_[eb];
      const std::size_t lo = eb == sb ? si : 0;
      if (!(lo == 0 && bl.mn >= need)) {
        for (std::size_t k = ei + 1; k-- > lo;)
          if (val(eb, k) < need) {
            ei = k;
            found = true;
            break;
          }
      }
      if (found || eb == sb) break;
      --eb;
      ei = blocks_[eb].p.size() - 1;
    }
    if (!found) return answer(cand);
    b = eb;
    i = ei + 1;
    if (!seek_ok()) return kForever;
  }
}

Time Profile::next_change(Time t) const {
  auto [b, i] = locate(std::max(t, origin_));
  if (i + 1 < blocks_[b].p.size()) return blocks_[b].p[i + 1].t;
  if (b + 1 < blocks_.size()) return blocks_[b + 1].p.front().t;
  return kForever;
}

}  // namespace corral
