// NCI charging end to end (nci-pbs-policy.txt "Charging"): a corrald
// --standalone with nci = yes on a declared 2-core node, the real corral binary.
//   - a running job is charged wall time x cpus x its queue's charge, as it
//     runs; suspended time is free;
//   - the ledger (state_dir/ledger) survives a restart and a SIGKILL, an old
//     state directory without one loads, and a damaged one stops corrald
//     unless --recover, as the journal;
//   - a project whose grant is used up has its next jobs moved to the bonus
//     queue, where they run on idle cpus only (a normal job suspends them);
//   - `corral report [--week W] [--project P] [--json]` gives what was run,
//     and refuses bad weeks and projects clearly.
#include <catch2/catch.hpp>

#include <cmath>
#include <ctime>
#include <fstream>

#include <nlohmann/json.hpp>

#include "harness.hpp"

using harness::Agent;
using harness::json_field;
using harness::stat_json;
using harness::trim;
using harness::wait_state;

namespace {

double num(const std::string& s) { return s.empty() || s[0] == '<' || s == "null" ? -1 : std::stod(s); }

// An agent charging one service unit per cpu-second in `normal` (charge 3600 per cpu-hour), so a
// few seconds of running show in the report's two decimals; express keeps the policy's 3.
std::vector<std::string> nci_flags(std::vector<std::string> more = {}) {
  std::vector<std::string> f = {"--set", "declare_cores=2", "--set", "nci=yes", "--set", "nci_require=walltime",
                                "--set", "poll_interval=0.2", "--set", "heartbeat_interval=0.5"};
  f.insert(f.end(), more.begin(), more.end());
  return f;
}

std::string submit_ok(const Agent& a, std::vector<std::string> args) {
  auto s = a.submit(std::move(args));
  INFO(s.err << a.log());
  REQUIRE(s.rc == 0);
  return trim(s.out);
}

// A job's charged seconds: what its units say at `per_cpu_second` units per cpu-second.
double charged_seconds(const std::string& js, double per_cpu_second) {
  return num(json_field(js, "su_charged")) / per_cpu_second / num(json_field(js, "slots"));
}

// Running seconds of an ended job's only run: its wall time less its suspended time.
double ran_seconds(const std::string& js) {
  return num(json_field(js, "end_time")) - num(json_field(js, "start_time")) - num(json_field(js, "suspended_seconds"));
}

// Waits until the job's su_charged exceeds `above`; returns the last value.
double wait_charged_above(const Agent& a, const std::string& id, double above, int ms = 15000) {
  double su = -1;
  for (int t = 0; t < ms; t += 50) {
    su = num(json_field(stat_json(a, id), "su_charged"));
    if (su > above) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return su;
}

nlohmann::ordered_json report_json(const Agent& a, std::vector<std::string> more = {}) {
  std::vector<std::string> args = {"report", "--json"};
  args.insert(args.end(), more.begin(), more.end());
  auto r = a.cli(args);
  INFO(r.err << a.log());
  REQUIRE(r.rc == 0);
  return nlohmann::ordered_json::parse(r.out);
}

const nlohmann::ordered_json* row(const nlohmann::ordered_json& rows, const std::string& key, const std::string& name) {
  for (const auto& x : rows)
    if (x.value(key, "") == name) return &x;
  return nullptr;
}

std::string write_plan(const Agent& a, const std::string& text) {
  std::string path = a.dir + "/projects.plan";
  std::ofstream(path) << text;
  return path;
}

}  // namespace

TEST_CASE("NCI charging through corrald: wall time x cpus x the queue's charge, as it runs; suspended time free",
          "[agent][nci]") {
  SKIP_UNLESS_ROOT();
  SKIP_UNLESS_ENFORCED();
  Agent a("charge", nci_flags({"--set", "queues=normal:1,express:2"}));
  a.start();
  // Two cpus in normal (1 unit per cpu-hour): 2/3600 units a running second.
  std::string id = submit_ok(a, {"-N", "two", "-l", "ncpus=2,walltime=60", "--wrap", "sleep 30"});
  REQUIRE(wait_state(a, id, "running") == "running");
  std::string js = stat_json(a, id);
  CHECK(num(json_field(js, "su_rate")) == Approx(2.0));
  // Charged as it runs, not only when it ends.
  const double first = wait_charged_above(a, id, 0);
  CHECK(first > 0);
  CHECK(wait_charged_above(a, id, first) > first);

  // Suspended (root's corral suspend) for at least 2 s: that time is not charged.
  REQUIRE(a.cli({"suspend", id}).rc == 0);
  const double frozen = num(json_field(stat_json(a, id), "su_charged"));
  std::this_thread::sleep_for(std::chrono::milliseconds(2200));
  CHECK(num(json_field(stat_json(a, id), "su_charged")) == Approx(frozen).margin(2.0 / 3600));
  REQUIRE(a.cli({"resume", id}).rc == 0);
  wait_charged_above(a, id, frozen + 2.0 / 3600);
  REQUIRE(a.cli({"cancel", id}).rc == 0);
  REQUIRE(wait_state(a, id, "ended") == "ended");
  js = stat_json(a, id);
  INFO(js);
  CHECK(num(json_field(js, "suspended_seconds")) >= 2.0);
  // Charged to the second it ended: whole running seconds, the suspension left out.
  CHECK(charged_seconds(js, 1.0 / 3600) == Approx(ran_seconds(js)).margin(1.0));
  CHECK(num(json_field(js, "su_rate")) == 0);  // ended: costs nothing more

  // Express charges 3 units per cpu-hour.
  std::string ex = submit_ok(a, {"-N", "quick", "-q", "express", "-l", "ncpus=1,walltime=60", "--wrap", "sleep 2"});
  REQUIRE(wait_state(a, ex, "running") == "running");
  CHECK(num(json_field(stat_json(a, ex), "su_rate")) == Approx(3.0));
  REQUIRE(wait_state(a, ex, "ended") == "ended");
  js = stat_json(a, ex);
  INFO(js);
  CHECK(charged_seconds(js, 3.0 / 3600) == Approx(ran_seconds(js)).margin(1.0));
  CHECK(charged_seconds(js, 3.0 / 3600) >= 1.0);
  // The table shows the units too.
  auto table = a.cli({"stat"});
  CHECK(table.out.find(" SU ") != std::string::npos);
}

TEST_CASE("the charge ledger survives a restart and a SIGKILL; an old state dir loads; damage stops corrald",
          "[agent][nci]") {
  SKIP_UNLESS_ROOT();
  SKIP_UNLESS_ENFORCED();
  // First without NCI: a state directory with jobs and no ledger.
  Agent a("ledger", {"--set", "declare_cores=2", "--set", "poll_interval=0.2"});
  a.start();
  std::string old = submit_ok(a, {"-N", "before", "-l", "walltime=60", "--wrap", "true"});
  REQUIRE(wait_state(a, old, "ended") == "ended");
  CHECK(a.cli({"report"}).err.find("needs nci = yes") != std::string::npos);
  a.stop(SIGTERM);
  CHECK(!std::filesystem::exists(a.dir + "/state/ledger"));

  a.extra = nci_flags({"--set", "queues=normal:1:3600"});
  a.start();
  CHECK(json_field(stat_json(a, old), "state") == "ended");
  CHECK(std::filesystem::exists(a.dir + "/state/ledger"));
  std::string id = submit_ok(a, {"-N", "long", "-P", "astro", "-l", "ncpus=1,walltime=120", "--wrap", "sleep 60"});
  REQUIRE(wait_state(a, id, "running") == "running");
  const double before_term = wait_charged_above(a, id, 1.0);
  REQUIRE(before_term > 1.0);

  a.stop(SIGTERM);  // the job keeps running; the next corrald adopts it
  a.start();
  double su = num(json_field(stat_json(a, id), "su_charged"));
  CHECK(su >= before_term);
  const double before_kill = wait_charged_above(a, id, su + 1.0);
  REQUIRE(before_kill > su + 1.0);
  // The stat charged it, and corrald wrote the charge before it answered.
  a.stop(SIGKILL);
  a.start();
  REQUIRE(json_field(stat_json(a, id), "state") == "running");
  CHECK(num(json_field(stat_json(a, id), "su_charged")) >= before_kill);
  REQUIRE(a.cli({"cancel", id}).rc == 0);
  REQUIRE(wait_state(a, id, "ended") == "ended");
  std::string js = stat_json(a, id);
  INFO(js << a.log());
  // Every running second charged once: nothing lost, nothing twice, across both restarts.
  CHECK(charged_seconds(js, 1.0) == Approx(ran_seconds(js)).margin(1.0));
  auto rep = report_json(a);
  const auto* astro = row(rep["projects"], "project", "astro");
  REQUIRE(astro);
  CHECK((*astro)["su_charged"].get<double>() == Approx(num(json_field(js, "su_charged"))).margin(0.01));

  // The same after a clean restart with nothing running.
  a.stop(SIGTERM);
  a.start();
  CHECK(num(json_field(stat_json(a, id), "su_charged")) == Approx(num(json_field(js, "su_charged"))));
  const auto rep2 = report_json(a);
  const auto* again = row(rep2["projects"], "project", "astro");
  REQUIRE(again);
  CHECK((*again)["su_charged"] == (*astro)["su_charged"]);

  // A damaged ledger (a byte flipped in its first entry, intact entries after it): corrald
  // stops and says how to go on; --recover keeps a copy and starts.
  a.stop(SIGTERM);
  const std::string path = a.dir + "/state/ledger";
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(12);
    const char c = static_cast<char>(f.get() ^ 0x5a);
    f.seekp(12);
    f.put(c);
  }
  CHECK_THROWS_WITH(a.start(), Catch::Contains("charge ledger") && Catch::Contains("--recover"));
  a.extra.push_back("--recover");
  a.start();
  CHECK(a.log().find("charge ledger") != std::string::npos);
  bool copy = false;
  for (const auto& e : std::filesystem::directory_iterator(a.dir + "/state"))
    copy |= e.path().filename().string().rfind("ledger.damaged-", 0) == 0;
  CHECK(copy);
}

TEST_CASE("a project that used up its grant runs in the bonus queue: free, on idle cpus only", "[agent][nci]") {
  SKIP_UNLESS_ROOT();
  SKIP_UNLESS_ENFORCED();
  Agent a("bonus", {});
  const std::string plan = write_plan(a,
                                      "project chem\n"
                                      "project phys\n"
                                      "grant chem 2\n"
                                      "grant phys 1000\n");
  a.extra = nci_flags({"--set", "queues=normal:1:3600", "--set", "nci_plan=" + plan});
  a.start();
  // chem's 2 units are 2 cpu-seconds: a 4-second job on one cpu uses them up.
  std::string used = submit_ok(a, {"-N", "use", "-P", "chem", "-l", "ncpus=1,walltime=60", "--wrap", "sleep 4"});
  REQUIRE(wait_state(a, used, "ended") == "ended");
  auto rep = report_json(a, {"--project", "chem"});
  REQUIRE(rep["projects"].size() == 1);
  CHECK(rep["projects"][0]["grant_left"].get<double>() < 0);

  // chem's next job moves to bonus, runs on the idle cpus, and is charged nothing.
  std::string b = submit_ok(a, {"-N", "free", "-P", "chem", "-l", "ncpus=2,walltime=120", "--wrap", "sleep 60"});
  REQUIRE(wait_state(a, b, "running") == "running");
  std::string js = stat_json(a, b);
  INFO(js << a.log());
  CHECK(json_field(js, "queue") == "bonus");
  CHECK(a.log().find("job " + b + " moved to queue bonus: project chem has no grant left") != std::string::npos);
  CHECK(num(json_field(js, "su_rate")) == 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  CHECK(num(json_field(stat_json(a, b), "su_charged")) == 0);

  // A normal job of a project with a grant takes the cpus: the bonus job is suspended for it.
  std::string n = submit_ok(a, {"-N", "paid", "-P", "phys", "-l", "ncpus=2,walltime=60", "--wrap", "sleep 2"});
  CHECK(wait_state(a, n, "running") == "running");
  CHECK(wait_state(a, b, "suspended") == "suspended");
  CHECK(json_field(stat_json(a, n), "queue") == "normal");
  CHECK(wait_state(a, n, "ended") == "ended");
  CHECK(wait_state(a, b, "running") == "running");  // resumed once the cpus are idle again
  REQUIRE(a.cli({"cancel", b}).rc == 0);
  // phys paid for its run; chem's bonus job cost nothing.
  rep = report_json(a);
  const auto* phys = row(rep["projects"], "project", "phys");
  REQUIRE(phys);
  CHECK((*phys)["su_charged"].get<double>() >= 2.0);
  CHECK((*phys)["grant_left"].get<double>() == Approx(1000 - (*phys)["su_charged"].get<double>()).margin(0.02));
}

TEST_CASE("corral report: the weekly per-project figures of what ran; bad --week and --project refused",
          "[agent][nci]") {
  SKIP_UNLESS_ROOT();
  SKIP_UNLESS_ENFORCED();
  Agent a("report", {});
  const std::string plan = write_plan(a, "project alpha\nproject beta\ngrant alpha 500 period=week\n");
  a.extra = nci_flags({"--set", "queues=normal:1:3600", "--set", "nci_plan=" + plan});
  a.start();
  std::string j1 = submit_ok(a, {"-N", "a2", "-P", "alpha", "-l", "ncpus=2,walltime=60", "--wrap", "sleep 2"});
  std::string j2 = submit_ok(a, {"-N", "b1", "-P", "beta", "-l", "ncpus=1,walltime=60", "--wrap", "sleep 1"});
  REQUIRE(wait_state(a, j1, "ended") == "ended");
  REQUIRE(wait_state(a, j2, "ended") == "ended");
  const double su1 = num(json_field(stat_json(a, j1), "su_charged"));
  const double su2 = num(json_field(stat_json(a, j2), "su_charged"));
  CHECK(su1 >= 2.0);  // 2 cpus x at least 1 whole second
  CHECK(su2 >= 1.0);

  auto rep = report_json(a);
  INFO(rep.dump() << a.log());
  CHECK(rep["week"] == 0);  // the week the ledger began
  const auto* alpha = row(rep["projects"], "project", "alpha");
  const auto* beta = row(rep["projects"], "project", "beta");
  REQUIRE(alpha);
  REQUIRE(beta);
  CHECK((*alpha)["su_charged"].get<double>() == Approx(su1).margin(0.01));
  CHECK((*beta)["su_charged"].get<double>() == Approx(su2).margin(0.01));
  CHECK((*alpha)["grant_left"].get<double>() == Approx(500 - su1).margin(0.01));
  CHECK((*beta)["grant_left"].is_null());  // no grant
  CHECK((*alpha)["running_cpus"] == 0);
  CHECK((*alpha)["pending_jobs"] == 0);
  // The simulator's report fields, in its order.
  std::vector<std::string> keys;
  for (auto it = rep["projects"][0].begin(); it != rep["projects"][0].end(); ++it) keys.push_back(it.key());
  CHECK(keys == std::vector<std::string>{"project", "allocation", "slots_used", "running_cpus", "subscription",
                                         "pending_jobs", "su_charged", "grant_left"});
  const auto* root = row(rep["users"], "user", "root");
  REQUIRE(root);
  CHECK((*root)["su_charged"].get<double>() == Approx(su1 + su2).margin(0.02));

  // One project; a week by number or ISO name; the table.
  auto only = report_json(a, {"--project", "beta"});
  REQUIRE(only["projects"].size() == 1);
  CHECK(only["projects"][0]["project"] == "beta");
  char iso[16];
  std::time_t t = std::time(nullptr);
  std::strftime(iso, sizeof iso, "%G-W%V", std::gmtime(&t));
  auto week0 = report_json(a, {"--week", "0"});
  CHECK(week0["week"] == 0);
  REQUIRE(row(week0["projects"], "project", "alpha"));
  CHECK((*row(week0["projects"], "project", "alpha"))["su_charged"] == (*alpha)["su_charged"]);
  CHECK(report_json(a, {"--week", iso})["week"] == 0);
  auto table = a.cli({"report"});
  CHECK(table.rc == 0);
  CHECK(table.out.rfind("week 0 at ", 0) == 0);
  CHECK(table.out.find("\nprojects\nproject  alloc  used  running  over/under  pending") != std::string::npos);
  CHECK(table.out.find("SU  grant left\n") != std::string::npos);
  CHECK(table.out.find("\nalpha ") != std::string::npos);

  // Bad values: clear errors, exit 1 from corrald's judgement, 2 for a usage error.
  auto bad = a.cli({"report", "--week", "soon"});
  CHECK(bad.rc == 1);
  CHECK(bad.err.find("--week 'soon': expected a week number") != std::string::npos);
  auto future = a.cli({"report", "--week", "7"});
  CHECK(future.rc == 1);
  CHECK(future.err.find("--week '7': has not begun (this is week 0") != std::string::npos);
  auto early = a.cli({"report", "--week", "2001-W01"});
  CHECK(early.rc == 1);
  CHECK(early.err.find("before charging began") != std::string::npos);
  auto who = a.cli({"report", "--project", "gamma"});
  CHECK(who.rc == 1);
  CHECK(who.err.find("--project 'gamma': no grant, charge or job names it (projects here: alpha, beta)") !=
        std::string::npos);
  CHECK(a.cli({"report", "--project", ""}).rc == 2);
  CHECK(a.cli({"report", "--week", ""}).rc == 2);
  CHECK(a.cli({"report", "extra"}).rc == 2);
  CHECK(bad.out.empty());
}
