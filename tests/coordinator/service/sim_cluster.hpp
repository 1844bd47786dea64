// A cluster of RaftNodes on the deterministic SimNet, each with its own disk
// and mesh state machine; members crash (instance and state machine gone,
// disk kept) and restart (state rebuilt from the disk's snapshot and log).
#pragma once

#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "coordinator/service/replica.hpp"
#include "coordinator/service/sim_env.hpp"

namespace corral_test {

using namespace corral::service;

class SimCluster {
 public:
  using Slot = Replica;

  // `on_make` runs for every new instance of a member (first start and each
  // restart), before it starts: tests attach observers there.
  using MakeFn = std::function<void(unsigned, Slot&)>;

  SimCluster(std::uint64_t seed, unsigned voters, RaftOptions opt = {}, MakeFn on_make = {})
      : net(seed), on_make_(std::move(on_make)), opt_(opt) {
    std::vector<Member> conf;
    for (unsigned i = 0; i < voters; ++i) conf.push_back(Member{i + 1, "n" + std::to_string(i + 1), Role::voter});
    slots.resize(voters);
    for (unsigned i = 0; i < voters; ++i) {
      slots[i].id = i + 1;
      make(i);
      slots[i].node->bootstrap(conf);
      slots[i].node->start();
    }
  }

  void crash(unsigned i) {
    slots[i].node.reset();
    slots[i].fsm.reset();
  }
  int restart(unsigned i) {
    make(i);
    return slots[i].node->start();
  }

  // Index of the member that is up and leads with the highest term, or -1.
  int leader() const { return leader_of(slots); }

  // A member that is in no configuration yet (an agent joining the mesh):
  // started on an empty disk, it waits for a leader to add it. Returns its index.
  unsigned join() {
    slots.emplace_back();
    unsigned i = static_cast<unsigned>(slots.size() - 1);
    slots[i].id = i + 1;
    make(i);
    slots[i].node->start();
    return i;
  }

  SimNet net;
  std::deque<Slot> slots;  // a deque: members keep their address as others join

 private:
  void make(unsigned i) {
    Slot& s = slots[i];
    s.fsm = std::make_unique<MeshMachine>();
    s.node = std::make_unique<RaftNode>(s.id, "n" + std::to_string(s.id), net.env(s.id), s.disk,
                                        *s.fsm, opt_);
    if (on_make_) on_make_(i, s);
  }
  MakeFn on_make_;
  RaftOptions opt_;
};

}  // namespace corral_test
