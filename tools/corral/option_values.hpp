// Option values of `corral sim` and `corral sim compare`, refused as CLI11
// refuses (a ValidationError, which parse_or_help turns into a usage error).
#pragma once

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstdlib>
#include <string>

namespace corral::cli {

[[noreturn]] inline void refuse(const std::string& why) { throw CLI::ValidationError(why); }

// `v` as a whole number in [lo, hi], else refused naming `opt`.
inline long long whole(const std::string& opt, const std::string& v, long long lo, long long hi) {
  errno = 0;
  char* end = nullptr;
  const long long x = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || end != v.c_str() + v.size() || errno == ERANGE || x < lo || x > hi)
    refuse(opt + ": '" + v + "' is not a whole number in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return x;
}

}  // namespace corral::cli
