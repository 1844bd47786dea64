// Topology: discovery on this machine, XML export/load round trip, recorded and declared
// topologies, NUMA-local core choice, CPU list text.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <set>

#include "agent/node/topology.hpp"
#include "helpers.hpp"

using namespace corral::node;

static const std::string kTopo = NODE_TOPOLOGIES;

TEST_CASE("discover sees this machine's CPUs, kernel memory and jobfs space", "[node][topology]") {
  nodetest::TempDir dir;
  Topology t = discover(dir.path + "/jobfs");
  CHECK(t.source == "hwloc");
  CHECK(t.real());
  REQUIRE(!t.cores.empty());
  long online = sysconf(_SC_NPROCESSORS_ONLN);
  CHECK(t.pus == online);
  int pus = 0;
  for (auto& c : t.cores) pus += static_cast<int>(c.pus.size());
  CHECK(pus == t.pus);
  CHECK(t.packages >= 1);
  CHECK(t.numa_nodes >= 1);
  // Memory comes from /proc/meminfo, not hwloc's NUMA total.
  std::ifstream mi("/proc/meminfo");
  std::string key;
  long kb = 0;
  mi >> key >> kb;
  REQUIRE(key == "MemTotal:");
  CHECK(t.mem_mb == kb / 1024);
  CHECK(t.jobfs_mb > 0);
  CHECK(!t.caches.empty());
  CHECK(describe(t).find(std::to_string(t.cores.size()) + " cores") != std::string::npos);
}

TEST_CASE("export_xml round-trips through load_xml", "[node][topology]") {
  nodetest::TempDir dir;
  std::string xml = export_xml();
  REQUIRE(xml.find("<topology") != std::string::npos);
  std::string path = dir.path + "/me.xml";
  std::ofstream(path) << xml;
  Topology real = discover("");
  Topology rec = load_xml(path, 1234);
  CHECK(rec.source == "xml:" + path);
  CHECK(!rec.real());
  CHECK(rec.mem_mb == 1234);
  REQUIRE(rec.cores.size() == real.cores.size());
  for (std::size_t i = 0; i < rec.cores.size(); ++i) {
    CHECK(rec.cores[i].pus == real.cores[i].pus);
    CHECK(rec.cores[i].numa == real.cores[i].numa);
  }
  CHECK(rec.caches == real.caches);
}

TEST_CASE("recorded topologies load with their shape", "[node][topology]") {
  SECTION("this machine, as exported") {
    Topology t = load_xml(kTopo + "/thisnode-2core.xml");
    CHECK(t.cores.size() == 2);
    CHECK(t.hostname == "vm");
  }
  SECTION("2 sockets x 16 cores, 2 threads per core, one NUMA node per socket") {
    Topology t = load_xml(kTopo + "/2socket-2x16.xml");
    CHECK(t.packages == 2);
    CHECK(t.numa_nodes == 2);
    CHECK(t.cores.size() == 32);
    CHECK(t.pus == 64);
    CHECK(t.mem_mb == 256 * 1024);
    CHECK(t.cores[0].pus.size() == 2);
    CHECK(t.cores[0].numa == 0);
    CHECK(t.cores[31].numa == 1);
    CHECK(t.cores[31].package == 1);
    CHECK(std::find(t.caches.begin(), t.caches.end(), "L3 32MiB x2") != t.caches.end());
  }
  SECTION("4 NUMA nodes over 2 sockets") {
    Topology t = load_xml(kTopo + "/4numa-2x16.xml");
    CHECK(t.packages == 2);
    CHECK(t.numa_nodes == 4);
    CHECK(t.cores.size() == 32);
    CHECK(t.numa_ids() == std::vector<int>{0, 1, 2, 3});
    for (int n = 0; n < 4; ++n) CHECK(t.cores_of_numa(n).size() == 8);
  }
}

TEST_CASE("bad topology input gives a clear error", "[node][topology]") {
  nodetest::TempDir dir;
  CHECK_THROWS_WITH(load_xml(dir.path + "/missing.xml"), Catch::Contains("missing.xml"));
  std::string junk = dir.path + "/junk.xml";
  std::ofstream(junk) << "this is not xml";
  CHECK_THROWS_WITH(load_xml(junk), Catch::Contains("junk.xml"));
  CHECK_THROWS_WITH(declared(0, 4, 100), Catch::Contains(">= 1"));
  CHECK_THROWS_WITH(declared(1, 6, 100, 4), Catch::Contains("evenly"));
  CHECK_THROWS(parse_cpu_list("1-x"));
  CHECK_THROWS(parse_cpu_list("5-2"));
}

TEST_CASE("declared topology numbers cores, NUMA nodes and SMT threads", "[node][topology]") {
  Topology t = declared(2, 8, 65536, 2, 2);
  CHECK(t.source == "declared");
  CHECK(t.cores.size() == 16);
  CHECK(t.pus == 32);
  CHECK(t.numa_nodes == 4);
  CHECK(t.cores[5].numa == 1);
  CHECK(t.cores[5].package == 0);
  CHECK(t.cores[5].pus == std::vector<int>{5, 21});
  CHECK(t.cores[12].numa == 3);
  CHECK(t.cores[12].package == 1);
}

TEST_CASE("pick_cores stays NUMA-local and best-fits", "[node][topology]") {
  Topology t = load_xml(kTopo + "/4numa-2x16.xml");
  // Empty node: 4 cores come from one NUMA node.
  auto a = pick_cores(t, {}, 4);
  REQUIRE(a.size() == 4);
  CHECK(numas_of(t, a).size() == 1);
  // NUMA 0 has 2 free cores left, the others 8: a 2-core job fills NUMA 0's hole (best fit).
  std::vector<int> busy = {0, 1, 2, 3, 4, 5};
  auto b = pick_cores(t, busy, 2);
  CHECK(b == std::vector<int>{6, 7});
  // 10 cores: no NUMA node has them; one package (2 NUMA nodes) does.
  auto c = pick_cores(t, {}, 10);
  REQUIRE(c.size() == 10);
  std::set<int> pk;
  for (int i : c) pk.insert(t.cores[static_cast<std::size_t>(i)].package);
  CHECK(pk.size() == 1);
  // 20 cores on a 2-package node with 16 per package: spans packages but only 3 NUMA nodes.
  auto d = pick_cores(t, {}, 20);
  REQUIRE(d.size() == 20);
  CHECK(numas_of(t, d).size() == 3);
  // Not enough free cores: nothing.
  CHECK(pick_cores(t, {}, 33).empty());
  // Whole cores: PUs of a 2-thread core come together.
  Topology s = load_xml(kTopo + "/2socket-2x16.xml");
  auto e = pick_cores(s, {}, 2);
  CHECK(pus_of(s, e).size() == 4);
  CHECK_THROWS_WITH(pus_of(s, {40}), Catch::Contains("not on this node"));
}

TEST_CASE("CPU list text", "[node][topology]") {
  CHECK(to_cpu_list({3, 0, 1, 2, 8, 10, 11}) == "0-3,8,10-11");
  CHECK(to_cpu_list({}) == "");
  CHECK(parse_cpu_list("0-3,8,10-11\n") == std::vector<int>{0, 1, 2, 3, 8, 10, 11});
  CHECK(parse_cpu_list(to_cpu_list({5, 7, 6})) == std::vector<int>{5, 6, 7});
}
