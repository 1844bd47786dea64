// A running job as the fast path's free-core state mirrors it (FreeCores):
// its release and its placement flattened, so comparing it with the
// snapshot's entry reads only the snapshot's side from the heap.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "coordinator/model.hpp"

namespace corral::planning {

// RunRec's trivially copyable part.
struct RunRecPod {
  static constexpr std::uint32_t kInline = 10;
  JobId id = 0;
  Time start = 0, end = 0;      // expected_end
  int slots = 0, on_up = 0;     // on_up: slots on up nodes (cores held)
  bool suspended = false, backfilled = false, holds = false;
  // The placement flattened (node, slots, core count, cores...), inline when
  // short, so comparing it reads only the snapshot's side from the heap.
  // A range (Placement::count != 1, no cores) stores -1 - count as its core
  // count.
  std::uint32_t n = 0;
  std::int32_t inl[kInline] = {};
};
struct RunRec : RunRecPod {
  std::vector<std::int32_t> ext;
  const std::int32_t* sig() const { return n <= kInline ? inl : ext.data(); }
  bool empty_pl() const { return n == 0; }
  static std::int32_t third(const Placement& p) {
    return p.count == 1 ? static_cast<std::int32_t>(p.cores.size()) : -1 - static_cast<std::int32_t>(p.count);
  }
  static std::uint32_t ncores(const Placement& p) { return p.count == 1 ? static_cast<std::uint32_t>(p.cores.size()) : 0; }
  void set(const std::vector<Placement>& pl) { set(pl.data(), pl.data() + pl.size()); }
  void set(const Placement* b, const Placement* e) {
    std::uint32_t len = 0;
    for (const Placement* p = b; p != e; ++p) len += 3 + ncores(*p);
    n = len;
    std::int32_t* o = inl;
    if (len > kInline) {
      ext.resize(len);
      o = ext.data();
    }
    for (const Placement& p : std::span<const Placement>(b, e)) {
      *o++ = static_cast<std::int32_t>(p.node);
      *o++ = static_cast<std::int32_t>(p.slots);
      *o++ = third(p);
      if (p.count == 1)
        for (int c : p.cores) *o++ = c;
    }
  }
  bool same(const std::vector<Placement>& pl) const {
    const std::int32_t* q = sig();
    const std::int32_t* e = q + n;
    for (const Placement& p : pl) {
      if (e - q < 3 || q[0] != static_cast<std::int32_t>(p.node) || q[1] != static_cast<std::int32_t>(p.slots) ||
          q[2] != third(p))
        return false;
      q += 3;
      if (p.count != 1) continue;
      if (e - q < static_cast<std::ptrdiff_t>(p.cores.size())) return false;
      for (int c : p.cores)
        if (*q++ != c) return false;
    }
    return q == e;
  }
};

}  // namespace corral::planning
