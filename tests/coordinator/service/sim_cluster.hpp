// A cluster of RaftNodes on the deterministic SimNet, each with its own disk
// and mesh state machine; members crash (instance and state machine gone,
// disk kept) and restart (state rebuilt from the disk's snapshot and log).
// With a files directory each member's disk is also kept in files
// (raft_files.hpp) and a restart loads it from them: it must be the image
// the member had in memory.
#pragma once

#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "coordinator/service/raft_files.hpp"
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

  SimCluster(std::uint64_t seed, unsigned voters, RaftOptions opt = {}, MakeFn on_make = {},
             std::string files_dir = {})
      : net(seed), on_make_(std::move(on_make)), opt_(opt), files_dir_(std::move(files_dir)) {
    std::vector<Member> conf;
    for (unsigned i = 0; i < voters; ++i) conf.push_back(Member{i + 1, "n" + std::to_string(i + 1), Role::voter});
    slots.resize(voters);
    for (unsigned i = 0; i < voters; ++i) {
      slots[i].id = i + 1;
      if (!files_dir_.empty()) load_files(i);
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
    if (!files_dir_.empty()) load_files(i);
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
    if (!files_dir_.empty()) load_files(i);
    make(i);
    slots[i].node->start();
    return i;
  }

  SimNet net;
  std::deque<Slot> slots;  // a deque: members keep their address as others join
  // Why a member's files did not hold its image at a restart ("" while they did).
  std::string files_mismatch;

 private:
  void make(unsigned i) {
    Slot& s = slots[i];
    s.fsm = std::make_unique<MeshMachine>();
    s.node = std::make_unique<RaftNode>(s.id, "n" + std::to_string(s.id), net.env(s.id), s.disk,
                                        *s.fsm, opt_);
    if (on_make_) on_make_(i, s);
  }
  // The member's disk as its files hold it, compared with its image.
  void load_files(unsigned i) {
    files_.resize(slots.size());
    files_[i] = std::make_unique<RaftFiles>(files_dir_ + "/" + std::to_string(i + 1), false);
    RaftDisk loaded = files_[i]->load();
    std::string diff = disk_difference(slots[i].disk, loaded);
    if (!diff.empty() && files_mismatch.empty())
      files_mismatch = "member " + std::to_string(i + 1) + ": " + diff;
    slots[i].disk = std::move(loaded);
  }

  static std::string disk_difference(const RaftDisk& a, const RaftDisk& b) {
    if (a.term != b.term || a.vote != b.vote) return "term or vote";
    if (a.first_index != b.first_index) return "first index " + std::to_string(a.first_index) + " vs " +
                                                 std::to_string(b.first_index);
    if (a.entries.size() != b.entries.size()) return "entry count " + std::to_string(a.entries.size()) +
                                                      " vs " + std::to_string(b.entries.size());
    for (std::size_t k = 0; k < a.entries.size(); ++k)
      if (a.entries[k].term != b.entries[k].term || a.entries[k].type != b.entries[k].type ||
          a.entries[k].data != b.entries[k].data)
        return "entry " + std::to_string(a.first_index + k);
    if (a.snapshot.has_value() != b.snapshot.has_value()) return "snapshot presence";
    if (a.snapshot && (a.snapshot->index != b.snapshot->index || a.snapshot->term != b.snapshot->term ||
                       a.snapshot->conf_index != b.snapshot->conf_index ||
                       a.snapshot->conf.size() != b.snapshot->conf.size() ||
                       a.snapshot->data != b.snapshot->data))
      return "snapshot";
    return "";
  }

  MakeFn on_make_;
  RaftOptions opt_;
  std::string files_dir_;
  std::deque<std::unique_ptr<RaftFiles>> files_;
};

}  // namespace corral_test
