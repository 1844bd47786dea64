// The mesh tests' private network (tests/mesh_net.hpp): nodes reach each other on the bridge and
// nothing else, a namespace with a default route is refused, a cut link partitions its node, and
// nothing is left behind, also when a test throws.
#include <catch2/catch.hpp>

#include "tests/mesh_net.hpp"
#include "tests/skip.hpp"

namespace {

// Our namespaces (this process's prefix) that exist now.
std::vector<std::string> ours() {
  std::vector<std::string> out;
  const std::string mine = mesh_net::kPrefix + std::to_string(::getpid()) + "-";
  for (const std::string& l : mesh_net::lines(mesh_net::sh("ip netns list").out))
    if (l.rfind(mine, 0) == 0) out.push_back(l.substr(0, l.find(' ')));
  return out;
}

bool pings(const mesh_net::Net& net, int from, int to) {
  return mesh_net::sh("ip netns exec " + net.ns(from) + " ping -c 1 -W 1 " + net.address(to)).rc == 0;
}

}  // namespace

TEST_CASE("mesh_net: namespaces on one bridge, no way out, a link cut and restored", "[mesh_net]") {
  if (std::string why = mesh_net::unavailable(); !why.empty()) {
    CORRAL_SKIP("network namespaces: " + why + " (the mesh tests run on loopback)");
    return;
  }
  if (mesh_net::sh("command -v ping").rc != 0) {
    CORRAL_SKIP("no ping here to probe the links");
    return;
  }
  std::string left;  // the process left running in a namespace
  {
    mesh_net::Net net(3);
    REQUIRE(ours().size() == 4);  // three nodes and the hub
    for (int i = 0; i < 3; ++i) CHECK(net.check_routes(i).empty());
    for (int i = 0; i < 3; ++i) {
      CHECK(mesh_net::sh("ip -n " + net.ns(i) + " route show default").out.empty());
      CHECK(mesh_net::sh("ip netns exec " + net.ns(i) + " ip route get 192.0.2.1").rc != 0);  // unreachable
    }
    CHECK(pings(net, 0, 1));
    CHECK(pings(net, 2, 0));
    net.cut(1);
    CHECK_FALSE(pings(net, 0, 1));
    CHECK(pings(net, 0, 2));
    net.restore(1);
    CHECK(pings(net, 0, 1));

    // A default route (a way out) is refused, with the route named.
    REQUIRE(mesh_net::sh("ip -n " + net.ns(2) + " route add default via " + net.address(0)).rc == 0);
    const std::string why = net.check_routes(2);
    CHECK(why.find("routes beyond " + net.subnet() + ": 'default via " + net.address(0)) != std::string::npos);
    CHECK(why.find("refusing to run") != std::string::npos);
    // A process left running in a namespace goes with it.
    REQUIRE(mesh_net::sh("ip netns exec " + net.ns(0) + " sh -c 'sleep 600 >/dev/null 2>&1 &'").rc == 0);
    const auto pids = mesh_net::lines(mesh_net::sh("ip netns pids " + net.ns(0)).out);
    REQUIRE(pids.size() == 1);
    left = "/proc/" + pids[0];
  }
  CHECK(ours().empty());
  // Gone, or a zombie its new parent has not reaped yet.
  const std::string stat = mesh_net::sh("cat " + left + "/stat 2>/dev/null").out;
  INFO(stat);
  CHECK((stat.empty() || stat.find(") Z ") != std::string::npos));
}

TEST_CASE("mesh_net: a test that throws leaves no namespace behind", "[mesh_net]") {
  if (std::string why = mesh_net::unavailable(); !why.empty()) {
    CORRAL_SKIP("network namespaces: " + why);
    return;
  }
  try {
    mesh_net::Net net(2);
    REQUIRE(ours().size() == 3);
    throw std::runtime_error("the test failed");
  } catch (const std::runtime_error& e) {
    CHECK(std::string(e.what()) == "the test failed");
  }
  CHECK(ours().empty());

  // Leftovers of a run that crashed (its pid gone) are removed by the next Net.
  const std::string stale = std::string(mesh_net::kPrefix) + "999999999-0";
  REQUIRE(mesh_net::sh("ip netns add " + stale).rc == 0);
  { mesh_net::Net net(1); }
  CHECK(mesh_net::sh("ip netns list").out.find(stale) == std::string::npos);
}
