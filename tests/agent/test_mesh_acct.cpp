// corral acct and corral alloc through a mesh of three corrald (tests/agent/mesh_cluster.hpp):
// the ended jobs are in the replicated state, so after a SIGKILL to the coordinator every
// survivor lists each job that ended before it; alloc set through one node is refused for a
// plain user and, by an operator, decides the coordinator's next pass (the allocated project's
// job starts before an older one of a project with none).
#include <chrono>
#include <ctime>
#include <fstream>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "coordinator/pba/calendar.hpp"
#include "harness.hpp"
#include "mesh_cluster.hpp"

using namespace harness;
using Json = nlohmann::json;
using namespace mesh_cluster;

namespace {

constexpr int kPlainUser = 2, kOperator = 65534;  // bin; nobody (operators = nogroup)

std::uint64_t submit_on(Mesh& m, unsigned i, std::vector<std::string> args) {
  Result r = m.agents[i]->submit(std::move(args));
  INFO(r.out << r.err);
  REQUIRE(r.rc == 0);
  return std::stoull(r.out);
}

Json json_on(const Mesh& m, unsigned i, std::vector<std::string> args) {
  Result r = m.agents[i]->cli(std::move(args));
  return r.rc == 0 ? Json::parse(r.out, nullptr, false) : Json();
}

// The ids member i's `corral acct` lists.
std::set<std::uint64_t> acct_ids(const Mesh& m, unsigned i) {
  std::set<std::uint64_t> ids;
  Json all = json_on(m, i, {"acct", "--json"});
  if (all.is_array())
    for (const Json& j : all) ids.insert(j["id"].get<std::uint64_t>());
  return ids;
}

// Member i's acct ids once they are `want` (a follower applies a commit within a heartbeat),
// or its last answer after 10 s.
std::set<std::uint64_t> acct_once(const Mesh& m, unsigned i, const std::set<std::uint64_t>& want) {
  std::set<std::uint64_t> have;
  for (double end = now_ms() + 10000; now_ms() < end && (have = acct_ids(m, i)) != want;)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  return have;
}

// Member i's view of a job once its state is `want`, or its last view after 15 s.
Json await_state(const Mesh& m, unsigned i, std::uint64_t id, const char* want) {
  Json j;
  for (double end = now_ms() + 15000; now_ms() < end; std::this_thread::sleep_for(std::chrono::milliseconds(50)))
    if ((j = json_on(m, i, {"stat", std::to_string(id), "--json"})).is_object() && j["state"] == want) break;
  return j;
}


// Every agent of m reads a plan file of `text` (the setting `plan_key`) with `sets` beside it;
// returns the coordinator elected.
unsigned with_plan(Mesh& m, const std::string& plan_key, const std::string& text, std::vector<std::string> sets) {
  const std::string plan = make_tmpdir("meshplan") + "/projects.plan";
  std::ofstream(plan) << text;
  sets.insert(sets.end(), {"--set", plan_key + "=" + plan});
  for (auto& a : m.agents) a->extra.insert(a->extra.end(), sets.begin(), sets.end());
  return static_cast<unsigned>(m.elect());
}

}  // namespace

TEST_CASE("mesh: acct lists every ended job after a coordinator SIGKILL; alloc set decides the next pass",
          "[mesh]") {
  SKIP_UNLESS_ROOT();
  Mesh m(3);
  const unsigned lead = with_plan(m, "pba_plan", "project chip\nmember chip root\nproject soc\nmember soc root\n",
                                  {"--set", "operators=nogroup", "--set", "pba=yes"});
  const unsigned f1 = (lead + 1) % 3, f2 = (lead + 2) % 3;
  const std::string week = corral::pba::format_iso_week(corral::pba::iso_week(static_cast<corral::Time>(std::time(nullptr))));

  // Three jobs end, submitted through each member.
  std::set<std::uint64_t> ended;
  for (unsigned i = 0; i < 3; ++i)
    ended.insert(submit_on(m, i, {"-P", "chip", "-l", "walltime=60", "--wrap", i == 1 ? "exit 4" : "true"}));
  for (auto id : ended) REQUIRE(await_state(m, f2, id, "ended")["state"] == "ended");

  // One node schedules (the others drained): a blocker holds it while an older job of chip and
  // a younger one of soc wait, neither with an allocation.
  for (unsigned i : {lead, f2}) REQUIRE(m.agents[lead]->cli({"drain", m.names[i], "--reason", "test"}).rc == 0);
  std::uint64_t blocker = submit_on(m, f1, {"-l", "walltime=600,ncpus=2", "--wrap", "sleep 300"});
  REQUIRE(await_state(m, f1, blocker, "running")["state"] == "running");
  std::uint64_t older = submit_on(m, f2, {"-P", "chip", "-l", "walltime=600,ncpus=2", "--wrap", "sleep 300"});
  std::uint64_t younger = submit_on(m, lead, {"-P", "soc", "-l", "walltime=600,ncpus=2", "--wrap", "sleep 300"});

  Result plain = m.agents[f2]->cli({"alloc", "set", "soc", week, "2"}, kPlainUser);
  CHECK(plain.rc == 1);
  CHECK(plain.err.find("only root or a member of group nogroup may change allocations") != std::string::npos);
  Result bad = m.agents[f2]->cli({"alloc", "set", "nosuch", week, "2"});
  CHECK(bad.rc == 1);
  CHECK(bad.err.find("unknown project 'nosuch'") != std::string::npos);
  Result set = m.agents[f2]->cli({"alloc", "set", "soc", week, "2", "--json"}, kOperator);
  INFO(set.err << m.agents[lead]->log());
  REQUIRE(set.rc == 0);

  REQUIRE(m.agents[f1]->cli({"cancel", std::to_string(blocker)}).rc == 0);
  ended.insert(blocker);
  Json y = await_state(m, f1, younger, "running");
  CHECK(y["state"] == "running");
  CHECK(json_on(m, f1, {"stat", std::to_string(older), "--json"})["state"] == "pending");
  REQUIRE(await_state(m, f1, blocker, "ended")["state"] == "ended");

  // Every member lists the same ended jobs; they outlive the coordinator.
  for (unsigned i = 0; i < 3; ++i) CHECK(acct_once(m, i, ended) == ended);
  std::uint64_t term = m.status(lead)["term"].get<std::uint64_t>();
  m.agents[lead]->stop(SIGKILL);
  REQUIRE(m.agreed({f1, f2}, term, 10000) >= 0);
  for (unsigned i : {f1, f2}) CHECK(acct_ids(m, i) == ended);  // at once: nothing to wait for
  Json rows = json_on(m, f2, {"acct", "--json", "--project", "chip"});
  REQUIRE(rows.is_array());
  CHECK(rows.size() == 3);
  for (const Json& j : rows) {
    CHECK(j["run_count"] == 1);
    CHECK(j["nodes"].size() == 1);
    CHECK(j["end_reason"] == (j["exit_code"] == 4 ? "failed" : "completed"));
  }
  Json cal = json_on(m, f1, {"alloc", "--json"});
  bool seen = false;
  for (const Json& r : cal["weeks"]) seen |= r["week"] == week && r["project"] == "soc" && r["allocated"] == 2;
  CHECK(seen);
  for (unsigned i : {f1, f2}) m.agents[i]->cli({"cancel", std::to_string(younger)});
}

TEST_CASE("mesh: NCI charges each run in the log; report and acct show every node's on a follower, "
          "also after a coordinator SIGKILL; a used-up grant moves jobs to bonus",
          "[mesh]") {
  SKIP_UNLESS_ROOT();
  Mesh m(3);
  // One service unit per cpu-second in normal, so that seconds of running show in two decimals.
  const unsigned lead = with_plan(m, "nci_plan", "project chem\nproject phys\ngrant chem 2\ngrant phys 1000\n",
                                  {"--set", "nci=yes", "--set", "nci_require=walltime", "--set", "queues=normal:1:3600"});
  const unsigned f1 = (lead + 1) % 3, f2 = (lead + 2) % 3;

  // Two jobs of 2 cpus (a whole node each) run side by side, so on two nodes; chem's job of one
  // cpu uses up its grant of 2 units.
  std::uint64_t p1 = submit_on(m, f1, {"-P", "phys", "-l", "walltime=60,ncpus=2", "--wrap", "sleep 3"});
  std::uint64_t p2 = submit_on(m, f2, {"-P", "phys", "-l", "walltime=60,ncpus=2", "--wrap", "sleep 3"});
  std::uint64_t c1 = submit_on(m, lead, {"-P", "chem", "-l", "walltime=60,ncpus=1", "--wrap", "sleep 3"});
  for (auto id : {p1, p2, c1}) REQUIRE(await_state(m, f1, id, "ended")["state"] == "ended");
  // chem has nothing left: its next job runs in bonus, free.
  std::uint64_t c2 = submit_on(m, f2, {"-P", "chem", "-l", "walltime=60,ncpus=1", "--wrap", "sleep 1"});
  Json c2s = await_state(m, f1, c2, "ended");
  INFO(c2s.dump() << m.agents[lead]->log());
  CHECK(c2s["queue"] == "bonus");
  CHECK(c2s["su_charged"] == 0);

  // Each job's units are its runs' whole seconds x its cpus, the same on every member.
  auto units = [&](unsigned i) {
    std::map<std::uint64_t, double> su;
    Json all = json_on(m, i, {"acct", "--json"});
    if (all.is_array())
      for (const Json& j : all) su[j["id"].get<std::uint64_t>()] = j["su_charged"].get<double>();
    return su;
  };
  std::map<std::uint64_t, double> su = units(f1);
  REQUIRE(su.size() == 4);
  for (auto id : {p1, p2}) CHECK((su[id] >= 6 && su[id] <= 10 && static_cast<int>(su[id]) % 2 == 0));
  CHECK((su[c1] >= 3 && su[c1] <= 5));
  CHECK(su[c2] == 0);
  Json phys = json_on(m, f1, {"acct", "--json", "--project", "phys"});
  REQUIRE(phys.size() == 2);
  CHECK(phys[0]["nodes"] != phys[1]["nodes"]);

  // The report on a follower covers both nodes' runs; the same after the coordinator dies.
  auto report = [&](unsigned i) {
    Json r = json_on(m, i, {"report", "--json"});
    std::map<std::string, std::pair<double, double>> rows;  // project: SU, grant left
    if (r.is_object())
      for (const Json& p : r["projects"]) rows[p["project"]] = {p["su_charged"].get<double>(), p["grant_left"].get<double>()};
    return rows;
  };
  auto before = report(f1);
  INFO(json_on(m, f1, {"report", "--json"}).dump());
  REQUIRE(before.count("phys"));
  CHECK(before["phys"].first == Approx(su[p1] + su[p2]).margin(0.01));
  CHECK(before["phys"].second == Approx(1000 - su[p1] - su[p2]).margin(0.01));
  CHECK(before["chem"].first == Approx(su[c1]).margin(0.01));
  CHECK(before["chem"].second <= 0);
  std::uint64_t term = m.status(lead)["term"].get<std::uint64_t>();
  m.agents[lead]->stop(SIGKILL);
  REQUIRE(m.agreed({f1, f2}, term, 10000) >= 0);
  for (unsigned i : {f1, f2}) {
    CHECK(report(i) == before);
    CHECK(units(i) == su);
  }
}
