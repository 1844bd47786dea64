// The Catch2 main of every test binary: Catch's own, plus meson's skip code. A test case that
// calls corral_test::skip() (tests/skip.hpp) counts as skipped; when every test case that ran
// was skipped (not root, no cgroups v1, ...) the binary prints why and exits 77, which meson
// reports as SKIP rather than OK (meson's exit-code protocol). Failures still fail.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdio>
#include <set>
#include <string>

#include "skip.hpp"

namespace {
int g_cases = 0;
int g_skipped = 0;
bool g_this_skipped = false;
std::set<std::string> g_why;

struct SkipCounter : Catch::TestEventListenerBase {
  using TestEventListenerBase::TestEventListenerBase;
  void testCaseStarting(Catch::TestCaseInfo const& info) override {
    TestEventListenerBase::testCaseStarting(info);
    g_this_skipped = false;
  }
  void testCaseEnded(Catch::TestCaseStats const& stats) override {
    TestEventListenerBase::testCaseEnded(stats);
    ++g_cases;
    if (g_this_skipped) ++g_skipped;
  }
};
}  // namespace

CATCH_REGISTER_LISTENER(SkipCounter)

void corral_test::skip(const std::string& why) {
  g_this_skipped = true;
  g_why.insert(why);
}

int main(int argc, char* argv[]) {
  int rc = Catch::Session().run(argc, argv);
  if (g_skipped == 0) return rc;
  std::string why;
  for (const auto& w : g_why) why += (why.empty() ? "" : "; ") + w;
  if (rc == 0 && g_skipped == g_cases) {
    std::printf("SKIP: all %d test case(s) skipped: %s\n", g_cases, why.c_str());
    return 77;  // meson: SKIP
  }
  std::printf("note: %d of %d test case(s) skipped: %s\n", g_skipped, g_cases, why.c_str());
  return rc;
}
