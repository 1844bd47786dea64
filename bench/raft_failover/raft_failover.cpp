// Raft-level failover on loopback: `raft_failover [--trials N] [--voters V]`.
// Each trial starts V real libraft members (ZeroMQ on 127.0.0.1, election
// 300 ms / heartbeat 50 ms / pre-vote), waits for a leader, commits 20
// entries, kills the leader (raft and sockets closed at once) and times the
// survivors until a new leader has committed a barrier: the earliest moment a
// new coordinator could decide. Prints one JSON object.
//
// This is the consensus layer alone; bench/failover (the mesh's benchmark,
// kill -9 of a whole coordinator agent to its first decision) is still to come.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "coordinator/service/loopback_mesh.hpp"

using namespace corral::service;

namespace {

double pct(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[static_cast<std::size_t>(p * static_cast<double>(v.size() - 1) + 0.5)];
}

// One trial: {first election ms, failover ms}; negative when it timed out.
std::pair<double, double> trial(unsigned voters) {
  LoopbackMesh m(voters);
  std::uint64_t t0 = m.loop.now_ms();
  if (!m.loop.run_until([&] { return m.leader() >= 0; }, 10000)) return {-1, -1};
  double elected = static_cast<double>(m.loop.now_ms() - t0);
  unsigned l = static_cast<unsigned>(m.leader());
  int done = 0;
  for (int i = 0; i < 20; ++i)
    m.members[l].node->propose("x", [&](const Proposed&) { ++done; });
  if (!m.loop.run_until([&] { return done == 20; }, 10000)) return {elected, -1};
  std::uint64_t killed = m.loop.now_ms();
  m.kill(l);
  bool barrier = false;
  int asked = -1;
  bool ok = m.loop.run_until(
      [&] {
        int nl = m.leader();
        if (nl >= 0 && nl != asked) {
          asked = nl;
          m.members[nl].node->barrier([&](Status s) { barrier = s == Status::ok; });
        }
        return barrier;
      },
      10000);
  return {elected, ok ? static_cast<double>(m.loop.now_ms() - killed) : -1};
}

}  // namespace

int main(int argc, char** argv) {
  unsigned trials = 20, voters = 3;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--trials") trials = static_cast<unsigned>(std::atoi(argv[i + 1]));
    else if (a == "--voters") voters = static_cast<unsigned>(std::atoi(argv[i + 1]));
    else {
      std::fprintf(stderr, "raft_failover: unknown option %s\n", a.c_str());
      return 2;
    }
  }
  if (trials == 0 || voters < 3) {
    std::fprintf(stderr, "raft_failover: need --trials >= 1 and --voters >= 3\n");
    return 2;
  }
  std::vector<double> elect, fail;
  unsigned timeouts = 0;
  for (unsigned t = 0; t < trials; ++t) {
    auto [e, f] = trial(voters);
    if (e < 0 || f < 0) {
      ++timeouts;
      continue;
    }
    elect.push_back(e);
    fail.push_back(f);
  }
  if (fail.empty()) {
    std::printf("{\"trials\": %u, \"timeouts\": %u}\n", trials, timeouts);
    return 1;
  }
  std::printf(
      "{\"trials\": %u, \"voters\": %u, \"timeouts\": %u, \"election_p50_ms\": %.0f, "
      "\"failover_p50_ms\": %.0f, \"failover_p90_ms\": %.0f, \"failover_max_ms\": %.0f}\n",
      trials, voters, timeouts, pct(elect, 0.5), pct(fail, 0.5), pct(fail, 0.9),
      *std::max_element(fail.begin(), fail.end()));
  return timeouts == 0 ? 0 : 1;
}
