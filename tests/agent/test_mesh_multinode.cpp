// A job across nodes, end to end: three voters of 2 cores each
// (tests/agent/mesh_cluster.hpp; each corrald in its own network namespace
// where the machine allows it). `-l select=2:ncpus=2` fits no single node: the
// coordinator places it on two, both start their share in their own cgroups,
// the script on the first sees both hosts in CORRAL_NODEFILE (and PBS_NODEFILE,
// PE_HOSTFILE), and when the script ends the other node's share is stopped.
#include <chrono>
#include <filesystem>
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

// `corral stat ID --json` on agent i once `done` holds for it (null after `ms`).
template <class Done>
Json job_when(const Mesh& m, unsigned i, std::uint64_t id, int ms, Done done) {
  for (double end = now_ms() + ms; now_ms() < end; std::this_thread::sleep_for(std::chrono::milliseconds(50))) {
    Result r = m.agents[i]->cli({"stat", std::to_string(id), "--json"});
    Json j = r.rc == 0 ? Json::parse(r.out, nullptr, false) : Json();
    if (j.is_object() && done(j)) return j;
  }
  return Json();
}

// The processes in agent a's cgroups (its cgroup parent), each with its /proc/PID/cgroup.
std::map<std::string, std::string> procs_of(const Agent& a) {
  std::map<std::string, std::string> out;
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    std::string pid = e.path().filename();
    if (pid.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string cg = slurp("/proc/" + pid + "/cgroup");
    if (cg.find("/" + a.cgparent + "/") != std::string::npos) out[pid] = cg;
  }
  return out;
}

}  // namespace

TEST_CASE("mesh: a job larger than a node runs across two, each node's share in its cgroups", "[mesh]") {
  SKIP_UNLESS_ROOT();
  Mesh m(3);
  m.elect();
  const std::string out = m.agents[0]->dir + "/work";
  const std::string script = "cat \"$CORRAL_NODEFILE\" > " + out + "/nodes; cat \"$PE_HOSTFILE\" > " + out +
                             "/pe; [ \"$PBS_NODEFILE\" = \"$CORRAL_NODEFILE\" ] && touch " + out +
                             "/same; while [ ! -e " + out + "/go ]; do sleep 0.05; done";
  Result r = m.agents[0]->submit({"-l", "select=2:ncpus=2,walltime=120", "--wrap", script});
  INFO(r.out << r.err);
  REQUIRE(r.rc == 0);
  std::uint64_t id = std::stoull(r.out);

  // Running on two nodes, as the replicated run says.
  Json j = job_when(m, 1, id, 20000, [](const Json& x) { return x["state"] == "running"; });
  INFO(j.dump() << m.agents[0]->log() << m.agents[1]->log() << m.agents[2]->log());
  REQUIRE(j.is_object());
  REQUIRE(j["runs"].size() == 1);
  std::string on = j["runs"][0]["comment"];
  REQUIRE(on.rfind("on ", 0) == 0);
  std::string first = on.substr(3, on.find(',') - 3), other = on.substr(on.find(',') + 1);
  unsigned lead_i = 0, share_i = 0;
  for (unsigned i = 0; i < 3; ++i) {
    if (m.names[i] == first) lead_i = i;
    if (m.names[i] == other) share_i = i;
  }
  REQUIRE(lead_i != share_i);

  // The script's host files: two slots on each node, the script's node first.
  for (double end = now_ms() + 10000; now_ms() < end && !std::filesystem::exists(out + "/same");)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  CHECK(std::filesystem::exists(out + "/same"));
  CHECK(slurp(out + "/nodes") == first + "\n" + first + "\n" + other + "\n" + other + "\n");
  CHECK(slurp(out + "/pe") == first + " 2 normal@" + first + " UNDEFINED\n" + other + " 2 normal@" + other +
                                  " UNDEFINED\n");

  // Each node holds its share in its own cgroups for the job: the script on the first, the
  // share's holder on the other (cgroups named for the job under each agent's parent).
  std::map<std::string, std::string> lead_procs, share_procs;
  for (double end = now_ms() + 10000; now_ms() < end && (lead_procs.empty() || share_procs.empty());
       std::this_thread::sleep_for(std::chrono::milliseconds(50))) {
    lead_procs = procs_of(*m.agents[lead_i]);
    share_procs = procs_of(*m.agents[share_i]);
  }
  REQUIRE_FALSE(lead_procs.empty());
  REQUIRE_FALSE(share_procs.empty());
  for (const auto& [pid, cg] : share_procs) CHECK(cg.find("/" + m.agents[share_i]->cgparent + "/job." + std::to_string(id)) != std::string::npos);
  for (const auto& [pid, cg] : lead_procs) CHECK(cg.find("/" + m.agents[lead_i]->cgparent + "/job." + std::to_string(id)) != std::string::npos);
  CHECK(m.agents[share_i]->log().find("a share of 2 cpus here, the script runs on " + first) != std::string::npos);

  // The script ends: the job completes, and the other node's share is stopped and its cgroups go.
  { std::ofstream(out + "/go").put('\n'); }
  j = job_when(m, 1, id, 20000, [](const Json& x) { return x["state"] == "ended"; });
  REQUIRE(j.is_object());
  CHECK(j["end_reason"] == "completed");
  CHECK(leftovers(*m.agents[share_i], {}, 15000) == "");
  CHECK(leftovers(*m.agents[lead_i], {}, 15000) == "");
}
