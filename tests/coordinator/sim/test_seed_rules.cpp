// `corral sim` and the seed documents' rules it shares with corrald:
// DURATION_OFFSET on running jobs too (--duration-offset), the MONITOR file
// appended as Grid Engine's, the textbook reserve policy on requested times,
// PBA's suspend-or-requeue as each job's choice (--preempt-mode,
// --suspend-users), and the split factor refused in names.hpp's words.
#include <catch2/catch.hpp>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/coordinator/sim/run_corral.hpp"
#include "tests/monitor_text.hpp"

#ifndef SAMPLE_SWF
#error "SAMPLE_SWF must name tests/coordinator/sim/data/sample.swf"
#endif

using corral_test::lines_with;
using corral_test::monitor_field;

namespace {

const std::string kSample = SAMPLE_SWF;

}  // namespace

TEST_CASE("corral sim --duration-offset: a running job keeps the offset, the reservation holds", "[seed][monitor]") {
  // Sample on one node of 4 cores under EASY: job 1 (2 procs, 100 s) starts
  // at 0; job 3 (4 procs) waits for it. With an offset of 60 s job 1 is
  // planned for 160 s in every pass, STARTING and RUNNING alike, and job 3
  // is reserved for 160 in every pass (Grid Engine: the offset is the gross
  // time until the resources are free again).
  TempDir tmp;
  const Run r = corral_sim(kSample + " --policy easy --nodes 1 --cores 4 --duration-offset 60 --monitor " +
                           (tmp / "schedule"));
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(nlohmann::json::parse(r.out)["duration_offset"] == 60);
  const std::string text = slurp(tmp / "schedule");
  INFO(text);
  const auto one = lines_with(text, "1:1:");
  REQUIRE(one.size() >= 2);
  CHECK(monitor_field(one.front(), 2) == "STARTING");
  bool running = false;
  for (const auto& l : one) {
    CHECK(monitor_field(l, 4) == "160");
    running |= monitor_field(l, 2) == "RUNNING";
  }
  CHECK(running);
  const auto three = lines_with(text, "3:1:RESERVING:");
  REQUIRE(!three.empty());
  for (const auto& l : three) CHECK(monitor_field(l, 3) == "160");
  // Without the option the replay has no offset (SWF run times are exact).
  const Run plain = corral_sim(kSample + " --policy easy --nodes 1 --cores 4");
  REQUIRE(plain.code == 0);
  CHECK_FALSE(nlohmann::json::parse(plain.out).contains("duration_offset"));
  CHECK(corral_sim(kSample + " --duration-offset 1x").err.find("--duration-offset: expected a duration") !=
        std::string::npos);
}

TEST_CASE("corral sim --monitor appends to the schedule file, as Grid Engine and corrald", "[seed][monitor]") {
  TempDir tmp;
  std::ofstream(tmp / "schedule") << "kept\n";
  const std::string args = kSample + " --policy easy --nodes 1 --cores 4 --monitor " + (tmp / "schedule");
  REQUIRE(corral_sim(args).code == 0);
  const std::string once = slurp(tmp / "schedule");
  CHECK(once.rfind("kept\n::::::::\n", 0) == 0);  // nothing truncated
  REQUIRE(corral_sim(args).code == 0);
  const std::string twice = slurp(tmp / "schedule");
  CHECK(twice == once + once.substr(5));  // the second replay's lines after the first's
}

TEST_CASE("corral sim --policy reserve plans with requested times unless --predict", "[seed]") {
  const Run r = corral_sim(kSample + " --policy reserve");
  REQUIRE(r.code == 0);
  CHECK(nlohmann::json::parse(r.out)["predict"] == false);
  const Run p = corral_sim(kSample + " --policy reserve --predict");
  REQUIRE(p.code == 0);
  CHECK(nlohmann::json::parse(p.out)["predict"] == true);
}

TEST_CASE("corral sim: PBA suspends or requeues as each job chose (--preempt-mode, --suspend-users)", "[seed]") {
  // 4 processors; user 1's job (4 procs, 10000 s) fills the machine; user 2,
  // of the allocated project, submits a 2-slot job at 10 s. After more than
  // 300 s pending it takes user 1's job's slots: requeued (work lost: 311 s
  // run again) or suspended (resumed later: charged 10000 s in all).
  TempDir tmp;
  std::ofstream(tmp / "t.swf") << "; MaxProcs: 4\n"
                               << "1 0 -1 10000 4 -1 -1 4 10000 -1 1 1 -1 -1 -1 -1 -1 -1\n"
                               << "2 10 -1 3600 2 -1 -1 2 3600 -1 1 2 -1 -1 -1 -1 -1 -1\n";
  std::ofstream(tmp / "p.plan") << "project chip\nmember chip u:2\nalloc chip +0 2\n"
                                   "queue normal priority=2 charge=1\n";
  const std::string base = (tmp / "t.swf") + " --policy easy --projects " + (tmp / "p.plan");
  auto su_none = [](const Run& r) {
    INFO(r.err);
    REQUIRE(r.code == 0);
    const auto js = nlohmann::json::parse(r.out);
    CHECK(js["preemptions"] == 1);
    return js["projects"]["(none)"]["su_charged"].get<double>();
  };
  CHECK(su_none(corral_sim(base)) == Approx((311.0 + 10000.0) * 4 / 3600));                        // requeue
  CHECK(su_none(corral_sim(base + " --suspend-users 1")) == Approx(10000.0 * 4 / 3600));           // its choice
  CHECK(su_none(corral_sim(base + " --preempt-mode suspend")) == Approx(10000.0 * 4 / 3600));      // every job's
  CHECK(su_none(corral_sim(base + " --preempt-mode suspend --suspend-users 7")) == Approx(10000.0 * 4 / 3600));
  const Run bad = corral_sim(base + " --preempt-mode kill");
  CHECK(bad.code == 2);
  CHECK(bad.err.find("--preempt-mode: expected requeue or suspend, got 'kill'") != std::string::npos);
  CHECK(corral_sim(kSample + " --suspend-users 1").err.find("--suspend-users needs --projects FILE") !=
        std::string::npos);
}

TEST_CASE("corral sim --split-factor is refused in the words corrald's split_factor uses", "[seed]") {
  const Run r = corral_sim(kSample + " --split-factor 0");
  CHECK(r.code == 2);
  CHECK(r.err.find("--split-factor: expected a number in (0, 1], got '0'") != std::string::npos);
  CHECK(corral_sim(kSample + " --split-factor 0.25 --policy checkpoint").code == 0);
}
