// A mesh of real libraft members on loopback ZeroMQ sockets, all driven by
// one ZmqLoop in the calling thread: what the loopback test and the failover
// benchmark start. kill() closes a member's raft and sockets at once, as a
// crashed process would.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "coordinator/service/replica.hpp"
#include "coordinator/service/zmq_env.hpp"

namespace corral::service {

class LoopbackMesh {
 public:
  // Binds `n` voters on 127.0.0.1 (free ports), bootstraps and starts them.
  explicit LoopbackMesh(unsigned n, const RaftOptions& opt = {}) {
    members.resize(n);
    std::vector<Member> conf;
    for (unsigned i = 0; i < n; ++i) {
      members[i].id = i + 1;
      envs.push_back(std::make_unique<ZmqEnv>(loop, "tcp://127.0.0.1:*"));
      conf.push_back({i + 1, envs[i]->address(), Role::voter});
    }
    for (unsigned i = 0; i < n; ++i) {
      Replica& m = members[i];
      m.fsm = std::make_unique<MeshMachine>();
      m.node = std::make_unique<RaftNode>(m.id, envs[i]->address(), *envs[i], m.disk, *m.fsm, opt);
      m.node->bootstrap(conf);
      m.node->start();
    }
  }

  // Index of the live leader with the highest term, or -1.
  int leader() const { return leader_of(members); }

  void kill(unsigned i) {
    members[i].node.reset();
    envs[i].reset();
    members[i].fsm.reset();
  }

  ZmqLoop loop;
  std::vector<std::unique_ptr<ZmqEnv>> envs;  // before members: a node goes before its env
  std::vector<Replica> members;
};

}  // namespace corral::service
