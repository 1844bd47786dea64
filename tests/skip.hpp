// Skipping a test case where the facility it needs is absent (root, cgroups v1): the case
// records why and returns; tests/catch_main.cpp then exits 77, meson's SKIP code, when every test
// case that ran skipped, instead of a pass. Real runs are unchanged.
#pragma once

#include <string>

namespace corral_test {

// Marks the running test case as skipped for `why` (printed at the end of the run).
void skip(const std::string& why);

}  // namespace corral_test

// In a test case (Catch's WARN must be in scope): says why in the case's log and marks it skipped;
// the caller returns.
#define CORRAL_SKIP(why)                \
  do {                                  \
    WARN("SKIPPED: " << (why));         \
    corral_test::skip(why);             \
  } while (0)
