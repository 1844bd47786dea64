// What a caller that keeps one Snapshot across many passes (the simulator)
// can promise about it, so that a kept Planner skips work: which parts are
// unchanged since the last pass, and figures of the pending jobs laid out
// for the planner's fast path. A pass with no hints (every field at its
// default) gives the same Plan, only slower; every promise below is taken as
// given, never checked.
#pragma once

#include <cstdint>
#include <vector>

#include "coordinator/model.hpp"

namespace corral {

// How `running` changed since earlier passes.
struct RunningHints {
  // A nonzero value promises that `running` is unchanged (every field of
  // every entry, same order) since the last pass given the same value; the
  // caller never reuses a value for other content. Any nonzero value also
  // promises that an entry's placement never changes while its job id and
  // start stay the same (the planner then skips comparing placements).
  std::uint64_t version = 0;
  // With `version`: a nonzero `since` promises that `running` differs from
  // its content of the pass given version == since only at the positions
  // listed in `touched` and past the end of the shorter of the two (entries
  // appended or removed at the end), so only those entries are compared.
  std::uint64_t since = 0;
  std::vector<std::uint32_t> touched;
};

// The pending jobs, as the caller keeps them.
struct PendingHints {
  // true: `pending` is in FIFO order (submit, then id), so the order stage
  // need not check it job by job.
  bool fifo = false;
  // When its size is that of `pending` (> 0): the positions of `pending` in
  // FIFO order, each once; the order stage takes it as the FIFO order
  // (pending itself may then be in any order: the simulator fills the hole
  // a job leaves with the last entry instead of moving every job behind it).
  std::vector<std::uint32_t> order;
  // true: every pending job is valid and needs cores only (planner.hpp
  // cores_only_job()), so the planner need not check each job it visits.
  bool cores_only = false;
  // Read only with cores_only, each when its size is that of `pending`
  // (> 0): entry i is pending[i].slots_min, and at most the planned duration
  // of pending[i] under any PlannerConfig (planner.hpp duration_floor()).
  // The fast easy scan passes over jobs that need more than the free cores,
  // or fit now but would end after the reservation's start, in these
  // compact arrays instead of reading each Job.
  std::vector<int> slots_min;
  std::vector<Time> min_duration;
  // Read only with cores_only, when both sizes are that of `order` (> 0):
  // the same two figures for pending[order[k]] at entry k (the duration
  // capped at INT32_MAX), so a pass whose order is exactly `order` scans
  // them contiguously, several jobs at once.
  std::vector<std::int32_t> order_slots_min;
  std::vector<std::int32_t> order_min_duration;
};

struct PassHints {
  // A nonzero value promises that `nodes` are unchanged since the last pass
  // given the same value, so a kept Planner reuses what it derived from them.
  std::uint64_t nodes_version = 0;
  RunningHints running;
  PendingHints pending;
};

// No promises: what schedule() and Planner::plan assume without hints.
inline const PassHints kNoHints{};

}  // namespace corral
