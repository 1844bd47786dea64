// corrald's charge ledger file (agent/ledger_book.hpp): what is charged survives a reopen and a
// compaction, a run is never charged twice, and damage follows the journal's rules.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "agent/ledger_book.hpp"
#include "coordinator/nci/nci.hpp"
#include "tests/temp_dir.hpp"

using corral::Job;
using corral::Time;
using corral::agent::LedgerBook;

namespace {
Job ledger_job(corral::JobId id, const std::string& project, const std::string& queue = "normal") {
  Job j;
  j.id = id;
  j.user = "alice";
  j.project = project;
  j.queue = queue;
  return j;
}
constexpr Time kNow = 1795000000;  // a Thursday
}  // namespace

TEST_CASE("ledger file: charges survive a reopen; a run is charged once, suspended-free seconds only", "[agent]") {
  const std::string d = temp_dir("ledger");
  corral::LedgerTotals before;
  {
    LedgerBook b(d, false, false, corral::nci_default_queues(), kNow);
    CHECK(b.origin() <= kNow);
    CHECK(kNow - b.origin() < 7 * 86400);
    // Job 1: 2 cpus in normal, charged at 10 s and 25 s of running, then its run closed at 30 s.
    CHECK(b.charge(ledger_job(1, "p"), 100.5, 10, 2, kNow, false) == Approx(20.0 / 3600));
    CHECK(b.charge(ledger_job(1, "p"), 100.5, 25, 2, kNow + 20, false) == Approx(30.0 / 3600));
    CHECK(b.charge(ledger_job(1, "p"), 100.5, 25, 2, kNow + 21, false) == 0);  // nothing new
    CHECK(b.charge(ledger_job(1, "p"), 100.5, 30, 2, kNow + 30, true) == Approx(10.0 / 3600));
    CHECK(b.charge(ledger_job(1, "p"), 100.5, 90, 2, kNow + 90, true) == 0);  // a closed run stays closed
    // Its next run (a requeue) is charged from 0; express costs 3 a cpu-hour.
    CHECK(b.charge(ledger_job(1, "p", "express"), 500, 12, 1, kNow + 600, false) == Approx(36.0 / 3600));
    CHECK_THROWS_AS(b.charge(ledger_job(2, "p", "nosuch"), 1, 5, 1, kNow, false), std::invalid_argument);
    REQUIRE(b.job(1));
    CHECK(b.job(1)->seconds == 42);
    CHECK(b.job(1)->su == Approx(96.0 / 3600));
    CHECK(b.job(2) == nullptr);
    b.ledger().set_grant_every("p", 1, 0);
    CHECK(b.ledger().grant_left("p", kNow) == Approx(1 - 96.0 / 3600));
    b.flush(true);
    before = b.ledger().totals();
  }
  LedgerBook b(d, false, false, corral::nci_default_queues(), kNow + 86400 * 30);
  CHECK(b.load_report().warning.empty());
  CHECK(b.ledger().totals() == before);  // replayed exactly
  CHECK(b.origin() <= kNow);             // week 0 stays where it was
  REQUIRE(b.job(1));
  CHECK(b.job(1)->run_seconds == 12);
  CHECK(b.charge(ledger_job(1, "p", "express"), 500, 12, 1, kNow + 700, false) == 0);
  std::system(("rm -rf " + d).c_str());
}

TEST_CASE("ledger file: a compaction keeps the totals and forgets jobs gone from the store", "[agent]") {
  const std::string d = temp_dir("ledger");
  corral::LedgerTotals before;
  {
    LedgerBook b(d, false, false, corral::nci_default_queues(), kNow);
    b.set_keep([](std::uint64_t id) { return id % 2 == 0; });
    for (std::int64_t s = 1; s <= 4200; ++s) b.charge(ledger_job(1 + s % 4, "p"), 7, s, 1, kNow + s, false);
    b.flush(false);  // past 4096 entries: rewritten as one base entry
    before = b.ledger().totals();
    CHECK(std::filesystem::file_size(d + "/ledger") < 4096);
  }
  LedgerBook b(d, false, false, corral::nci_default_queues(), kNow);
  CHECK(b.ledger().totals() == before);
  CHECK(b.load_report().entries == 1);
  CHECK(b.job(2) != nullptr);
  CHECK(b.job(1) == nullptr);
  std::system(("rm -rf " + d).c_str());
}

TEST_CASE("ledger file: a torn tail is cut; damage stops the load unless recovering", "[agent]") {
  const std::string d = temp_dir("ledger");
  const std::string path = d + "/ledger";
  {
    LedgerBook b(d, false, false, corral::nci_default_queues(), kNow);
    for (int s = 1; s <= 5; ++s) b.charge(ledger_job(1, "p"), 7, s * 10, 1, kNow + s, false);
    b.flush(true);
  }
  const auto size = std::filesystem::file_size(path);
  std::filesystem::resize_file(path, size - 3);  // the last write, cut short
  {
    LedgerBook b(d, false, false, corral::nci_default_queues(), kNow);
    CHECK(b.load_report().warning.find("torn tail") != std::string::npos);
    CHECK(b.job(1)->run_seconds == 40);
    b.charge(ledger_job(1, "p"), 7, 50, 1, kNow + 5, false);  // the lost entry's seconds come back
    CHECK(b.job(1)->seconds == 50);
  }
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(10);
    const char c = static_cast<char>(f.get() ^ 0x5a);
    f.seekp(10);
    f.put(c);
  }
  CHECK_THROWS_WITH(LedgerBook(d, false, false, corral::nci_default_queues(), kNow),
                    Catch::Contains("is damaged at byte offset 0") && Catch::Contains("--recover"));
  LedgerBook b(d, false, true, corral::nci_default_queues(), kNow);
  CHECK(b.load_report().warning.find("base was lost") != std::string::npos);
  CHECK(std::filesystem::exists(b.load_report().damaged_copy));
  CHECK(b.job(1)->run_seconds == 50);  // every intact charge entry replayed
  std::system(("rm -rf " + d).c_str());
}
