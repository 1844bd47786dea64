// corral acct and corral alloc on a standalone corrald, end to end with the real corral binary:
//   - acct lists every ended job with its runs (completed, failed, cancelled before a start),
//     filters by user, project and --since, keeps them across a restart, refuses a bad --since;
//   - alloc shows the PBA calendar with what each project used; alloc set is for operators,
//     refuses bad weeks, projects and slot counts with the reason, survives a restart, and the
//     next pass uses it (a job of a project without allocation is demoted, one with is not).
// Users: root owns most jobs, daemon (uid 1) one; bin (uid 2) is a plain user; operators = nogroup.
#include <catch2/catch.hpp>

#include <ctime>
#include <fstream>
#include <set>

#include <nlohmann/json.hpp>

#include "coordinator/pba/calendar.hpp"
#include "harness.hpp"

using harness::Agent;
using harness::json_field;
using harness::stat_json;
using harness::trim;
using harness::wait_state;
using Json = nlohmann::json;

namespace {

constexpr int kDaemonUser = 1, kPlainUser = 2, kOperator = 65534;

std::string this_week(int ahead = 0) {
  using namespace corral::pba;
  return format_iso_week(add_weeks(iso_week(static_cast<corral::Time>(std::time(nullptr))), ahead));
}

std::string submitted(const Agent& a, std::vector<std::string> args, int uid = -1) {
  auto s = a.submit(std::move(args), uid);
  INFO(s.err << a.log());
  REQUIRE(s.rc == 0);
  return trim(s.out);
}

Json acct_json(const Agent& a, std::vector<std::string> more = {}) {
  std::vector<std::string> args = {"acct", "--json"};
  args.insert(args.end(), more.begin(), more.end());
  auto r = a.cli(args);
  INFO(r.err);
  REQUIRE(r.rc == 0);
  return Json::parse(r.out);
}

std::set<std::string> ids_of(const Json& rows) {
  std::set<std::string> out;
  for (const auto& j : rows) out.insert(std::to_string(j["id"].get<std::uint64_t>()));
  return out;
}

}  // namespace

TEST_CASE("acct: every ended job and its runs, filtered, kept across a restart", "[agent]") {
  SKIP_UNLESS_ROOT();
  Agent a("acct", {"--set", "declare_cores=1", "--set", "poll_interval=0.2", "--set", "node_name=ac1", "--set", "nci=yes", "--set", "nci_require=walltime"});
  a.start();
  std::string ok = submitted(a, {"-N", "ok", "-P", "chip", "-l", "ncpus=1,walltime=60", "--wrap", "sleep 1.2"});
  std::string bad = submitted(a, {"-N", "bad", "-P", "soc", "-l", "ncpus=1,walltime=60", "--wrap", "exit 3"}, kDaemonUser);
  std::string gone = submitted(a, {"-N", "gone", "-l", "ncpus=1,walltime=60", "--wrap", "true"});
  REQUIRE(a.cli({"cancel", gone}).rc == 0);  // pending behind `ok` on the one core
  std::string live = submitted(a, {"-N", "live", "-l", "ncpus=1,walltime=600", "--wrap", "sleep 300"});
  REQUIRE(wait_state(a, live, "running", 15000) == "running");

  Json all = acct_json(a);
  INFO(all.dump(1));
  CHECK(ids_of(all) == std::set<std::string>{ok, bad, gone});  // the running job is not listed
  for (const auto& j : all) {
    const std::string id = std::to_string(j["id"].get<std::uint64_t>());
    if (id == ok) {
      CHECK(j["name"] == "ok");
      CHECK(j["user"] == "root");
      CHECK(j["project"] == "chip");
      CHECK(j["end_reason"] == "completed");
      CHECK(j["exit_code"] == 0);
      CHECK(j["run_count"] == 1);
      CHECK(j["cpus"] == 1);
      CHECK(j["nodes"] == Json::array({"ac1"}));
      CHECK(j["runs"][0]["nodes"] == Json::array({"ac1"}));
      CHECK(j["submit"].get<double>() <= j["start"].get<double>());
      CHECK(j["end"].get<double>() - j["start"].get<double>() >= 1.0);
      CHECK(j["su_charged"].get<double>() > 0);
    } else if (id == bad) {
      CHECK(j["user"] == "daemon");
      CHECK(j["end_reason"] == "failed");
      CHECK(j["exit_code"] == 3);
    } else {
      CHECK(j["end_reason"] == "cancelled");
      CHECK(j["run_count"] == 0);
      CHECK(j["start"] == 0);
    }
  }
  CHECK(ids_of(acct_json(a, {"--user", "daemon"})) == std::set<std::string>{bad});
  CHECK(ids_of(acct_json(a, {"-P", "chip"})) == std::set<std::string>{ok});
  CHECK(ids_of(acct_json(a, {"--since", "1h"})).size() == 3);
  CHECK(ids_of(acct_json(a, {"--since", this_week(1)})).empty());  // next week: nothing ended yet
  auto text = a.cli({"acct"});
  CHECK(text.out.find(ok + ".1 ") != std::string::npos);  // a line per run, as sacct's steps

  auto since = a.cli({"acct", "--since", "yesterday"});
  CHECK(since.rc == 1);
  CHECK(since.err.find("--since 'yesterday': expected a duration back from now") != std::string::npos);
  CHECK(a.cli({"acct", "--since"}).rc == 2);
  CHECK(a.cli({"acct", "extra"}).rc == 2);

  REQUIRE(a.cli({"cancel", live}).rc == 0);
  REQUIRE(wait_state(a, live, "ended") == "ended");
  a.stop(SIGTERM);
  a.start();
  CHECK(ids_of(acct_json(a)) == std::set<std::string>{ok, bad, gone, live});
}

TEST_CASE("alloc: the calendar and what each project used; alloc set by operators, next pass", "[agent]") {
  SKIP_UNLESS_ROOT();
  std::string plan = harness::make_tmpdir("allocplan") + "/projects.plan";
  std::ofstream(plan) << "project chip\nmember chip root\nproject soc\nmember soc root\nalloc chip +0 1\nhorizon 4\n";
  Agent a("alloc", {"--set", "declare_cores=1", "--set", "poll_interval=0.2", "--set", "cycle_interval=0.3",
                    "--set", "operators=nogroup", "--set", "pba=yes", "--set", "pba_plan=" + plan});
  a.start();
  auto row = [](const Json& cal, const std::string& week, const std::string& project) {
    for (const auto& r : cal["weeks"])
      if (r["week"] == week && r["project"] == project) return r;
    return Json();
  };
  auto calendar = [&](std::vector<std::string> args, int uid = -1) {
    args.insert(args.begin(), "alloc");
    args.push_back("--json");
    auto r = a.cli(args, uid);
    INFO(r.err << a.log());
    REQUIRE(r.rc == 0);
    return Json::parse(r.out);
  };
  const std::string now = this_week(), next = this_week(1);

  std::string used = submitted(a, {"-P", "chip", "-l", "ncpus=1,walltime=60", "--wrap", "sleep 1"});
  REQUIRE(a.cli({"wait", used}).rc == 0);
  Json cal = calendar({});
  INFO(cal.dump(1));
  CHECK(cal["current_week"] == now);
  CHECK(cal["horizon_weeks"] == 4);
  CHECK(row(cal, now, "chip")["allocated"] == 1);
  CHECK(row(cal, now, "chip")["used_slot_hours"].get<double>() > 0);
  CHECK(row(cal, now, "soc")["allocated"] == 0);

  // A job of soc, which has nothing this week, is demoted by the pass to the lowest queue.
  std::string before = submitted(a, {"-P", "soc", "-l", "ncpus=1,walltime=60", "--wrap", "true"});
  REQUIRE(a.cli({"wait", before}).rc == 0);
  CHECK(json_field(stat_json(a, before), "queue") == "lowest");

  // Only operators change it; bad input is refused with the reason and changes nothing.
  auto plain = a.cli({"alloc", "set", "soc", now, "2"}, kPlainUser);
  CHECK(plain.rc == 1);
  CHECK(plain.err.find("only root or a member of group nogroup may change allocations") != std::string::npos);
  struct Bad { std::vector<std::string> args; int rc; const char* why; };
  for (const Bad& b : {Bad{{"set", "soc", "2026-W99", "2"}, 1, "week '2026-W99'"},
                       Bad{{"set", "soc", this_week(-1), "2"}, 1, "has ended"},
                       Bad{{"set", "soc", this_week(6), "2"}, 1, "at most 4 weeks ahead"},
                       Bad{{"set", "nosuch", now, "2"}, 1, "unknown project 'nosuch'"},
                       Bad{{"set", "soc", now, "2.5"}, 2, "expected a whole number of slots"},
                       Bad{{"set", "soc", now}, 2, "usage: corral alloc set PROJECT WEEK SLOTS"},
                       Bad{{"sett"}, 2, "unexpected argument 'sett'"}}) {
    std::vector<std::string> args = b.args;
    args.insert(args.begin(), "alloc");
    auto r = a.cli(args);
    INFO(args[1] << " " << r.err);
    CHECK(r.rc == b.rc);
    CHECK(r.err.find(b.why) != std::string::npos);
  }
  CHECK(row(calendar({}), now, "soc")["allocated"] == 0);

  cal = calendar({"set", "soc", now, "1", next, "3"}, kOperator);
  CHECK(row(cal, now, "soc")["allocated"] == 1);
  CHECK(row(cal, next, "soc")["allocated"] == 3);
  std::string after = submitted(a, {"-P", "soc", "-l", "ncpus=1,walltime=60", "--wrap", "true"});
  REQUIRE(a.cli({"wait", after}).rc == 0);
  CHECK(json_field(stat_json(a, after), "queue") != "lowest");  // the next pass knew the allocation

  a.stop(SIGTERM);
  a.start();
  cal = calendar({});
  CHECK(row(cal, now, "soc")["allocated"] == 1);
  CHECK(row(cal, next, "soc")["allocated"] == 3);
  CHECK(row(calendar({"set", "soc", next, "0"}), next, "soc").is_null());  // 0 removes it
}

TEST_CASE("alloc: a node without a project plan says so", "[agent]") {
  SKIP_UNLESS_ROOT();
  Agent a("allocnone", {"--set", "declare_cores=1"});
  a.start();
  auto r = a.cli({"alloc"});
  CHECK(r.rc == 1);
  CHECK(r.err.find("corral alloc needs pba = yes") != std::string::npos);
}
