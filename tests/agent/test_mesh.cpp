// corrald in a mesh, end to end: three real corrald processes, each in its own
// network namespace (tests/mesh_net.hpp; 127.0.0.1 ports where namespaces are
// unavailable, and the test says which), elect one coordinator, elect another
// within seconds of a SIGKILL to it, and the killed one rejoins from its raft
// files as a follower with the log.
#include <netinet/in.h>
#include <sys/socket.h>

#include <chrono>
#include <algorithm>
#include <map>
#include <memory>
#include <sstream>
#include <set>

#include <nlohmann/json.hpp>

#include "harness.hpp"
#include "mesh_cluster.hpp"
#include "tests/mesh_net.hpp"

using namespace harness;
using Json = nlohmann::json;
using namespace mesh_cluster;

TEST_CASE("mesh: three corrald elect a coordinator, re-elect after SIGKILL, the killed one rejoins; "
          "SIGTERM hands over",
          "[mesh]") {
  SKIP_UNLESS_ROOT();
  Mesh m(3);  // its own network when the machine allows it (checked to route nowhere else first)
  int l = m.elect();
  // Members say hello every 200 ms: the coordinator soon has heard from each.
  Json before;
  for (double end = now_ms() + 5000; now_ms() < end; std::this_thread::sleep_for(std::chrono::milliseconds(20))) {
    before = m.status(static_cast<unsigned>(l));
    bool all = before.is_object() && before["members"].size() == 3;
    for (const Json& mb : all ? before["members"] : Json::array())
      all = all && mb["last_contact_ms"].get<std::int64_t>() >= 0;
    if (all) break;
  }
  INFO(before.dump());
  std::uint64_t term = before["term"].get<std::uint64_t>();
  CHECK(before["voters"].size() == 3);
  REQUIRE(before["members"].size() == 3);
  for (const Json& mb : before["members"]) {
    CHECK(mb["role"] == "voter");
    CHECK(mb["last_contact_ms"].get<std::int64_t>() >= 0);  // heard from every member
    CHECK(mb["last_contact_ms"].get<std::int64_t>() < 5000);
  }
  // Each publisher heard for the first time was asked for a snapshot (docs/mesh.md, "Channels").
  auto asked_of = [&](unsigned by, const std::string& name) -> std::int64_t {
    Json s = m.status(by);
    for (const Json& mb : s.is_object() ? s["members"] : Json::array())
      if (mb["name"] == name) return mb["snapshots_asked"].get<std::int64_t>();
    return -1;
  };

  m.agents[static_cast<unsigned>(l)]->stop(SIGKILL);
  double killed = now_ms();
  std::vector<unsigned> survivors;
  for (unsigned i = 0; i < 3; ++i)
    if (static_cast<int>(i) != l) survivors.push_back(i);
  int nl = m.agreed(survivors, term, 10000);
  double took = now_ms() - killed;
  REQUIRE(nl >= 0);
  CHECK(nl != l);
  WARN("re-election after SIGKILL to the coordinator: " << static_cast<int>(took)
                                                         << " ms until both survivors named the new one");
  CHECK(took < 5000);

  // The killed member comes back from its raft files: a follower of the new
  // coordinator, with every entry the mesh committed meanwhile.
  Json lead = m.status(static_cast<unsigned>(nl));
  std::uint64_t commit = lead["commit_index"].get<std::uint64_t>();
  const std::string killed_name = m.names[static_cast<unsigned>(l)];
  const std::int64_t asked = asked_of(static_cast<unsigned>(nl), killed_name);
  CHECK(asked >= 1);
  m.agents[static_cast<unsigned>(l)]->start();
  Json back;
  for (double end = now_ms() + 10000; now_ms() < end; std::this_thread::sleep_for(std::chrono::milliseconds(20))) {
    back = m.status(static_cast<unsigned>(l));
    if (!back.is_null() && !back.is_discarded() && back["state"] == "follower" &&
        back["coordinator"] == m.names[static_cast<unsigned>(nl)] &&
        back["last_applied"].get<std::uint64_t>() >= commit)
      break;
  }
  INFO(back.dump());
  CHECK(back["state"] == "follower");
  CHECK(back["coordinator"] == m.names[static_cast<unsigned>(nl)]);
  CHECK(back["last_applied"].get<std::uint64_t>() >= commit);
  CHECK(m.agents[static_cast<unsigned>(l)]->log().find("raft log") == std::string::npos);  // nothing cut or damaged
  // Restarted, it publishes in a new incarnation: the new coordinator asks it for a snapshot again.
  std::int64_t asked_again = asked;
  for (double end = now_ms() + 5000; now_ms() < end && asked_again <= asked;
       std::this_thread::sleep_for(std::chrono::milliseconds(20)))
    asked_again = asked_of(static_cast<unsigned>(nl), killed_name);
  CHECK(asked_again > asked);

  // `systemctl stop` on the coordinator (SIGTERM): it hands its role to another voter before it
  // exits, and the two others name that voter.
  const unsigned c = static_cast<unsigned>(nl);
  term = m.status(c)["term"].get<std::uint64_t>();
  double stopped = now_ms();
  m.agents[c]->stop(SIGTERM);
  const double exited = now_ms() - stopped;
  const std::string log = m.agents[c]->log();
  INFO(log);
  const std::string said = "coordinator handed over to ";
  const std::size_t at = log.find(said);
  REQUIRE(at != std::string::npos);
  const std::string to = log.substr(at + said.size(), log.find(':', at) - at - said.size());
  std::vector<unsigned> rest;
  for (unsigned i = 0; i < 3; ++i)
    if (i != c) rest.push_back(i);
  const int next = m.agreed(rest, term, 5000);
  REQUIRE(next >= 0);
  CHECK(m.names[static_cast<unsigned>(next)] == to);
  // Its last heartbeat said it stops: the new coordinator lists it so.
  std::string said_last;
  for (double end = now_ms() + 2000; now_ms() < end && said_last != "stopping";
       std::this_thread::sleep_for(std::chrono::milliseconds(20))) {
    Json s = m.status(static_cast<unsigned>(next));
    for (const Json& mb : s.is_object() ? s["members"] : Json::array())
      if (mb["name"] == m.names[c]) said_last = mb.value("state", std::string());
  }
  CHECK(said_last == "stopping");
  Result nodes = m.agents[static_cast<unsigned>(next)]->cli({"nodes", "--json"});
  REQUIRE(nodes.rc == 0);
  for (const Json& n : Json::parse(nodes.out)) CHECK(n["state"] == (n["name"] == m.names[c] ? "stopped" : "up"));
  // So the new coordinator counts it down at once (heard from less than a second ago).
  Result back_to = m.agents[static_cast<unsigned>(next)]->cli({"mesh", "handover", m.names[c]});
  CHECK(back_to.rc != 0);
  CHECK(back_to.err.find(m.names[c] + " is not up (stopping") != std::string::npos);
  WARN("SIGTERM to the coordinator: exited after " << static_cast<int>(exited) << " ms, handed over to " << to
                                                   << ", both others named it after "
                                                   << static_cast<int>(now_ms() - stopped) << " ms");
}

namespace {

std::uint64_t submitted_id(const Result& r) {
  INFO(r.out << r.err);
  REQUIRE(r.rc == 0);
  return std::stoull(r.out);
}

}  // namespace

TEST_CASE("mesh: a job submitted on any node is listed by every node, also after SIGKILL of the coordinator",
          "[mesh]") {
  SKIP_UNLESS_ROOT();
  Mesh m(3);
  int l = m.elect();
  unsigned lead = static_cast<unsigned>(l), f1 = (lead + 1) % 3, f2 = (lead + 2) % 3;
  std::uint64_t term = m.status(lead)["term"].get<std::uint64_t>();

  // Submitted on a follower (forwarded to the coordinator), listed on the other follower.
  double t0 = now_ms();
  std::uint64_t a = submitted_id(m.agents[f1]->submit({"-N", "fwd", "-l", "walltime=600", "--wrap", "sleep 300"}));
  WARN("submit on a follower, answered once committed: " << static_cast<int>(now_ms() - t0) << " ms");
  std::uint64_t b = submitted_id(m.agents[lead]->submit({"-N", "own", "-l", "walltime=600", "--wrap", "sleep 300"}));
  CHECK(a != b);
  CHECK(lists(m, f2, {a, b}, 5000));
  Result one = m.agents[f2]->cli({"stat", std::to_string(a), "--json"});
  REQUIRE(one.rc == 0);
  Json ja = Json::parse(one.out);
  CHECK(ja["name"] == "fwd");
  CHECK(ja["state"] != "ended");  // pending, or already started by the coordinator
  CHECK(ja["user"] == "root");
  CHECK(m.agents[f2]->cli({"stat", "999"}).rc != 0);
  // A refused submit never reaches the mesh.
  Result bad = m.agents[f1]->submit({"-q", "nosuch", "--wrap", "true"});
  CHECK(bad.rc != 0);
  CHECK(bad.err.find("unknown queue 'nosuch'") != std::string::npos);

  m.agents[lead]->stop(SIGKILL);
  REQUIRE(m.agreed({f1, f2}, term, 10000) >= 0);
  for (unsigned i : {f1, f2}) {
    std::set<std::uint64_t> ids = mesh_ids(m, i);
    CHECK(ids == std::set<std::uint64_t>{a, b});  // same ids, nothing lost, nothing doubled
  }
  // The survivors accept more, under new ids.
  std::uint64_t c = submitted_id(m.agents[f2]->submit({"-l", "walltime=600", "--wrap", "sleep 300"}));
  CHECK(c != a);
  CHECK(c != b);
  CHECK(lists(m, f1, {a, b, c}, 5000));
}

TEST_CASE("mesh: with no coordinator reachable a submit fails after its wait (mesh_submit_wait), nothing accepted",
          "[mesh]") {
  std::string why;
  if (!can_run(&why)) {
    CORRAL_SKIP(why);
    return;
  }
  Mesh m(3);
  m.agents[0]->extra.insert(m.agents[0]->extra.end(), {"--set", "mesh_submit_wait=2s"});
  m.agents[0]->start();  // one voter of three: no majority, no coordinator
  double t0 = now_ms();
  Result r = m.agents[0]->submit({"-l", "walltime=600", "--wrap", "true"});
  double took = now_ms() - t0;
  INFO(r.out << r.err << m.agents[0]->log());
  CHECK(r.rc != 0);
  CHECK(r.err.find("no coordinator of mesh test accepted the job within 2 s") != std::string::npos);
  CHECK(r.err.find("job not accepted") != std::string::npos);
  CHECK(took >= 1900);
  CHECK(took < 8000);
  CHECK(mesh_ids(m, 0).empty());
  CHECK(m.agents[0]->cli({"node"}).rc == 0);  // still serving
}

TEST_CASE("mesh: 20 jobs submitted across the nodes run once each, where the coordinator placed them",
          "[mesh]") {
  SKIP_UNLESS_ROOT();
  Mesh m(3);
  REQUIRE(m.elect() >= 0);
  std::string ran = m.agents[0]->dir + "/ran";
  // The jobs wait for the last submit: were they to end before the next one is accepted (a
  // loaded machine), each would find the first node free and the plan would use no other.
  const std::string go = m.agents[0]->dir + "/go";
  std::set<std::uint64_t> ids;
  double t0 = now_ms();
  for (unsigned k = 0; k < 20; ++k) {
    Result r = m.agents[k % 3]->submit({"-N", "j" + std::to_string(k), "-l", "walltime=60", "--wrap",
                                        "echo $CORRAL_JOBID >> " + ran + "; while [ ! -e " + go +
                                            " ]; do sleep 0.05; done; sleep 0.3"});
    INFO(r.out << r.err);
    REQUIRE(r.rc == 0);
    ids.insert(std::stoull(r.out));
  }
  CHECK(ids.size() == 20);
  Mesh::write_file(go, "");
  for (unsigned i = 0; i < 3; ++i) CHECK(all_ended(m, i, 20, 60000));
  WARN("20 jobs of 0.3 s on 3 nodes of 2 cores, first submit to last end seen: "
       << static_cast<int>(now_ms() - t0) << " ms");

  // Every job: one run, completed, on the node the replicated run names; that node's log has
  // exactly one start of it and no other node's log has any.
  std::vector<std::map<std::uint64_t, int>> starts;
  for (unsigned i = 0; i < 3; ++i) starts.push_back(starts_in_log(m, i));
  std::map<std::string, int> per_node;
  for (unsigned i = 0; i < 3; ++i) {
    Json all = mesh_jobs(m, i);
    REQUIRE(all.size() == 20);
    for (const Json& j : all) {
      INFO(j.dump());
      CHECK(j["end_reason"] == "completed");
      REQUIRE(j["runs"].size() == 1);
      std::string on = j["runs"][0]["comment"].get<std::string>();  // "on NODE"
      REQUIRE(on.rfind("on ", 0) == 0);
      std::string node = on.substr(3);
      auto at = std::find(m.names.begin(), m.names.end(), node);
      REQUIRE(at != m.names.end());
      std::uint64_t id = j["id"].get<std::uint64_t>();
      for (unsigned k = 0; k < 3; ++k)
        CHECK(starts[k][id] == (m.names[k] == node ? 1 : 0));
      if (i == 0) ++per_node[node];
    }
  }
  CHECK(per_node.size() >= 2);  // the plan used more than one node
  std::map<std::uint64_t, int> lines;
  std::istringstream in(slurp(ran));
  for (std::string line; std::getline(in, line);) ++lines[std::stoull(line)];
  CHECK(lines.size() == 20);
  for (const auto& [id, n] : lines) CHECK(n == 1);
}

TEST_CASE("mesh: SIGKILL to the coordinator while jobs run: none runs twice, none is lost", "[mesh]") {
  SKIP_UNLESS_ROOT();
  Mesh m(3);
  int l = m.elect();
  unsigned lead = static_cast<unsigned>(l), f1 = (lead + 1) % 3, f2 = (lead + 2) % 3;
  std::uint64_t term = m.status(lead)["term"].get<std::uint64_t>();
  std::string ran = m.agents[f1]->dir + "/ran";
  std::set<std::uint64_t> ids;
  auto burst = [&](unsigned n) {
    for (unsigned k = 0; k < n; ++k) {
      Result r = m.agents[k % 2 ? f1 : f2]->submit({"-l", "walltime=60", "--wrap",
                                                     "echo $CORRAL_JOBID >> " + ran + "; sleep 1"});
      INFO(r.out << r.err);
      REQUIRE(r.rc == 0);
      ids.insert(std::stoull(r.out));
    }
  };
  burst(12);  // 6 cores: some run, some wait, when the coordinator dies
  m.agents[lead]->stop(SIGKILL);
  REQUIRE(m.agreed({f1, f2}, term, 10000) >= 0);
  burst(6);
  // The killed node comes back: it adopts the jobs it ran and reports their ends.
  m.agents[lead]->start();
  for (unsigned i = 0; i < 3; ++i) CHECK(all_ended(m, i, ids.size(), 90000));
  for (unsigned i = 0; i < 3; ++i) {
    Json all = mesh_jobs(m, i);
    REQUIRE(all.size() == ids.size());
    for (const Json& j : all) {
      INFO(j.dump());
      CHECK(ids.count(j["id"].get<std::uint64_t>()) == 1);
      CHECK(j["end_reason"] == "completed");
      CHECK(j["runs"].size() == 1);
    }
  }
  std::map<std::uint64_t, int> lines;
  std::istringstream in(slurp(ran));
  for (std::string line; std::getline(in, line);) ++lines[std::stoull(line)];
  CHECK(lines.size() == ids.size());  // none lost
  for (const auto& [id, n] : lines) {
    INFO("job " << id);
    CHECK(n == 1);  // none ran twice
  }
}

TEST_CASE("mesh: cancel through the coordinator, from any node, with the owner's permissions", "[mesh]") {
  SKIP_UNLESS_ROOT();
  constexpr int kNobody = 65534, kOther = 65533;
  Mesh m(3);
  REQUIRE(m.elect() >= 0);
  // nobody's job fills a node's 2 cores; three more such jobs: one of the four waits.
  std::vector<std::uint64_t> ids;
  for (unsigned k = 0; k < 4; ++k) {
    Result r = m.agents[k % 3]->submit({"-l", "walltime=600,ncpus=2", "--wrap", "sleep 300"}, kNobody);
    INFO(r.out << r.err);
    REQUIRE(r.rc == 0);
    ids.push_back(std::stoull(r.out));
  }
  auto state = [&](unsigned i, std::uint64_t id) {
    Result r = m.agents[i]->cli({"stat", std::to_string(id), "--json"});
    return r.rc == 0 ? Json::parse(r.out, nullptr, false) : Json();
  };
  std::uint64_t running = 0, waiting = 0;
  for (double end = now_ms() + 15000; now_ms() < end && (!running || !waiting);
       std::this_thread::sleep_for(std::chrono::milliseconds(50))) {
    int n = 0;
    for (auto id : ids) n += state(0, id)["state"] == "running";
    if (n < 3) continue;
    for (auto id : ids) (state(0, id)["state"] == "running" ? running : waiting) = id;
  }
  REQUIRE(running != 0);
  REQUIRE(waiting != 0);

  // Another user, on another node: refused, and the job runs on.
  Result no = m.agents[1]->cli({"cancel", std::to_string(running)}, kOther);
  CHECK(no.rc != 0);
  CHECK(no.err.find("belongs to nobody") != std::string::npos);
  Result unknown = m.agents[2]->cli({"cancel", "999"});
  CHECK(unknown.rc != 0);
  CHECK(unknown.err.find("unknown job id 999") != std::string::npos);
  // The owner cancels the waiting one from one node, root the running one from another.
  CHECK(m.agents[2]->cli({"cancel", std::to_string(waiting)}, kNobody).rc == 0);
  CHECK(m.agents[1]->cli({"cancel", std::to_string(running)}).rc == 0);
  for (unsigned i = 0; i < 3; ++i) {
    for (auto id : {waiting, running}) {
      Json j;
      for (double end = now_ms() + 10000; now_ms() < end; std::this_thread::sleep_for(std::chrono::milliseconds(50))) {
        j = state(i, id);
        if (j.is_object() && j["state"] == "ended") break;
      }
      INFO(j.dump());
      CHECK(j["state"] == "ended");
      CHECK(j["end_reason"] == "cancelled");
      CHECK(j["runs"].size() == (id == waiting ? 0u : 1u));
    }
  }
  CHECK(m.agents[0]->cli({"cancel", std::to_string(running)}).rc != 0);  // already ended
  for (auto id : ids) m.agents[0]->cli({"cancel", std::to_string(id)});
}

TEST_CASE("mesh: bad mesh keys are refused at start with the reason", "[mesh]") {
  std::string corrald = env_or("CORRALD", "build/agent/corrald");
  Result two = run({corrald, "--no-config", "--set", "mesh=m", "--set", "voters=127.0.0.1:1,127.0.0.1:2",
                    "--set", "listen=127.0.0.1:1"});
  CHECK(two.rc == 2);
  CHECK(two.err.find("voters: expected 3 or 5") != std::string::npos);
  Result both = run({corrald, "--no-config", "--standalone", "--set", "mesh=m"});
  CHECK(both.rc == 2);
  CHECK(both.err.find("--standalone runs no mesh") != std::string::npos);
  Result none = run({corrald, "--no-config"});
  CHECK(none.rc == 2);
  CHECK(none.err.find("configure a mesh") != std::string::npos);
}

TEST_CASE("mesh: a standalone corrald is a mesh of one", "[mesh]") {
  std::string why;
  if (!can_run(&why)) {
    CORRAL_SKIP(why);
    return;
  }
  Agent a("meshone");
  a.start();
  Result r = a.cli({"mesh", "--json"});
  REQUIRE(r.rc == 0);
  Json s = Json::parse(r.out);
  CHECK(s["state"] == "standalone");
  CHECK(s["members"].size() == 1);
  CHECK(s["coordinator"] == s["node"]);
  Result text = a.cli({"mesh"});
  CHECK(text.out.find("standalone") != std::string::npos);
}

TEST_CASE("mesh: a drained node starts nothing new; hold, release and qmove from any node, by owner or operator",
          "[mesh]") {
  SKIP_UNLESS_ROOT();
  constexpr int kOwner = 1, kOther = 2, kOperator = 65534;  // daemon, bin; nobody is an operator
  Mesh m(3);
  for (auto& a : m.agents)
    a->extra.insert(a->extra.end(), {"--set", "operators=nogroup", "--set", "queues=normal:1,express:2"});
  REQUIRE(m.elect() >= 0);
  auto json_of = [&](unsigned i, std::vector<std::string> args) {
    Result r = m.agents[i]->cli(std::move(args));
    return r.rc == 0 ? Json::parse(r.out, nullptr, false) : Json();
  };
  auto stat = [&](unsigned i, std::uint64_t id) { return json_of(i, {"stat", std::to_string(id), "--json"}); };
  // Member i's view of the job once its `key` is `value` (a follower applies a commit within a
  // heartbeat), or its last view after 15 s.
  auto await = [&](unsigned i, std::uint64_t id, const char* key, const char* value) {
    Json j;
    for (double end = now_ms() + 15000; now_ms() < end; std::this_thread::sleep_for(std::chrono::milliseconds(50)))
      if ((j = stat(i, id)).is_object() && j[key] == value) break;
    return j;
  };
  auto node_of = [&](const Json& nodes, const std::string& name) {
    for (const auto& n : nodes)
      if (n["name"] == name) return n;
    return Json();
  };

  // Drain is for operators; root drains n2 from n1, and every node sees it.
  Result no = m.agents[0]->cli({"drain", "n2", "--reason", "maint"}, kOther);
  CHECK(no.rc == 1);
  CHECK(no.err.find("only root or a member of group nogroup may drain a node") != std::string::npos);
  Result d = m.agents[0]->cli({"drain", "n2", "--reason", "maint"});
  INFO(d.err << m.agents[0]->log());
  REQUIRE(d.rc == 0);
  Json n2;
  for (double end = now_ms() + 10000; now_ms() < end && n2["state"] != "drained";
       std::this_thread::sleep_for(std::chrono::milliseconds(50)))
    n2 = node_of(json_of(2, {"nodes", "--json"}), "n2");
  CHECK(n2["state"] == "drained");
  CHECK(n2["reason"] == "maint");

  // Four jobs of a whole node each: two run, on n1 and n3; n2 starts nothing.
  std::vector<std::uint64_t> ids;
  for (unsigned k = 0; k < 4; ++k) {
    Result r = m.agents[k % 3]->submit({"-l", "walltime=600,ncpus=2", "--wrap", "sleep 300"}, kOwner);
    INFO(r.out << r.err);
    REQUIRE(r.rc == 0);
    ids.push_back(std::stoull(r.out));
  }
  std::vector<std::uint64_t> running, waiting;
  for (double end = now_ms() + 15000; now_ms() < end && running.size() < 2;
       std::this_thread::sleep_for(std::chrono::milliseconds(50))) {
    running.clear();
    waiting.clear();
    for (auto id : ids) (stat(0, id)["state"] == "running" ? running : waiting).push_back(id);
  }
  REQUIRE(running.size() == 2);
  REQUIRE(waiting.size() == 2);
  std::set<std::string> on;
  for (auto id : running) on.insert(stat(0, id)["runs"][0]["comment"].get<std::string>());
  CHECK(on == std::set<std::string>{"on n1", "on n3"});
  Json nodes = json_of(1, {"nodes", "--json"});
  CHECK(node_of(nodes, "n1")["jobs"] == 1);
  CHECK(node_of(nodes, "n1")["cores_used"] == 2);
  CHECK(node_of(nodes, "n2")["jobs"] == 0);
  CHECK(node_of(nodes, "n2")["cores_free"] == 2);

  // Another user can neither hold nor move the owner's job, through any node.
  for (unsigned i = 0; i < 3; ++i) {
    Result h = m.agents[i]->cli({"hold", std::to_string(waiting[0])}, kOther);
    CHECK(h.rc == 1);
    CHECK(h.err.find("belongs to daemon") != std::string::npos);
    Result q = m.agents[i]->cli({"qmove", "express", std::to_string(waiting[1])}, kOther);
    CHECK(q.rc == 1);
    CHECK(q.err.find("belongs to daemon") != std::string::npos);
  }
  // The owner holds one through n3, an operator moves the other through n2.
  Result h = m.agents[2]->cli({"hold", std::to_string(waiting[0])}, kOwner);
  INFO(h.err);
  REQUIRE(h.rc == 0);
  Result q = m.agents[1]->cli({"qmove", "express", std::to_string(waiting[1])}, kOperator);
  INFO(q.err);
  REQUIRE(q.rc == 0);
  CHECK(m.agents[0]->cli({"qmove", "nosuch", std::to_string(waiting[1])}).err.find("unknown queue 'nosuch'") !=
        std::string::npos);
  CHECK(m.agents[0]->cli({"qmove", "express", std::to_string(running[0])}).err.find("it is running") !=
        std::string::npos);
  CHECK(await(0, waiting[0], "wait_reason", "held")["wait_reason"] == "held");
  CHECK(await(0, waiting[1], "queue", "express")["queue"] == "express");

  // Undrained, n2 takes the job that is not held; the held one waits on.
  REQUIRE(m.agents[2]->cli({"undrain", "n2"}, kOperator).rc == 0);
  Json moved = await(1, waiting[1], "state", "running");
  CHECK(moved["state"] == "running");
  CHECK(moved["runs"][0]["comment"] == "on n2");
  // A node frees up: the held job stays pending while a later job starts there.
  REQUIRE(m.agents[0]->cli({"cancel", std::to_string(running[0])}).rc == 0);
  Result later = m.agents[0]->submit({"-l", "walltime=600,ncpus=2", "--wrap", "sleep 300"}, kOwner);
  REQUIRE(later.rc == 0);
  std::uint64_t later_id = std::stoull(later.out);
  CHECK(await(2, later_id, "state", "running")["state"] == "running");
  CHECK(stat(2, waiting[0])["state"] == "pending");
  // Released by the owner through n1, it runs once a node is free.
  CHECK(m.agents[0]->cli({"release", std::to_string(waiting[0])}, kOwner).rc == 0);
  REQUIRE(m.agents[0]->cli({"cancel", std::to_string(later_id)}).rc == 0);
  CHECK(await(1, waiting[0], "state", "running")["state"] == "running");
  for (auto id : ids) m.agents[0]->cli({"cancel", std::to_string(id)});
}
