#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>

#include "agent/config.hpp"
#include "agent/store.hpp"
#include "tests/temp_dir.hpp"

using corral::agent::JobRecord;
using corral::agent::Store;

namespace {
JobRecord job(std::uint64_t id, const std::string& name) {
  JobRecord r;
  r.id = id;
  r.spec.name = name;
  r.spec.script = "#!/bin/sh\necho " + name + "\n";
  r.spec.env = {"A=1"};
  r.user = "alice";
  r.uid = 1000;
  return r;
}
}  // namespace

TEST_CASE("journal: jobs survive a reopen, ids continue", "[agent]") {
  std::string d = temp_dir("store");
  {
    Store s(d + "/state");
    for (int i = 0; i < 3; ++i) {
      auto id = s.next_id();
      s.put(job(id, "j" + std::to_string(id)));
    }
    s.flush();
    JobRecord j = *s.find(2);
    j.state = "ended";
    j.exit_code = 4;
    s.put(j);
    s.erase(3);
    s.flush();
  }
  Store s(d + "/state");
  REQUIRE(s.jobs().size() == 2);
  CHECK(s.find(1)->spec.script == "#!/bin/sh\necho j1\n");
  CHECK(s.find(2)->state == "ended");
  CHECK(s.find(2)->exit_code == 4);
  CHECK(s.find(3) == nullptr);
  CHECK(s.next_id() == 4);  // an erased id is never reused
  std::system(("rm -rf " + d).c_str());
}

TEST_CASE("journal: a torn tail is cut off, every complete entry kept", "[agent]") {
  std::string d = temp_dir("store");
  std::string path;
  {
    Store s(d + "/state");
    s.put(job(s.next_id(), "a"));
    s.put(job(s.next_id(), "b"));
    s.flush();
    path = s.path();
  }
  {
    // A crash in the middle of writing a third entry.
    std::ofstream out(path, std::ios::app | std::ios::binary);
    out << std::string("\x00\x00\x01\x00\x12\x34", 6) << "partial";
  }
  Store s(d + "/state");
  CHECK(s.jobs().size() == 2);
  CHECK(s.load_report().dropped_bytes == 13);
  CHECK(s.load_report().warning.find("torn") != std::string::npos);
  s.put(job(s.next_id(), "c"));
  s.flush();
  Store again(d + "/state");  // the cut file takes new entries cleanly
  CHECK(again.jobs().size() == 3);
  // Corrupt a byte inside the first entry: the CRC catches it.
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(20);
    f.put('\x7f');
  }
  // Damage, not a torn tail: a clear error, nothing dropped.
  CHECK_THROWS_WITH(Store(d + "/state"), Catch::Contains("damaged at byte offset"));
  std::system(("rm -rf " + d).c_str());
}

TEST_CASE("journal: compaction keeps the live jobs and trims old ended ones", "[agent]") {
  std::string d = temp_dir("store");
  {
    Store s(d + "/state", false);
    for (int i = 0; i < 3000; ++i) {
      JobRecord j = job(s.next_id(), "x");
      s.put(j);
      j.state = "ended";
      s.put(j);
      if (i % 100 == 0) s.flush();
    }
    s.flush();
    s.trim_ended(100);
    s.flush();
    CHECK(s.jobs().size() == 100);
    CHECK(s.jobs().begin()->first == 2901);
  }
  Store s(d + "/state");
  CHECK(s.jobs().size() == 100);
  CHECK(s.next_id() == 3001);
  std::system(("rm -rf " + d).c_str());
}

TEST_CASE("journal: an unusable or busy state dir is a clear error", "[agent]") {
  CHECK_THROWS_WITH(Store("/proc/no/such/dir"), Catch::Contains("/proc/no/such/dir"));
  std::string d = temp_dir("store");
  {
    Store first(d + "/state");
    pid_t pid = ::fork();  // the lock is per process: try from another one
    if (pid == 0) {
      try {
        Store second(d + "/state");
      } catch (const std::exception& e) {
        _exit(std::string(e.what()).find("in use by another corrald") != std::string::npos ? 0 : 1);
      }
      _exit(2);
    }
    int st = 0;
    ::waitpid(pid, &st, 0);
    CHECK(WIFEXITED(st));
    CHECK(WEXITSTATUS(st) == 0);
  }
  Store again(d + "/state");  // free once the first is gone
  std::system(("rm -rf " + d).c_str());
}

TEST_CASE("config: file keys, flags override, bad keys are clear errors", "[agent]") {
  std::string d = temp_dir("store");
  std::string path = d + "/corrald.conf";
  {
    std::ofstream out(path);
    out << "# comment\nstate_dir = /srv/corral\nsocket=/tmp/x.sock\nqueues = express:2, normal\n"
           "heartbeat_interval = 2.5\nbackfill = conservative\n";
  }
  corral::agent::Config c;
  std::string cf = path;
  const char* argv[] = {"corrald", "--standalone", "--socket", "/tmp/y.sock", "--config", cf.c_str()};
  REQUIRE(corral::agent::parse_args(6, const_cast<char**>(argv), c));
  CHECK(c.standalone);
  CHECK(c.state_dir == "/srv/corral");
  CHECK(c.socket == "/tmp/y.sock");  // the flag wins over the file
  REQUIRE(c.queues.size() == 2);
  CHECK(c.queues[0].name == "express");
  CHECK(c.queues[0].priority == 2);
  CHECK(c.heartbeat_interval == 2.5);
  CHECK(c.policy == corral::Policy::Conservative);

  {
    std::ofstream out(path);
    out << "state_dir = /a\nfrobnicate = 1\n";
  }
  corral::agent::Config c2;
  CHECK_THROWS_WITH(corral::agent::load_config_file(path, c2), Catch::Contains(":2: unknown key"));
  CHECK_THROWS_WITH(corral::agent::set_config_key(c2, "heartbeat_interval", "-1"),
                    Catch::Contains("positive"));
  CHECK_THROWS_WITH(corral::agent::set_config_key(c2, "backfill", "magic"), Catch::Contains("unknown policy 'magic'"));
  // Grid Engine's reservation settings and MONITOR (sge6-reservation-backfill.txt 2d, 3).
  CHECK(c2.max_reservation == 1);
  CHECK(c2.default_duration == 0);
  CHECK(c2.monitor_file.empty());
  corral::agent::set_config_key(c2, "max_reservation", "0");
  corral::agent::set_config_key(c2, "default_duration", "3600");
  corral::agent::set_config_key(c2, "monitor_file", "/var/lib/corral/schedule");
  CHECK(c2.max_reservation == 0);
  CHECK(c2.default_duration == 3600);
  CHECK(c2.monitor_file == "/var/lib/corral/schedule");
  CHECK_THROWS_WITH(corral::agent::set_config_key(c2, "max_reservation", "-1"), Catch::Contains("max_reservation: expected an integer >= 0"));
  CHECK_THROWS_WITH(corral::agent::set_config_key(c2, "default_duration", "-1h"), Catch::Contains("default_duration: expected a duration"));
  const char* bad[] = {"corrald", "--no-such-flag"};
  CHECK_THROWS_WITH(corral::agent::parse_args(2, const_cast<char**>(bad), c2),
                    Catch::Contains("unknown option"));
  std::system(("rm -rf " + d).c_str());
}

TEST_CASE("journal keeps a job's slot range, granted cores and suspension (live part)", "[agent]") {
  std::string d = temp_dir("store");
  {
    Store s(d + "/state");
    JobRecord r = job(s.next_id(), "pe");
    r.spec.pe = "smp";
    r.spec.slots_min = 1;
    r.spec.slots_max = 4;
    r.state = "suspended";
    r.cores = {0, 1};
    r.suspended_seconds = 12.5;
    r.suspended_since = 1700000000.0;
    r.held = true;
    s.put(r);
    s.flush();
  }
  Store s(d + "/state");
  const JobRecord* r = s.find(1);
  REQUIRE(r);
  CHECK(r->spec.pe == "smp");
  CHECK(r->spec.slots_min == 1);
  CHECK(r->spec.slots_max == 4);
  CHECK(r->cores == std::vector<int>{0, 1});
  CHECK(r->suspended_seconds == 12.5);
  CHECK(r->suspended_since == 1700000000.0);
  CHECK(r->held);
  (void)!std::system(("rm -rf " + d).c_str());
}

TEST_CASE("config: nci and nci_require keys", "[agent]") {
  corral::agent::Config c;
  CHECK_FALSE(c.nci);
  corral::agent::set_config_key(c, "nci", "yes");
  CHECK(c.nci);
  corral::agent::set_config_key(c, "nci_require", "walltime, mem");
  CHECK(c.nci_require == std::vector<std::string>{"walltime", "mem"});
  corral::agent::set_config_key(c, "nci_require", "none");
  CHECK(c.nci_require.empty());
  CHECK_THROWS_WITH(corral::agent::set_config_key(c, "nci_require", "walltime,gpus"),
                    Catch::Contains("nci_require"));
  CHECK_THROWS_AS(corral::agent::set_config_key(c, "nci", "maybe"), std::invalid_argument);
}
