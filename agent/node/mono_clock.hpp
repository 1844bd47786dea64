// Milliseconds on the monotonic clock: what the node's deadlines (walltime, checkpoint grace,
// emulated run times) are measured in, immune to the wall clock being set.
#pragma once

#include <cstdint>
#include <ctime>

namespace corral::node {

inline std::int64_t mono_ms() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

}  // namespace corral::node
