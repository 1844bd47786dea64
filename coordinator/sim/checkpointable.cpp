#include "coordinator/sim/checkpointable.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace corral::sim {

namespace {

// SplitMix64 (Steele, Lea, Flood 2014): a fixed, portable generator.
std::uint64_t splitmix(std::uint64_t& s) {
  std::uint64_t z = (s += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

}  // namespace

std::vector<std::uint8_t> mark_checkpointable(std::size_t n, double fraction, std::uint64_t seed) {
  std::vector<std::uint8_t> mark(n, 0);
  const double f = std::clamp(std::isnan(fraction) ? 0.0 : fraction, 0.0, 1.0);
  const auto k = static_cast<std::size_t>(std::llround(f * static_cast<double>(n)));
  if (k >= n) {
    std::fill(mark.begin(), mark.end(), 1);
    return mark;
  }
  // The first k entries of a partial Fisher-Yates shuffle.
  std::vector<std::uint32_t> idx(n);
  std::iota(idx.begin(), idx.end(), 0u);
  std::uint64_t s = seed ^ 0x636B7074ULL;  // its own stream, not the passes' seeds
  for (std::size_t i = 0; i < k; ++i) {
    const std::size_t j = i + static_cast<std::size_t>(splitmix(s) % (n - i));
    std::swap(idx[i], idx[j]);
    mark[idx[i]] = 1;
  }
  return mark;
}

}  // namespace corral::sim
