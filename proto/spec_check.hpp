// What a job request may hold, checked once for both sides: `corral submit` refuses a bad request
// before sending it, and corrald refuses the same request from any client (a raw one included)
// with the same words. Node-dependent checks (cores, memory, queues) stay in corrald.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>

#include "proto/proto.hpp"

namespace corral::proto {

// A job's name becomes part of its default output files' names ("<name>.o<id>"), which must fit
// in one path component (255 bytes) with the suffix.
inline constexpr std::size_t kMaxJobName = 200;
inline constexpr std::int64_t kMaxWalltime = 10LL * 365 * 24 * 3600;  // seconds: ten years
inline constexpr std::int32_t kMaxCpus = 1000000;
inline constexpr std::int64_t kMaxSizeMb = 1LL << 40;                  // MiB: one EiB
inline constexpr std::size_t kMaxPath = 4095;                          // PATH_MAX less the NUL
inline constexpr std::size_t kMaxLabel = 64;                           // queue, project, pe names
inline constexpr std::int32_t kUmaskUnset = -1;                        // JobSpec::umask not sent

// Why `name` cannot be a job name, or "" when it can. An empty name is "not given" (the
// default applies) and passes.
std::string check_job_name(std::string_view name);

// Why `states` (stat's -s: state names of proto::state, comma-separated) is not a list of
// states, or "" when it is (or is empty: any state).
std::string check_states(std::string_view states);
// Whether `state` is one of `states` (as check_states accepts; "" matches every state).
bool state_listed(std::string_view states, std::string_view state);

// Why `s` cannot be accepted, or "" when it can (empty name, queue and walltime are "not given").
std::string check_spec(const JobSpec& s);

// The fewest slots job `s` starts on: its cpus, or the low end of its parallel environment's
// slot range; at least 1.
inline std::int32_t least_slots(const JobSpec& s) { return std::max(1, s.pe.empty() ? s.ncpus : s.slots_min); }

// The memory (MiB) job `s` holds when it starts on `slots` slots: Grid Engine's h_vmem is per slot
// (mem_per_slot_mb), else mem_mb is the whole job's (0: not limited).
inline std::int64_t mem_for_slots(const JobSpec& s, std::int64_t slots) {
  return s.mem_per_slot_mb > 0 ? s.mem_per_slot_mb * slots : s.mem_mb;
}

// Why array `id` (of tasks `a`) has no task `index`, or "" when it has: the words every side
// answers a user who names ID[INDEX] with.
std::string check_task_index(std::uint64_t id, const ArraySpec& a, std::int64_t index);

// `text` with control characters and backslashes written as \n, \t, \xHH, \\: safe to print in
// one line of a log or a table.
std::string printable(std::string_view text);

}  // namespace corral::proto
