// The operator commands on a standalone corrald, end to end with the real corral binary:
//   - hold / release: a held job never starts (a later job starts first on the idle node),
//     also after a restart; release starts it; a user holds and releases only their own jobs,
//     an operator any, and only an operator releases an operator's hold;
//   - qmove: a pending job moves to another configured queue and is charged at its rate; a
//     running job, an unknown queue and another user's job are refused;
//   - drain / undrain: operators only; nothing new starts, running jobs go on, the state and
//     reason show in `corral node` and `corral nodes`, and survive a restart;
//   - nodes: the one node, with cores, memory and jobs.
// Users: daemon (uid 1) owns the jobs, bin (uid 2) is another user, nobody is an operator
// (operators = nogroup, its primary group).
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "harness.hpp"

using harness::Agent;
using harness::json_field;
using harness::stat_json;
using harness::trim;
using harness::wait_state;
using Json = nlohmann::json;

namespace {

constexpr int kOwner = 1, kOther = 2, kOperator = 65534;

std::vector<std::string> flags(std::vector<std::string> more = {}, int cores = 1) {
  std::vector<std::string> f = {"--set", "declare_cores=" + std::to_string(cores), "--set", "poll_interval=0.2", "--set", "operators=nogroup",
                                "--set", "node_name=op1"};
  f.insert(f.end(), more.begin(), more.end());
  return f;
}

std::string submit_ok(const Agent& a, std::vector<std::string> args, int uid = -1) {
  auto s = a.submit(std::move(args), uid);
  INFO(s.err << a.log());
  REQUIRE(s.rc == 0);
  return trim(s.out);
}

// A job runs to its end: `corral wait` returns 0.
void runs_to_end(const Agent& a, const std::string& id) {
  auto w = a.cli({"wait", id});
  INFO(w.out << w.err << a.log());
  REQUIRE(w.rc == 0);
}

Json stat_of(const Agent& a, const std::string& id) { return Json::parse(stat_json(a, id)); }

}  // namespace

TEST_CASE("hold and release: a held job never starts until released, also across a restart", "[agent]") {
  SKIP_UNLESS_ROOT();
  Agent a("hold", flags());
  a.start();
  std::string blocker = submit_ok(a, {"-N", "blocker", "-l", "ncpus=1,walltime=600", "--wrap", "sleep 300"});
  REQUIRE(wait_state(a, blocker, "running") == "running");
  std::string held = submit_ok(a, {"-N", "held", "-l", "ncpus=1,walltime=60", "--wrap", "touch held.ran"}, kOwner);

  // Another user may neither hold nor release it; the owner holds it.
  auto no = a.cli({"hold", held}, kOther);
  CHECK(no.rc == 1);
  CHECK(no.err.find("belongs to daemon") != std::string::npos);
  auto h = a.cli({"hold", held, "--json"}, kOwner);
  INFO(h.err);
  REQUIRE(h.rc == 0);
  Json hj = Json::parse(h.out);
  CHECK(hj[0]["ok"] == true);
  CHECK(hj[0]["message"] == "held");
  Json st = stat_of(a, held);
  CHECK(st["state"] == "pending");
  CHECK(st["wait_reason"] == "held");
  CHECK(st["wait_detail"].get<std::string>().find("held by daemon (user hold)") != std::string::npos);
  CHECK(a.cli({"release", held}, kOther).rc == 1);
  auto running = a.cli({"hold", blocker});
  CHECK(running.rc == 1);
  CHECK(running.err.find("it is running") != std::string::npos);

  // The node frees up: later jobs start and end while the held one waits.
  REQUIRE(a.cli({"cancel", blocker}).rc == 0);
  runs_to_end(a, submit_ok(a, {"-N", "later", "-l", "ncpus=1,walltime=60", "--wrap", "true"}));
  CHECK(stat_of(a, held)["state"] == "pending");

  // Journalled: a restart keeps the hold.
  a.stop(SIGTERM);
  a.start();
  runs_to_end(a, submit_ok(a, {"-N", "after", "-l", "ncpus=1,walltime=60", "--wrap", "true"}));
  st = stat_of(a, held);
  CHECK(st["state"] == "pending");
  CHECK(st["wait_reason"] == "held");

  // The owner releases it: it runs.
  auto r = a.cli({"release", held}, kOwner);
  INFO(r.err);
  CHECK(r.rc == 0);
  CHECK(r.out == held + " released\n");
  runs_to_end(a, held);
  auto again = a.cli({"release", held});
  CHECK(again.rc == 1);
  CHECK(again.err.find("it is ended") != std::string::npos);
}

TEST_CASE("an operator holds any job; only an operator releases an operator's hold", "[agent]") {
  SKIP_UNLESS_ROOT();
  Agent a("ophold", flags());
  a.start();
  std::string blocker = submit_ok(a, {"-N", "blocker", "-l", "ncpus=1,walltime=600", "--wrap", "sleep 300"});
  REQUIRE(wait_state(a, blocker, "running") == "running");
  std::string id = submit_ok(a, {"-N", "j", "-l", "ncpus=1,walltime=60", "--wrap", "true"}, kOwner);
  REQUIRE(a.cli({"hold", id}, kOperator).rc == 0);
  CHECK(stat_of(a, id)["wait_detail"].get<std::string>().find("operator hold") != std::string::npos);
  auto own = a.cli({"release", id}, kOwner);
  CHECK(own.rc == 1);
  CHECK(own.err.find("only root or a member of group nogroup may release it") != std::string::npos);
  REQUIRE(a.cli({"cancel", blocker}).rc == 0);
  runs_to_end(a, submit_ok(a, {"-l", "ncpus=1,walltime=60", "--wrap", "true"}));
  CHECK(stat_of(a, id)["state"] == "pending");
  REQUIRE(a.cli({"release", id}, kOperator).rc == 0);
  runs_to_end(a, id);
}

TEST_CASE("qmove: a pending job moves to another queue and is charged at its rate", "[agent][nci]") {
  SKIP_UNLESS_ROOT();
  Agent a("qmove", flags({"--set", "nci=yes", "--set", "nci_require=walltime", "--set",
                          "queues=normal:1:1,express:2:6"}));
  a.start();
  std::string blocker = submit_ok(a, {"-N", "blocker", "-l", "ncpus=1,walltime=600", "--wrap", "sleep 300"});
  REQUIRE(wait_state(a, blocker, "running") == "running");
  std::string id = submit_ok(a, {"-N", "mv", "-l", "ncpus=1,walltime=600", "--wrap", "sleep 300"}, kOwner);
  CHECK(stat_of(a, id)["queue"] == "normal");

  auto other = a.cli({"qmove", "express", id}, kOther);
  CHECK(other.rc == 1);
  CHECK(other.err.find("belongs to daemon") != std::string::npos);
  auto unknown = a.cli({"qmove", "nosuch", id}, kOwner);
  CHECK(unknown.rc == 1);
  CHECK(unknown.err.find("unknown queue 'nosuch' (queues here: normal, express)") != std::string::npos);
  auto run = a.cli({"qmove", "express", blocker});
  CHECK(run.rc == 1);
  CHECK(run.err.find("cannot qmove job " + blocker + ": it is running") != std::string::npos);
  auto mv = a.cli({"qmove", "express", id, "--json"}, kOwner);
  INFO(mv.err);
  REQUIRE(mv.rc == 0);
  CHECK(Json::parse(mv.out)[0]["message"] == "moved to queue express");
  CHECK(stat_of(a, id)["queue"] == "express");

  REQUIRE(a.cli({"cancel", blocker}).rc == 0);
  REQUIRE(wait_state(a, id, "running") == "running");
  Json st = stat_of(a, id);
  CHECK(st["queue"] == "express");
  CHECK(st["su_rate"].get<double>() == Approx(6.0));
  a.cli({"cancel", id});
}

TEST_CASE("drain and undrain: operators only; nothing new starts, running jobs go on, kept across a restart",
          "[agent]") {
  SKIP_UNLESS_ROOT();
  Agent a("drain", flags({}, 2));
  a.start();
  std::string running = submit_ok(a, {"-N", "running", "-l", "ncpus=1,walltime=600", "--wrap", "sleep 300"});
  REQUIRE(wait_state(a, running, "running") == "running");

  auto no = a.cli({"drain", "op1", "--reason", "disk swap"}, kOwner);
  CHECK(no.rc == 1);
  CHECK(no.err.find("only root or a member of group nogroup may drain a node") != std::string::npos);
  CHECK(a.cli({"drain", "op1"}).rc == 2);  // no reason
  auto wrong = a.cli({"drain", "elsewhere", "--reason", "x"});
  CHECK(wrong.rc == 1);
  CHECK(wrong.err.find("its node is op1") != std::string::npos);
  auto d = a.cli({"drain", "op1", "--reason", "disk swap", "--json"}, kOperator);
  INFO(d.err);
  REQUIRE(d.rc == 0);
  CHECK(Json::parse(d.out) == Json{{"node", "op1"}, {"state", "drained"}, {"reason", "disk swap"}});

  std::string waits = submit_ok(a, {"-N", "waits", "-l", "ncpus=1,walltime=60", "--wrap", "true"}, kOwner);
  Json node = Json::parse(a.cli({"node", "--json"}).out);
  CHECK(node["state"] == "drained");
  CHECK(node["drain_reason"] == "disk swap");
  Json nodes = Json::parse(a.cli({"nodes", "--json"}).out);
  REQUIRE(nodes.size() == 1);
  CHECK(nodes[0]["name"] == "op1");
  CHECK(nodes[0]["state"] == "drained");
  CHECK(nodes[0]["reason"] == "disk swap");
  CHECK(nodes[0]["cores"] == 2);
  CHECK(nodes[0]["cores_used"] == 1);
  CHECK(nodes[0]["cores_free"] == 1);
  CHECK(nodes[0]["jobs"] == 1);

  // Across a restart (its passes run at start): still drained, the job still waits, the
  // running one was adopted and runs on.
  a.stop(SIGTERM);
  a.start();
  CHECK(Json::parse(a.cli({"node", "--json"}).out)["state"] == "drained");
  CHECK(stat_of(a, waits)["state"] == "pending");
  CHECK(stat_of(a, running)["state"] == "running");

  auto u = a.cli({"undrain", "op1"});
  INFO(u.err);
  REQUIRE(u.rc == 0);
  CHECK(u.out == "op1 up\n");
  runs_to_end(a, waits);
  CHECK(Json::parse(a.cli({"nodes", "--json"}).out)[0]["state"] == "up");
  a.cli({"cancel", running});
}
