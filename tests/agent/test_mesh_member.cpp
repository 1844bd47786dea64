// A member that does not vote, end to end: three voters and one member
// (tests/agent/mesh_cluster.hpp; each corrald in its own network namespace
// where the machine allows it). The member joins through the voters, is
// listed by `corral mesh` and `corral nodes`, takes a user's submit, runs the
// job the plan gives it (4 cores: only the member has them) and reports its
// end to the replicated state; `corral mesh handover` moves the coordinator to another
// voter; after a SIGKILL to the coordinator it follows the new one. A fifth agent whose key the voters do not allow is refused. A dead voter is
// replaced by promoting the member and removing the dead one; the mesh then outlives the
// death of another original voter. A member removed while silent stops its job's processes
// once it is back and told.
#include <chrono>
#include <sstream>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "harness.hpp"
#include "mesh_cluster.hpp"

using namespace harness;
using Json = nlohmann::json;
using namespace mesh_cluster;

namespace {

// The entry of `name` in `corral mesh --json`'s members (null when absent).
Json member_named(const Json& status, const std::string& name) {
  if (!status.is_object()) return Json();
  for (const Json& mb : status["members"])
    if (mb["name"] == name) return mb;
  return Json();
}

// Waits until `corral stat ID --json` on agent i says the job ended; the job.
Json ended_job(const Mesh& m, unsigned i, std::uint64_t id, int ms) {
  Json j;
  for (double end = now_ms() + ms; now_ms() < end; std::this_thread::sleep_for(std::chrono::milliseconds(50))) {
    Result r = m.agents[i]->cli({"stat", std::to_string(id), "--json"});
    j = r.rc == 0 ? Json::parse(r.out, nullptr, false) : Json();
    if (j.is_object() && j["state"] == "ended") break;
  }
  return j;
}

// A job of 4 cores submitted on the member runs there, once, and its end is replicated:
// agent `check` (a voter) lists it completed with one run on the member.
void runs_on_member(const Mesh& m, unsigned mem, unsigned check, const std::string& ran) {
  Result r = m.agents[mem]->submit({"-l", "walltime=60,ncpus=4", "--wrap", "echo $CORRAL_JOBID >> " + ran});
  INFO(r.out << r.err << m.agents[mem]->log());
  REQUIRE(r.rc == 0);
  std::uint64_t id = std::stoull(r.out);
  Json j = ended_job(m, check, id, 20000);
  INFO(j.dump() << m.agents[mem]->log());
  REQUIRE(j.is_object());
  CHECK(j["state"] == "ended");
  CHECK(j["end_reason"] == "completed");
  REQUIRE(j["runs"].size() == 1);
  CHECK(j["runs"][0]["comment"] == "on " + m.names[mem]);
  CHECK(starts_in_log(m, mem)[id] == 1);
  for (unsigned k = 0; k < 3; ++k) CHECK(starts_in_log(m, k).count(id) == 0);
  std::istringstream lines(slurp(ran));
  int seen = 0;
  for (std::string line; std::getline(lines, line);) seen += line == std::to_string(id);
  CHECK(seen == 1);
}

}  // namespace

TEST_CASE("mesh member: joins through the voters, runs the jobs placed on it, follows a new coordinator",
          "[mesh]") {
  SKIP_UNLESS_ROOT();
  Mesh m(3, Keys::last_wrong, 0, 2);  // n4 a member; n5 a member with a key the voters do not allow
  const unsigned mem = 3, stranger = 4;
  int l = m.elect(4);
  unsigned lead = static_cast<unsigned>(l);

  // The coordinator lists n4 as a member it hears from, and n4 knows the coordinator.
  Json s, mine;
  for (double end = now_ms() + 10000; now_ms() < end; std::this_thread::sleep_for(std::chrono::milliseconds(50))) {
    s = m.status(lead);
    mine = m.status(mem);
    Json mb = member_named(s, "n4");
    if (mb.is_object() && mb["last_contact_ms"].get<std::int64_t>() >= 0 && mine.is_object() &&
        member_named(mine, m.names[lead]).value("last_contact_ms", -1) >= 0)
      break;
  }
  INFO(s.dump() << "\n" << mine.dump() << m.agents[lead]->log());
  Json mb = member_named(s, "n4");
  REQUIRE(mb.is_object());
  CHECK(mb["role"] == "member");
  CHECK(mb["address"] == m.listen[mem]);
  CHECK(mb["last_contact_ms"].get<std::int64_t>() >= 0);
  CHECK(mb["last_contact_ms"].get<std::int64_t>() < 5000);
  CHECK(s["voters"].size() == 3);
  CHECK(mine["coordinator"] == m.names[lead]);
  CHECK(mine["state"] == "follower");
  CHECK(member_named(mine, "n4")["role"] == "member");
  CHECK(member_named(mine, m.names[lead])["role"] == "voter");
  CHECK(member_named(mine, m.names[lead])["last_contact_ms"].get<std::int64_t>() >= 0);

  // `corral nodes` on a voter: the member is up with its 4 cores (once its report reached
  // that voter: a voter follows a member from the configuration entry that admits it).
  bool listed = false;
  for (double end = now_ms() + 5000; now_ms() < end && !listed; std::this_thread::sleep_for(std::chrono::milliseconds(50))) {
    Result nodes = m.agents[(lead + 1) % 3]->cli({"nodes", "--json"});
    REQUIRE(nodes.rc == 0);
    for (const Json& n : Json::parse(nodes.out))
      if (n["name"] == "n4") listed = n["state"] == "up" && n["cores"] == 4;
  }
  CHECK(listed);

  // The impostor is refused by the voters (logged with its address) and appears nowhere.
  std::string host = m.listen[stranger].substr(0, m.listen[stranger].rfind(':'));
  bool logged = false;
  for (double end = now_ms() + 5000; now_ms() < end && !logged; std::this_thread::sleep_for(std::chrono::milliseconds(50)))
    logged = m.agents[lead]->log().find("mesh: refused " + host) != std::string::npos;
  CHECK(logged);
  CHECK(member_named(m.status(lead), "n5").is_null());
  CHECK(m.status(stranger)["coordinator"] == "");

  // (a), (b): a submit on the member is accepted; the job fits only there, runs and ends there.
  const std::string ran = m.agents[mem]->dir + "/ran";
  runs_on_member(m, mem, (lead + 1) % 3, ran);

  // corral mesh handover: refused for a member that does not vote and for a user; to a voter,
  // it coordinates next (asked again while the coordinator does not count it up yet).
  Result not_voter = m.agents[mem]->cli({"mesh", "handover", "n4"});
  CHECK(not_voter.rc != 0);
  CHECK(not_voter.err.find("n4 is not a voter") != std::string::npos);
  Result user = m.agents[mem]->cli({"mesh", "handover"}, 65534);
  CHECK(user.rc != 0);
  CHECK(user.err.find("may hand the coordinator over") != std::string::npos);
  const unsigned next = (lead + 1) % 3;
  Result ho;
  for (double end = now_ms() + 10000; now_ms() < end; std::this_thread::sleep_for(std::chrono::milliseconds(100))) {
    ho = m.agents[mem]->cli({"mesh", "handover", m.names[next]});
    if (ho.rc == 0 || ho.err.find("not up") == std::string::npos) break;
  }
  INFO(ho.out << ho.err << m.agents[lead]->log());
  REQUIRE(ho.rc == 0);
  CHECK(ho.out == m.names[next] + " coordinator\n");
  bool named = false;
  for (double end = now_ms() + 5000; now_ms() < end && !named; std::this_thread::sleep_for(std::chrono::milliseconds(50))) {
    named = true;
    for (unsigned i = 0; i < 4; ++i) named = named && m.status(i).value("coordinator", std::string()) == m.names[next];
  }
  CHECK(named);
  lead = next;
  l = static_cast<int>(next);
  s = m.status(lead);

  // (c): SIGKILL to the coordinator; the member follows the new one and runs a new job.
  std::uint64_t term = s["term"].get<std::uint64_t>();
  m.agents[lead]->stop(SIGKILL);
  std::vector<unsigned> up;
  for (unsigned i = 0; i < 4; ++i)
    if (i != lead) up.push_back(i);
  int nl = m.agreed(up, term, 15000);
  REQUIRE(nl >= 0);
  CHECK(nl != l);
  runs_on_member(m, mem, static_cast<unsigned>(nl), ran);
}

TEST_CASE("mesh member: corral mesh remove takes a drained member out for good; undrain lets it in again; "
          "a member removed while silent stops its runs when it is back",
          "[mesh]") {
  SKIP_UNLESS_ROOT();
  Mesh m(3, Keys::all, 0, 1);  // n4 a member
  const unsigned mem = 3;
  int l = m.elect(4);
  REQUIRE(l >= 0);
  const unsigned lead = static_cast<unsigned>(l), other = (lead + 1) % 3;
  auto listed = [&](bool want) {
    bool now = !want;
    for (double end = now_ms() + 10000; now_ms() < end && now != want; std::this_thread::sleep_for(std::chrono::milliseconds(50)))
      now = member_named(m.status(lead), "n4").is_object();
    return now == want;
  };
  REQUIRE(listed(true));

  // Not while it may run jobs, never the coordinator, only root or an operator.
  Result busy = m.agents[other]->cli({"mesh", "remove", "n4"});
  CHECK(busy.rc != 0);
  CHECK(busy.err.find("drain n4 first") != std::string::npos);
  Result voter = m.agents[other]->cli({"mesh", "remove", m.names[lead]});
  CHECK(voter.rc != 0);
  CHECK(voter.err.find("is the coordinator") != std::string::npos);
  CHECK(m.agents[other]->cli({"mesh", "remove", "n4"}, 65534).rc != 0);

  REQUIRE(m.agents[other]->cli({"drain", "n4", "--reason", "retired"}).rc == 0);
  Result rm = m.agents[other]->cli({"mesh", "remove", "n4"});
  INFO(rm.out << rm.err);
  REQUIRE(rm.rc == 0);
  CHECK(rm.out == "n4 removed\n");
  // Out of the configuration, out of `corral nodes`, and its hellos are refused while it runs on.
  CHECK(listed(false));
  Result nodes = m.agents[other]->cli({"nodes", "--json"});
  REQUIRE(nodes.rc == 0);
  for (const Json& n : Json::parse(nodes.out)) CHECK(n["name"] != "n4");
  bool refused = false;
  for (double end = now_ms() + 5000; now_ms() < end && !refused; std::this_thread::sleep_for(std::chrono::milliseconds(50)))
    refused = m.agents[lead]->log().find("(n4) at " ) != std::string::npos &&
              m.agents[lead]->log().find("it was removed from the mesh") != std::string::npos;
  CHECK(refused);
  CHECK_FALSE(member_named(m.status(lead), "n4").is_object());
  (void)mem;

  // An undrain lets it in again.
  REQUIRE(m.agents[other]->cli({"undrain", "n4"}).rc == 0);
  CHECK(listed(true));

  // n4 runs a job (4 cores: only it has them), then falls silent (its corrald stopped; the
  // job's process runs on). Silent 10 s, it may be removed: its job ends node_fail.
  Result sub = m.agents[other]->submit({"-l", "walltime=600,ncpus=4", "--wrap", "sleep 300"});
  INFO(sub.out << sub.err);
  REQUIRE(sub.rc == 0);
  const std::uint64_t id = std::stoull(sub.out);
  bool running = false;
  for (double end = now_ms() + 15000; now_ms() < end && !running; std::this_thread::sleep_for(std::chrono::milliseconds(50)))
    running = !job_pids(*m.agents[mem], id).empty();
  INFO(m.agents[mem]->log());
  REQUIRE(running);
  const pid_t n4 = m.agents[mem]->pid;
  REQUIRE(::kill(n4, SIGSTOP) == 0);
  REQUIRE(m.agents[other]->cli({"drain", "n4", "--reason", "cut off"}).rc == 0);
  Result gone;
  for (double end = now_ms() + 30000; now_ms() < end && gone.rc != 0; std::this_thread::sleep_for(std::chrono::milliseconds(250)))
    gone = m.agents[other]->cli({"mesh", "remove", "n4"});
  ::kill(n4, SIGCONT);  // before any REQUIRE: the fixture stops it at the end
  INFO(gone.out << gone.err);
  REQUIRE(gone.rc == 0);
  Json j = ended_job(m, other, id, 5000);
  CHECK(j["end_reason"] == "node_fail");
  // Back, n4 is refused and told why: it stops the job's processes, and does not send its end.
  bool stopped = false;
  for (double end = now_ms() + 15000; now_ms() < end && !stopped; std::this_thread::sleep_for(std::chrono::milliseconds(50)))
    stopped = job_pids(*m.agents[mem], id).empty();
  INFO(m.agents[mem]->log());
  CHECK(stopped);
  CHECK(m.agents[mem]->log().find("it was removed from mesh") != std::string::npos);
  bool unsent = false;
  for (double end = now_ms() + 5000; now_ms() < end && !unsent; std::this_thread::sleep_for(std::chrono::milliseconds(50)))
    unsent = m.agents[mem]->log().find("job " + std::to_string(id) + " stopped; its end is not sent") != std::string::npos;
  CHECK(unsent);
  CHECK(ended_job(m, other, id, 1000)["end_reason"] == "node_fail");
}

TEST_CASE("mesh member: a dead voter is replaced by promoting a member; the mesh outlives another voter's death",
          "[mesh]") {
  SKIP_UNLESS_ROOT();
  Mesh m(3, Keys::all, 0, 1);  // n4 a member
  const unsigned mem = 3;
  const int l = m.elect(4);
  REQUIRE(l >= 0);
  const double t0 = now_ms();
  const unsigned lead = static_cast<unsigned>(l), dead = (lead + 1) % 3, other = (lead + 2) % 3;
  auto role_of = [&](unsigned i, const std::string& name) {
    Json mb = member_named(m.status(i), name);
    return mb.is_object() ? mb.value("role", std::string()) : std::string();
  };
  auto becomes = [&](unsigned i, const std::string& name, const std::string& role) {
    for (double end = now_ms() + 10000; now_ms() < end; std::this_thread::sleep_for(std::chrono::milliseconds(50)))
      if (role_of(i, name) == role) return true;
    return false;
  };
  REQUIRE(becomes(lead, "n4", "member"));
  std::uint64_t term = m.status(lead)["term"].get<std::uint64_t>();

  // A voter dies. Removing it first would leave 2 voters: refused.
  m.agents[dead]->stop(SIGKILL);
  Result early = m.agents[other]->cli({"mesh", "remove", m.names[dead]});
  INFO(early.out << early.err);
  CHECK(early.rc != 0);
  CHECK(early.err.find("would leave 2 voters") != std::string::npos);

  // Promote the member (from the member itself), then drain and remove the dead voter.
  // The coordinator counts a voter up once it holds its current report (a snapshot asked
  // of it after the election): until then "not a majority".
  Result up;
  for (double end = now_ms() + 10000; now_ms() < end; std::this_thread::sleep_for(std::chrono::milliseconds(100))) {
    up = m.agents[mem]->cli({"mesh", "promote", "n4"});
    if (up.rc == 0 || up.err.find("not a majority") == std::string::npos) break;
  }
  INFO(up.out << up.err << m.agents[lead]->log());
  REQUIRE(up.rc == 0);
  CHECK(up.out == "n4 voter\n");
  CHECK(becomes(other, "n4", "voter"));
  REQUIRE(m.agents[other]->cli({"drain", m.names[dead], "--reason", "disk lost"}).rc == 0);
  Result rm = m.agents[other]->cli({"mesh", "remove", m.names[dead], "--json"});
  INFO(rm.out << rm.err);
  REQUIRE(rm.rc == 0);
  CHECK(Json::parse(rm.out)["state"] == "removed");
  Json s = m.status(mem);
  for (double end = now_ms() + 5000; now_ms() < end && s["voters"].size() != 3;
       std::this_thread::sleep_for(std::chrono::milliseconds(50)))
    s = m.status(mem);
  INFO(s.dump());
  CHECK(s["voters"].size() == 3);
  CHECK(s["voters"].dump().find('"' + m.listen[mem] + '"') != std::string::npos);
  CHECK(s["voters"].dump().find('"' + m.listen[dead] + '"') == std::string::npos);

  // The coordinator, an original voter, dies too: the other original voter and n4 are two of
  // the 3 voters, elect a coordinator and run a job (it fits only on n4).
  m.agents[lead]->stop(SIGKILL);
  const int nl = m.agreed({other, mem}, term, 15000);
  INFO(m.agents[other]->log() << m.agents[mem]->log());
  REQUIRE(nl >= 0);
  runs_on_member(m, mem, static_cast<unsigned>(nl), m.agents[mem]->dir + "/ran");
  WARN("voter replaced and the mesh re-elected in " << (now_ms() - t0) / 1000 << " s after the first election");
}
