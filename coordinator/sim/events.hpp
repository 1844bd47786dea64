// The simulator's event queue (simulator.hpp): completion and checkpoint-end
// events in time order. A header of its own so that the tests can check it
// against std::priority_queue directly.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "coordinator/model.hpp"

namespace corral::sim::detail {

// An event of job idx (internal index); gen tells a live event from a stale one.
struct Ev {
  Time t;
  std::uint32_t idx, gen;
  bool operator>(const Ev& o) const { return t != o.t ? t > o.t : idx > o.idx; }
};

// Events, earliest (t, idx) first. While small, an array sorted latest
// first: a push is a binary search and a short move of the entries after
// it, a pop takes the last entry (a binary heap's sift loops cost more
// instructions with the 30-400 running jobs of the archive traces). Past
// kSortedMax entries, a binary heap (std::push_heap / pop_heap) from then
// on. Pops come in the order of std::priority_queue<Ev, ..., std::greater<Ev>>:
// (t, idx) is a total order except between events of one job at one time
// (the simulator's stale and live ones: it skips the stale one whichever
// comes first).
class EventQueue {
 public:
  static constexpr std::size_t kSortedMax = 512;
  bool empty() const { return v_.empty(); }
  std::size_t size() const { return v_.size(); }
  bool is_heap() const { return heap_; }
  const Ev& top() const { return heap_ ? v_.front() : v_.back(); }
  void push(const Ev& e) {
    if (!heap_ && v_.size() >= kSortedMax) {
      std::make_heap(v_.begin(), v_.end(), std::greater<Ev>());
      heap_ = true;
    }
    if (heap_) {
      v_.push_back(e);
      std::push_heap(v_.begin(), v_.end(), std::greater<Ev>());
      return;
    }
    // The first entry e is later than (the entries are latest first): a
    // binary search without branches on the entries (a select a step: the
    // steps' branches on the compares mispredicted about 2.6 times a push).
    std::size_t pos = 0;
    if (!v_.empty()) {
      const Ev* b = v_.data();
      for (std::size_t len = v_.size(); len > 1;) {
        const std::size_t half = len / 2;
        b = later(e, b[half]) ? b : b + half;
        len -= half;
      }
      pos = static_cast<std::size_t>(b - v_.data()) + static_cast<std::size_t>(!later(e, *b));
    }
    v_.insert(v_.begin() + static_cast<std::ptrdiff_t>(pos), e);
  }
  void pop() {
    if (heap_) std::pop_heap(v_.begin(), v_.end(), std::greater<Ev>());
    v_.pop_back();
  }

 private:
  // x > y (Ev::operator>) as one expression of flags.
  static bool later(const Ev& x, const Ev& y) {
    return (x.t > y.t) | ((x.t == y.t) & (x.idx > y.idx));
  }
  std::vector<Ev> v_;
  bool heap_ = false;
};

}  // namespace corral::sim::detail
