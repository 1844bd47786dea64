// corrald in a mesh, end to end: three real corrald processes, each in its own
// network namespace (tests/mesh_net.hpp; 127.0.0.1 ports where namespaces are
// unavailable, and the test says which), elect one coordinator, elect another
// within seconds of a SIGKILL to it, and the killed one rejoins from its raft
// files as a follower with the log.
#include <netinet/in.h>
#include <sys/socket.h>

#include <chrono>
#include <memory>

#include <nlohmann/json.hpp>

#include "harness.hpp"
#include "tests/mesh_net.hpp"

using namespace harness;
using Json = nlohmann::json;

namespace {

// A port on 127.0.0.1 nobody listens on right now.
int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0)
    throw std::runtime_error("no free port on 127.0.0.1");
  ::close(fd);
  return ntohs(a.sin_port);
}

double now_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct Mesh {
  std::vector<std::unique_ptr<Agent>> agents;
  std::vector<std::string> names;

  // net: each member in its namespace; null: on loopback ports.
  Mesh(unsigned n, const mesh_net::Net* net) {
    std::vector<std::string> listen;
    std::string voters;
    for (unsigned i = 0; i < n; ++i) {
      listen.push_back(net ? net->address(static_cast<int>(i)) + ":7470" : "127.0.0.1:" + std::to_string(free_port()));
      voters += (i ? "," : "") + listen.back();
    }
    for (unsigned i = 0; i < n; ++i) {
      names.push_back("n" + std::to_string(i + 1));
      auto a = std::make_unique<Agent>("mesh" + std::to_string(i + 1),
                                       std::vector<std::string>{"--declare-cores", "2", "--set", "mesh=test",
                                                                "--set", "voters=" + voters, "--set",
                                                                "node_name=" + names.back(), "--set",
                                                                "listen=" + listen[i]});
      a->standalone = false;
      if (net) a->wrap = net->exec_prefix(static_cast<int>(i));
      agents.push_back(std::move(a));
    }
  }

  // `corral mesh --json` of member i (null when it does not answer).
  Json status(unsigned i) const {
    Result r = agents[i]->cli({"mesh", "--json"});
    if (r.rc != 0) return Json();
    return Json::parse(r.out, nullptr, false);
  }

  // Waits until every member in `up` names the same coordinator, which says it leads, in a
  // term above `above`; returns its index, or -1 after `ms`.
  int agreed(const std::vector<unsigned>& up, std::uint64_t above, int ms) const {
    for (double end = now_ms() + ms; now_ms() < end;) {
      std::string who;
      bool same = true;
      for (unsigned i : up) {
        Json s = status(i);
        if (s.is_discarded() || s.is_null() || s["coordinator"].get<std::string>().empty() ||
            s["term"].get<std::uint64_t>() <= above || (!who.empty() && s["coordinator"] != who)) {
          same = false;
          break;
        }
        who = s["coordinator"].get<std::string>();
      }
      if (same && !who.empty()) {
        for (unsigned i : up)
          if (names[i] == who && status(i)["state"] == "leader") return static_cast<int>(i);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return -1;
  }
};

}  // namespace

TEST_CASE("mesh: three corrald elect a coordinator, re-elect after SIGKILL, the killed one rejoins",
          "[mesh]") {
  std::string why;
  if (!can_run(&why)) {
    CORRAL_SKIP(why);
    return;
  }
  // Its own network when the machine allows it (checked to route nowhere else before any agent starts).
  std::unique_ptr<mesh_net::Net> net;
  const std::string no_netns = mesh_net::unavailable();
  if (no_netns.empty()) net = std::make_unique<mesh_net::Net>(3);
  WARN("network: " << (net ? "namespaces (three corrald, each in its own, on " + net->subnet() + ")"
                           : "loopback (three corrald on 127.0.0.1 ports; namespaces: " + no_netns + ")"));
  Mesh m(3, net.get());
  for (auto& a : m.agents) a->start();
  int l = m.agreed({0, 1, 2}, 0, 15000);
  INFO(m.agents[0]->log() << m.agents[1]->log() << m.agents[2]->log());
  REQUIRE(l >= 0);
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
}

TEST_CASE("mesh: bad mesh keys are refused at start with the reason", "[mesh]") {
  std::string corrald = env_or("CORRALD", "build/agent/corrald");
  Result two = run({corrald, "--no-config", "--set", "mesh=m", "--set", "voters=127.0.0.1:1,127.0.0.1:2",
                    "--set", "listen=127.0.0.1:1"});
  CHECK(two.rc == 2);
  CHECK(two.err.find("voters: expected 3 or 5") != std::string::npos);
  Result stranger = run({corrald, "--no-config", "--set", "mesh=m", "--set",
                         "voters=127.0.0.1:1,127.0.0.1:2,127.0.0.1:3", "--set", "listen=127.0.0.1:4"});
  CHECK(stranger.rc == 2);
  CHECK(stranger.err.find("listen 127.0.0.1:4 is not one of voters") != std::string::npos);
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
