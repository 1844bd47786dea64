// How much random or replayed work the heaviest tests do. CORRAL_TEST_EFFORT, a fraction in
// (0, 1] (default 1), scales their seed counts and trace lengths: the sanitizer build runs them at
// a fraction (tools/test), every case and code path still taken on fewer seeds, and the gcc build
// runs them whole.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <stdexcept>
#include <string>

namespace corral_test {

inline double effort() {
  const char* e = std::getenv("CORRAL_TEST_EFFORT");
  if (!e || !*e) return 1.0;
  char* end = nullptr;
  double f = std::strtod(e, &end);
  if (*end != '\0' || !(f > 0.0 && f <= 1.0))
    throw std::invalid_argument(std::string("CORRAL_TEST_EFFORT: expected a fraction in (0, 1], got '") + e + "'");
  return f;
}

// n scaled by the effort, at least `least` (and never more than n).
template <typename N>
N scaled(N n, N least = 1) {
  const auto s = static_cast<N>(std::ceil(static_cast<double>(n) * effort()));
  return std::min(n, std::max(s, least));
}

}  // namespace corral_test
