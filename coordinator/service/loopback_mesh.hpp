// A mesh of real libraft members on loopback ZeroMQ sockets, all driven by
// one ZmqLoop in the calling thread: what the loopback test and the failover
// benchmark start. kill() closes a member's raft and sockets at once, as a
// crashed process would.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "coordinator/service/mesh_machine.hpp"
#include "coordinator/service/raft_node.hpp"
#include "coordinator/service/zmq_env.hpp"

namespace corral::service {

class LoopbackMesh {
 public:
  struct Member {
    std::uint64_t id = 0;
    RaftDisk disk;
    std::unique_ptr<ZmqEnv> env;
    std::unique_ptr<MeshMachine> fsm;
    std::unique_ptr<RaftNode> node;
    bool up() const { return node != nullptr; }
  };

  // Binds `n` voters on 127.0.0.1 (free ports), bootstraps and starts them.
  explicit LoopbackMesh(unsigned n, const RaftOptions& opt = {}) {
    members.resize(n);
    std::vector<corral::service::Member> conf;
    for (unsigned i = 0; i < n; ++i) {
      members[i].id = i + 1;
      members[i].env = std::make_unique<ZmqEnv>(loop, "tcp://127.0.0.1:*");
      conf.push_back({i + 1, members[i].env->address(), Role::voter});
    }
    for (unsigned i = 0; i < n; ++i) {
      Member& m = members[i];
      m.fsm = std::make_unique<MeshMachine>();
      m.node = std::make_unique<RaftNode>(m.id, m.env->address(), *m.env, m.disk, *m.fsm, opt);
      m.node->bootstrap(conf);
      m.node->start();
    }
  }

  // Index of the live leader with the highest term, or -1.
  int leader() const {
    int best = -1;
    for (unsigned i = 0; i < members.size(); ++i) {
      if (!members[i].up() || !members[i].node->is_leader()) continue;
      if (best < 0 || members[i].node->term() > members[best].node->term()) best = static_cast<int>(i);
    }
    return best;
  }

  void kill(unsigned i) {
    members[i].node.reset();
    members[i].env.reset();
    members[i].fsm.reset();
  }

  ZmqLoop loop;
  std::vector<Member> members;
};

}  // namespace corral::service
