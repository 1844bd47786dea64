#include "coordinator/planner/profile.hpp"

#include <algorithm>

namespace corral {

void Profile::build(Time origin, std::int64_t capacity, std::int64_t free0,
                    const std::vector<std::pair<Time, std::int64_t>>& events) {
  origin_ = origin;
  capacity_ = capacity;
  ++gen_;
  blocks_.clear();
  firsts_.clear();
  std::vector<Point> pts;
  pts.reserve(events.size() + 1);
  pts.push_back({origin, free0});
  for (const auto& [t, d] : events) {
    if (t <= origin) {
      pts.front().f += d;  // events are sorted: only the first point exists yet
    } else if (pts.back().t == t) {
      pts.back().f += d;
    } else {
      pts.push_back({t, pts.back().f + d});
    }
  }
  for (std::size_t i = 0; i < pts.size(); i += kBlock) {
    Block b;
    const std::size_t e = std::min(pts.size(), i + kBlock);
    b.p.assign(pts.begin() + static_cast<std::ptrdiff_t>(i), pts.begin() + static_cast<std::ptrdiff_t>(e));
    refresh(b);
    firsts_.push_back(b.p.front().t);
    blocks_.push_back(std::move(b));
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
  auto [b, i] = locate(t);
  auto& p = blocks_[b].p;
  if (p[i].t == t) return {b, i};
  // The new point repeats its left neighbour's value: min/max stay valid.
  p.insert(p.begin() + static_cast<std::ptrdiff_t>(i) + 1, Point{t, p[i].f});
  if (p.size() <= 2 * kBlock) return {b, i + 1};
  maybe_split(b);
  return locate(t);
}

void Profile::add(Time t0, Time t1, std::int64_t delta) {
  t0 = std::max(t0, origin_);
  if (t1 <= t0 || delta == 0) return;
  ++gen_;
  if (t1 < kForever) split_at(t1);
  auto [b, i] = split_at(t0);
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
    if (e > i) refresh(bl);
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
  // Positions (block, index) walk forward only; one binary search per round.
  auto [b, i] = locate(t0);
  auto val = [&](std::size_t bb, std::size_t ii) { return blocks_[bb].p[ii].f + blocks_[bb].lazy; };
  // Advance (b, i) to the first point at/after it with free >= need.
  auto seek_ok = [&]() -> bool {
    for (; b < blocks_.size(); ++b, i = 0) {
      const Block& bl = blocks_[b];
      if (i == 0 && bl.mx < need) continue;
      for (; i < bl.p.size(); ++i)
        if (val(b, i) >= need) return true;
    }
    return false;
  };
  if (!seek_ok()) return kForever;
  for (;;) {
    const Time cand = std::max(blocks_[b].p[i].t, t0);
    const Time end = sat_add(cand, dur);
    // Each round jumps past the LAST shortage inside [cand, end), so short
    // gaps are skipped together rather than one by one.
    auto [eb, ei] = end >= kForever ? std::pair<std::size_t, std::size_t>{blocks_.size() - 1, blocks_.back().p.size() - 1}
                                    : locate_from(b, i, end - 1);
    bool found = false;
    for (;;) {
      const Block& bl = blocks_[eb];
      const std::size_t lo = eb == b ? i : 0;
      if (!(lo == 0 && bl.mn >= need)) {
        for (std::size_t k = ei + 1; k-- > lo;)
          if (val(eb, k) < need) {
            ei = k;
            found = true;
            break;
          }
      }
      if (found || eb == b) break;
      --eb;
      ei = blocks_[eb].p.size() - 1;
    }
    if (!found) return cand;
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
