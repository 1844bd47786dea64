// The core's view of what a job asked for at submit (a proto::JobSpec): the
// same for a standalone corrald's pass and the mesh coordinator's.
#pragma once

#include <utility>

#include "coordinator/model.hpp"
#include "coordinator/names.hpp"
#include "proto/proto.hpp"
#include "proto/spec_check.hpp"

namespace corral {

// The slot range a spec asks for: a -pe range (min-max), else exactly ncpus.
inline std::pair<int, int> slot_range(const proto::JobSpec& s) {
  if (!s.pe.empty() && s.slots_min >= 1 && s.slots_max >= s.slots_min) return {s.slots_min, s.slots_max};
  return {s.ncpus, s.ncpus};
}

// Sets what `s` asks for on `j` (names, sizes, flags, queue). How a policy
// stops it: the job's own choice, else `mode` (the node's preempt_mode).
inline void set_request(Job& j, const proto::JobSpec& s, PreemptMode mode) {
  j.preempt = s.preempt.empty() ? mode : parse_preempt_mode(s.preempt);
  j.name = s.name;
  j.project = s.project;
  j.queue = s.queue;
  j.flow_step = s.flow_step;
  j.immediate = s.immediate;
  j.checkpointable = s.checkpointable;
  j.walltime = s.walltime;
  j.pe = s.pe;
  std::tie(j.slots_min, j.slots_max) = slot_range(s);
  j.mem_mb = proto::mem_for_slots(s, j.slots_min);  // the planner spreads it over slots_min
  j.jobfs_mb = s.jobfs_mb;
  j.reserve = s.reserve;
}

}  // namespace corral
