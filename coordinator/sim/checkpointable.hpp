// Which jobs of a replay may be checkpointed (`corral sim --checkpointable F`).
// In most centres only some applications can write a checkpoint; a trace does
// not say which, so the simulator marks a seeded random share of its jobs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace corral::sim {

// Marks exactly round(fraction x n) of n jobs (entry i: job i in trace order),
// chosen uniformly by a seeded shuffle: the same n, fraction and seed always
// mark the same jobs, on any platform (no std:: distribution is used).
// fraction is clamped to [0, 1].
std::vector<std::uint8_t> mark_checkpointable(std::size_t n, double fraction, std::uint64_t seed);

}  // namespace corral::sim
