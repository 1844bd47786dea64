// A mesh of real corrald processes for the end-to-end tests: each in a network
// namespace of its own (tests/mesh_net.hpp) when the machine allows it, else on
// 127.0.0.1 ports; keys made with `corral keygen` as an admin would.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness.hpp"
#include "tests/free_port.hpp"
#include "tests/mesh_net.hpp"

namespace mesh_cluster {

using namespace harness;
using Json = nlohmann::json;

using corral_test::free_port;
using corral_test::free_port_pair;

inline double now_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// The mesh's keys: every member's in the allowed file; or the last member an
// impostor at its address (its own key, which the others do not know); or the
// last member without CURVE (mesh_insecure); or no member with any.
enum class Keys { all, last_wrong, last_none, none };

struct Mesh {
  std::unique_ptr<mesh_net::Net> own_net;  // first: it outlives the agents in it
  std::string no_netns;                    // why there is none
  std::vector<std::unique_ptr<Agent>> agents;
  std::vector<std::string> names;
  std::vector<std::string> listen;         // host:port of each member
  std::vector<std::string> public_keys;    // each member's own, as corral keygen printed it

  // Each member in a namespace of its own network when the machine allows it, else on
  // loopback ports. `spare` namespaces more, after the members', hold no corrald. The
  // first `n` agents are the voters; `members` more do not vote and declare 4 cores
  // (the voters 2), so a job of 4 cores fits only on them.
  explicit Mesh(unsigned n, Keys keys = Keys::all, unsigned spare = 0, unsigned members = 0)
      : no_netns(mesh_net::unavailable()) {
    if (no_netns.empty()) own_net = std::make_unique<mesh_net::Net>(static_cast<int>(n + members + spare));
    setup(n, own_net.get(), keys, members);
  }

  // `corral keygen --out DIR`: the public key it printed.
  static std::string keygen(const Agent& a, const std::string& dir) {
    Result r = run({a.corral(), "keygen", "--out", dir});
    if (r.rc != 0 || r.out.size() < 40) throw std::runtime_error("corral keygen: " + r.err);
    return r.out.substr(0, 40);
  }

  static void write_file(const std::string& path, const std::string& text) {
    std::ofstream out(path);
    out << text;
    if (!out.flush()) throw std::runtime_error("cannot write " + path);
  }

  // Each member's key pair, the allowed file every member shares, and the key options.
  void add_keys(Keys keys) {
    const std::size_t n = agents.size();
    if (keys == Keys::none) {
      for (auto& a : agents) a->extra.insert(a->extra.end(), {"--set", "mesh_insecure=yes"});
      return;
    }
    std::string allowed = "# the mesh's members\n";
    for (std::size_t i = 0; i < n; ++i) {
      public_keys.push_back(keygen(*agents[i], agents[i]->dir + "/keys"));
      allowed += public_keys[i] + " " + listen[i] + "  # " + names[i] + "\n";
    }
    for (std::size_t i = 0; i < n; ++i) {
      Agent& a = *agents[i];
      const bool last = i + 1 == n;
      if (last && keys == Keys::last_none) {
        a.extra.insert(a.extra.end(), {"--set", "mesh_insecure=yes"});
        continue;
      }
      std::string mine = allowed;
      if (last && keys == Keys::last_wrong) {  // a key of its own in its own allowed file
        std::string other = keygen(a, a.dir + "/other");
        a.extra.insert(a.extra.end(), {"--set", "mesh_key=" + a.dir + "/other/mesh.key"});
        mine.replace(mine.find(public_keys[i]), 40, other);
        public_keys[i] = other;
      } else {
        a.extra.insert(a.extra.end(), {"--set", "mesh_key=" + a.dir + "/keys/mesh.key"});
      }
      write_file(a.dir + "/allowed", mine);
      a.extra.insert(a.extra.end(), {"--set", "mesh_allowed_keys=" + a.dir + "/allowed"});
    }
  }

  void setup(unsigned n, const mesh_net::Net* net, Keys keys, unsigned members = 0) {
    std::string voters;
    for (unsigned i = 0; i < n + members; ++i) {
      listen.push_back(net ? net->address(static_cast<int>(i)) + ":7470" : "127.0.0.1:" + std::to_string(free_port_pair()));
      if (i < n) voters += (i ? "," : "") + listen.back();
    }
    for (unsigned i = 0; i < n + members; ++i) {
      names.push_back("n" + std::to_string(i + 1));
      auto a = std::make_unique<Agent>("mesh" + std::to_string(i + 1),
                                       std::vector<std::string>{"--declare-cores", i < n ? "2" : "4", "--set", "mesh=test",
                                                                "--set", "voters=" + voters, "--set",
                                                                "node_name=" + names.back(), "--set",
                                                                "listen=" + listen[i]});
      a->standalone = false;
      if (net) a->wrap = net->exec_prefix(static_cast<int>(i));
      agents.push_back(std::move(a));
    }
    add_keys(keys);
  }

  // Starts every member; waits until they (the first `agreeing`, when not 0) agree on a
  // coordinator, whose index it returns.
  int elect(unsigned agreeing = 0) {
    WARN("network: " << (own_net ? "namespaces (each corrald in its own, on " + own_net->subnet() + ")"
                                 : "loopback (corrald on 127.0.0.1 ports; namespaces: " + no_netns + ")"));
    for (auto& a : agents) a->start();
    std::vector<unsigned> all;
    for (unsigned i = 0; i < (agreeing ? agreeing : agents.size()); ++i) all.push_back(i);
    int l = agreed(all, 0, 15000);
    INFO(agents[0]->log() << agents[1]->log() << agents[2]->log());
    REQUIRE(l >= 0);
    return l;
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

// The ids `corral stat --json` of member i lists (empty when it does not answer).
inline std::set<std::uint64_t> mesh_ids(const Mesh& m, unsigned i) {
  std::set<std::uint64_t> ids;
  Result r = m.agents[i]->cli({"stat", "--json"});
  if (r.rc != 0) return ids;
  Json all = Json::parse(r.out, nullptr, false);
  if (!all.is_array()) return ids;
  for (const Json& j : all) ids.insert(j["id"].get<std::uint64_t>());
  return ids;
}

// Waits until member i lists every id of `want`.
inline bool lists(const Mesh& m, unsigned i, const std::set<std::uint64_t>& want, int ms) {
  for (double end = now_ms() + ms; now_ms() < end; std::this_thread::sleep_for(std::chrono::milliseconds(20))) {
    std::set<std::uint64_t> have = mesh_ids(m, i);
    if (std::includes(have.begin(), have.end(), want.begin(), want.end())) return true;
  }
  return false;
}

// `corral stat --json` of member i (an empty array when it does not answer).
inline Json mesh_jobs(const Mesh& m, unsigned i) {
  Result r = m.agents[i]->cli({"stat", "--json"});
  Json all = r.rc == 0 ? Json::parse(r.out, nullptr, false) : Json::array();
  return all.is_array() ? all : Json::array();
}

// Waits until member i lists `n` jobs, every one ended.
inline bool all_ended(const Mesh& m, unsigned i, std::size_t n, int ms) {
  for (double end = now_ms() + ms; now_ms() < end; std::this_thread::sleep_for(std::chrono::milliseconds(50))) {
    Json all = mesh_jobs(m, i);
    bool done = all.size() == n;
    for (const Json& j : all) done = done && j["state"] == "ended";
    if (done) return true;
  }
  return false;
}

// How many times each job started on member i, from its log (appended across restarts).
inline std::map<std::uint64_t, int> starts_in_log(const Mesh& m, unsigned i) {
  std::map<std::uint64_t, int> n;
  std::istringstream log(m.agents[i]->log());
  for (std::string line; std::getline(log, line);) {
    std::size_t at = line.find("corrald: job ");
    if (at == std::string::npos || line.find(" started on cores ") == std::string::npos) continue;
    ++n[std::stoull(line.substr(at + 13))];
  }
  return n;
}

// The processes in agent a's cgroups for job `id` (its share of the job on that node).
inline std::vector<std::string> job_pids(const Agent& a, std::uint64_t id) {
  std::vector<std::string> out;
  const std::string want = "/" + a.cgparent + "/job." + std::to_string(id);
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/proc", ec)) {
    std::string pid = e.path().filename();
    if (pid.find_first_not_of("0123456789") != std::string::npos) continue;
    if (slurp("/proc/" + pid + "/cgroup").find(want) != std::string::npos) out.push_back(pid);
  }
  return out;
}

}  // namespace mesh_cluster
