// The fast path's memory of its last conservative pass: each job's outcome
// in order, so the next pass can keep them when only arrivals and on-time
// ends happened since (FastPath::conservative_reuse).
#pragma once

#include <cstdint>
#include <vector>

#include "coordinator/model.hpp"

namespace corral::planning {

struct ConservativeMemo {
  enum Kind : std::uint8_t { kNone, kStart, kReserve, kReject };
  struct Entry {
    JobId id;
    int smin, smax;
    Time d;
    std::uint8_t kind;
    Time t;
    int s;
  };
  std::vector<Entry> entries, next;  // the last pass's / the one being made
  bool valid = false;                // entries may be reused
  Time now = 0;                      // the last pass's time
};

}  // namespace corral::planning
