// A resource utilization diagram (sge6-reservation-backfill.txt, section 4):
// the free amount of one resource instance as a step function of time.
//
// Stored as sorted breakpoints (time, free) split into blocks of 32-64
// points (square-root decomposition). Every block keeps the min/max free of its
// points plus a lazy offset, so a range debit touches only the two edge blocks
// point by point, and "earliest time with `need` free for `dur` seconds"
// skips whole blocks whose min (or max) already decides the answer. With B
// points this gives O(sqrt B)-ish updates and queries, which keeps a
// conservative pass over 100k pending jobs well under a second.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "coordinator/model.hpp"

namespace corral {

// a + b, clamped to kForever (both are at most kForever, so no overflow).
inline Time sat_add(Time a, Time b) {
  const Time s = a + b;
  return s > kForever ? kForever : s;
}

class Profile {
 public:
  // free = `free0` on [origin, forever); then `events` (time, delta) sorted by
  // time add delta from that time on. Events before origin are clamped to it.
  void build(Time origin, std::int64_t capacity, std::int64_t free0,
             const std::vector<std::pair<Time, std::int64_t>>& events);
  void reset(Time origin, std::int64_t capacity) { build(origin, capacity, capacity, {}); }

  Time origin() const { return origin_; }
  std::int64_t capacity() const { return capacity_; }

  // free += delta on [t0, t1) (t0 is clamped to origin).
  void add(Time t0, Time t1, std::int64_t delta);

  std::int64_t free_at(Time t) const;
  // Minimum free over [t0, t1): capacity minus the maximum utilization in the
  // time frame (SGE utilization_max()).
  std::int64_t min_free(Time t0, Time t1) const;
  // First time >= t0 at which free < need (kForever if never).
  Time run_end(Time t0, std::int64_t need) const;
  // run_end(origin, need), cached until the next add().
  Time run_end_now(std::int64_t need);
  // First time >= t0 at which free >= need (kForever if never).
  Time first_at_least(Time t0, std::int64_t need) const;
  // Earliest t >= t0 with free >= need on all of [t, t + dur) (kForever if never).
  Time earliest(std::int64_t need, Time dur, Time t0) const;
  // Time of the last breakpoint in [t0, t1) (or t0 itself, for the segment
  // holding it) whose free < need; kForever if none.
  Time last_below(Time t0, Time t1, std::int64_t need) const;
  // First breakpoint strictly after t (kForever if none).
  Time next_change(Time t) const;

  std::size_t points() const;

 private:
  struct Point {
    Time t;
    std::int64_t f;  // free, minus the block's lazy offset
  };
  struct Block {
    std::vector<Point> p;
    std::int64_t lazy = 0;
    std::int64_t mn = 0, mx = 0;  // of p[i].f + lazy
  };
  static constexpr std::size_t kBlock = 32;

  // Block and index of the point whose segment contains t (t >= origin).
  std::pair<std::size_t, std::size_t> locate(Time t) const;
  std::pair<std::size_t, std::size_t> locate_from(std::size_t b, std::size_t i, Time t) const;
  // Makes sure a breakpoint exists exactly at t; returns its location.
  std::pair<std::size_t, std::size_t> split_at(Time t);
  // Same, given the location of the point whose segment contains t.
  std::pair<std::size_t, std::size_t> insert_point(std::size_t b, std::size_t i, Time t);
  void refresh(Block& b);
  void refresh_range(Block& b, std::size_t i, std::size_t e, std::int64_t delta);
  void maybe_split(std::size_t bi);

  Time origin_ = 0;
  std::int64_t capacity_ = 0;
  std::vector<Block> blocks_;
  std::vector<Time> firsts_;   // first time of each block, for locate()
  // run_end_now cache: value per need, valid when stamp == gen_.
  std::uint64_t gen_ = 1;
  std::vector<std::pair<std::uint64_t, Time>> cache_;
  // Where earliest() found its answer (valid while hint_gen_ == gen_).
  mutable std::uint64_t hint_gen_ = 0;
  mutable Time hint_t_ = 0;
  mutable std::size_t hint_b_ = 0, hint_i_ = 0;
};

}  // namespace corral
