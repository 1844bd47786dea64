// Charging (3/1/0 SU per cpu-hour, suspended time free), grants, reports.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>
#include <stdexcept>

#include "coordinator/nci/ledger.hpp"
#include "coordinator/nci/nci.hpp"
#include "coordinator/nci/report.hpp"
#include "helpers.hpp"

using namespace corral;
using namespace nci_test;

TEST_CASE("charging: express 3, normal 1, bonus 0 SU per cpu-hour", "[nci][charge]") {
  Ledger l(nci_default_queues());
  const Time h = 3600;
  CHECK(l.charge(job(1, 4, h, "express", "u", "p"), 2 * h, 0) == Approx(24.0));
  CHECK(l.charge(job(2, 4, h, "normal", "u", "p"), 2 * h, 0) == Approx(8.0));
  CHECK(l.charge(job(3, 4, h, "bonus", "u", "p"), 2 * h, 0) == Approx(0.0));
  CHECK(l.charge(job(4, 2, h, "", "u", "p"), h / 2, 0) == Approx(1.0));  // default queue normal
  // Cpus requested, not used: an explicit count overrides the request.
  CHECK(l.charge(job(5, 8, h, "normal", "u", "p"), h, 0, 16) == Approx(16.0));
  l.set_grant("p", 100.0, 0);
  CHECK(l.grant_left("p", 0) == Approx(100.0 - 24 - 8 - 0 - 1 - 16));
}

TEST_CASE("suspended time is not charged", "[nci][charge]") {
  RunningJob rj = running(job(1, 4, 36000, "normal", "u", "p"), 0, 0, 1000);
  rj.suspended_for = 3600;
  CHECK(running_seconds(rj, 1000 + 7200) == 3600);
  Ledger l(nci_default_queues());
  CHECK(l.charge(rj.job, running_seconds(rj, 1000 + 7200), 8200) == Approx(4.0));
  // A job suspended the whole time costs nothing.
  rj.suspended_for = 7200;
  CHECK(running_seconds(rj, 1000 + 7200) == 0);
}

TEST_CASE("bad charges are refused with a clear error and record nothing", "[nci][charge]") {
  Ledger l(nci_default_queues());
  l.set_grant("p", 10, 0);
  CHECK_THROWS_WITH(l.charge(job(1, 1, 60, "weird", "u", "p"), 60, 0),
                    "charge for job 1: unknown queue weird");
  CHECK_THROWS_WITH(l.charge(job(2, 1, 60, "normal", "u", "p"), -5, 0),
                    "charge for job 2: negative seconds");
  CHECK_THROWS_AS(l.set_grant("p", -1, 0), std::invalid_argument);
  CHECK(l.grant_left("p", 0) == Approx(10.0));
}

TEST_CASE("grants are per period; an exhausted grant sends jobs to bonus", "[nci][grant]") {
  LedgerConfig lc;
  lc.period = 1000;
  Ledger l(nci_default_queues(), lc);
  l.set_grant("p", 2.0, 0);      // period 0
  l.set_grant("p", 50.0, 1500);  // period 1
  l.charge(job(1, 1, 7200, "normal", "u", "p"), 7200, 500);
  CHECK(l.grant_left("p", 0) == Approx(0.0));
  CHECK(l.grant_left("p", 1200) == Approx(50.0));
  CHECK(l.grant_left("p") == Approx(50.0));  // latest period seen
  CHECK(l.grant_left("nobody", 0) == 0.0);
  CHECK_FALSE(l.has_grant("nobody", 0));

  // Feed the ledger into the pass: period 0 -> demoted, period 1 -> normal.
  Snapshot s;
  s.nodes = {node("n0", 4)};
  s.pending = {job(2, 1, 600, "normal", "u", "p")};
  NciConfig c = cfg_on();
  s.now = 600;
  c.grant_left = l.grants_left(s.now);
  Plan p = run_stage(s, c);
  REQUIRE(find(p, Action::Demote, 2));
  CHECK(find(p, Action::Demote, 2)->queue == "bonus");
  s.now = 1600;
  c.grant_left = l.grants_left(s.now);
  CHECK_FALSE(find(run_stage(s, c), Action::Demote, 2));
  // Bonus jobs cost nothing, so the grant stays exhausted but not negative.
  Job b = job(3, 4, 3600, "bonus", "u", "p");
  l.charge(b, 3600, 700);
  CHECK(l.grant_left("p", 700) == Approx(0.0));
}

TEST_CASE("weekly report per project and user: table and JSON", "[nci][report]") {
  LedgerConfig lc;
  Ledger l(nci_default_queues(), lc);
  const Time w = 7 * 86400;
  l.set_grant("astro", 1000, 0);
  l.set_grant("bio", 10, 0);
  // Week 0: astro/alice 8 cpus x 21 h normal = 168 SU; bio/bob 2 cpus x 1 h express = 6 SU.
  l.charge(job(1, 8, 86400, "normal", "alice", "astro"), 21 * 3600, 3600);
  l.charge(job(2, 2, 3600, "express", "bob", "bio"), 3600, 7200);
  // Week 1 is not in week 0's report.
  l.charge(job(3, 1, 3600, "normal", "alice", "astro"), 3600, w + 10);

  Snapshot s;
  s.now = w - 1;  // week 0 over: average over the whole week
  s.nodes = {node("n0", 16)};
  s.running = {running(job(4, 4, 36000, "normal", "alice", "astro"), 0, 0, 0)};
  RunningJob sus = running(job(5, 2, 36000, "normal", "bob", "bio"), 0, 4, 0);
  sus.suspended = true;
  s.running.push_back(sus);
  s.pending = {job(6, 2, 600, "normal", "carol", "bio"), job(7, 2, 600, "normal", "bob", "bio")};
  const NciReport r = build_report(l, s, 0, {{"astro", 2.0}, {"bio", 1.0}});
  REQUIRE(r.projects.size() == 2);
  const ReportRow& a = r.projects[0];
  CHECK(a.project == "astro");
  CHECK(a.su_charged == Approx(168.0));
  CHECK(a.slots_used == Approx(8.0 * 21 * 3600 / w));  // 1.00 slot on average
  CHECK(a.subscription == Approx(1.0 - 2.0));           // under-subscribed by 1 slot
  CHECK(a.running_cpus == 4);
  CHECK(a.grant_left == Approx(1000 - 168 - 1));        // the same period
  const ReportRow& b = r.projects[1];
  CHECK(b.pending_jobs == 2);
  CHECK(b.running_cpus == 0);  // suspended jobs hold no cpus
  CHECK(b.grant_left == Approx(4.0));
  REQUIRE(r.users.size() == 3);
  CHECK(r.users[0].user == "alice");
  CHECK(r.users[2].user == "carol");
  CHECK(r.users[2].project == "bio");

  const std::string table = render_report_table(r);
  const std::string expect_table =
      "week 0 at 604799\n"
      "projects\n"
      "project  alloc  used  running  over/under  pending      SU  grant left\n"
      "astro     2.00  1.00        4       -1.00        0  168.00      831.00\n"
      "bio       1.00  0.01        0       -0.99        2    6.00        4.00\n"
      "users\n"
      "user   project  alloc  used  running  over/under  pending      SU  grant left\n"
      "alice  astro     0.00  1.00        4       +1.00        0  168.00      831.00\n"
      "bob    bio       0.00  0.01        0       +0.01        1    6.00        4.00\n"
      "carol  bio       0.00  0.00        0       +0.00        1    0.00        4.00\n";
  CHECK(table == expect_table);

  const std::string json = render_report_json(r);
  // Read back: the same values (figures at 2 decimals).
  CHECK(nlohmann::json::parse(json) == nlohmann::json::parse(
        "{\"week\":0,\"at\":604799,\"projects\":["
        "{\"project\":\"astro\",\"allocation\":2.00,\"slots_used\":1.00,\"running_cpus\":4,"
        "\"subscription\":-1.00,\"pending_jobs\":0,\"su_charged\":168.00,\"grant_left\":831.00},"
        "{\"project\":\"bio\",\"allocation\":1.00,\"slots_used\":0.01,\"running_cpus\":0,"
        "\"subscription\":-0.99,\"pending_jobs\":2,\"su_charged\":6.00,\"grant_left\":4.00}],"
        "\"users\":["
        "{\"user\":\"alice\",\"project\":\"astro\",\"allocation\":0.00,\"slots_used\":1.00,\"running_cpus\":4,"
        "\"subscription\":1.00,\"pending_jobs\":0,\"su_charged\":168.00,\"grant_left\":831.00},"
        "{\"user\":\"bob\",\"project\":\"bio\",\"allocation\":0.00,\"slots_used\":0.01,\"running_cpus\":0,"
        "\"subscription\":0.01,\"pending_jobs\":1,\"su_charged\":6.00,\"grant_left\":4.00},"
        "{\"user\":\"carol\",\"project\":\"bio\",\"allocation\":0.00,\"slots_used\":0.00,\"running_cpus\":0,"
        "\"subscription\":0.00,\"pending_jobs\":1,\"su_charged\":0.00,\"grant_left\":4.00}]}"));
}

TEST_CASE("report JSON escapes names; projects without grant show null", "[nci][report]") {
  Ledger l(nci_default_queues());
  l.charge(job(1, 1, 3600, "normal", "we\"ird", "p\\q"), 3600, 0);
  Snapshot s;
  s.now = 3600;  // week in progress: averaged over the hour elapsed
  const NciReport r = build_report(l, s, 0);
  REQUIRE(r.projects.size() == 1);
  CHECK(r.projects[0].slots_used == Approx(1.0));
  const std::string js = render_report_json(r);
  CHECK(js.find("\"project\":\"p\\\\q\"") != std::string::npos);
  CHECK(js.find("\"user\":\"we\\\"ird\"") != std::string::npos);
  CHECK(js.find("\"grant_left\":null") != std::string::npos);
  CHECK(render_report_table(r).find("  -\n") != std::string::npos);
}

TEST_CASE("recurring grants renew each period of the project's own length", "[nci][grant]") {
  Ledger l(nci_default_queues());
  const Time week = 7 * 86400;
  l.set_grant_every("weekly", 10.0, week);  // e.g. plan file: grant weekly 10 period=week
  l.set_grant_every("once", 5.0, 0);        // no period: the whole run
  l.charge(job(1, 1, 36000, "normal", "u", "weekly"), 36000, 100);  // 10 SU in week 0
  l.charge(job(2, 1, 36000, "normal", "u", "once"), 3600 * 4, 100);
  l.charge(job(3, 1, 36000, "normal", "u", "once"), 3600 * 4, 3 * week);
  CHECK(l.grant_left("weekly", 200) == Approx(0.0));
  CHECK(l.grant_left("weekly", week + 1) == Approx(10.0));  // renewed
  CHECK(l.grant_left("once", 3 * week) == Approx(-3.0));      // overrun, never renewed
  CHECK(l.grant_left("once") == Approx(-3.0));
  const auto left = l.grants_left(200);
  CHECK(left.at("weekly") == Approx(0.0));
  CHECK(left.at("once") == Approx(-3.0));  // one period: every charge counts
  // Explicit grant for one period overrides the recurring amount there.
  l.set_grant("weekly", 50.0, 2 * week);
  CHECK(l.grant_left("weekly", 2 * week) == Approx(50.0));
  CHECK(l.grant_left("weekly", 3 * week) == Approx(10.0));
}
