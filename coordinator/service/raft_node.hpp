// Consensus implemented with Debian's libraft (canonical raft 0.15) over an
// Env: the real algorithm, driven by the simulation in tests and by the
// ZeroMQ loop in the agent.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "coordinator/service/consensus.hpp"
#include "coordinator/service/env.hpp"
#include "coordinator/service/raft_c.hpp"
#include "coordinator/service/raft_disk.hpp"
#include "coordinator/service/raft_io.hpp"

namespace corral::service {

// libraft's defaults re-elect in about 3 s; these re-elect well under 1 s on
// loopback, pre-vote keeps a returning partitioned member from deposing a
// working leader.
struct RaftOptions {
  unsigned election_ms = 300;
  unsigned heartbeat_ms = 50;
  bool pre_vote = true;
  // Entries between snapshots: at least this many, and more as the state
  // grows (one entry per 256 bytes of the last snapshot), so snapshots cost a bounded share of each entry's work.
  unsigned snapshot_threshold = 1024;
  unsigned snapshot_trailing = 128;    // entries kept behind a snapshot
};

class RaftNode final : public Consensus {
 public:
  // `env`, `disk` and `sm` outlive the node. The node starts closed: call
  // bootstrap() (a new mesh's first voters only) and start().
  RaftNode(std::uint64_t id, std::string address, Env& env, RaftDisk& disk, StateMachine& sm,
           const RaftOptions& opt = {});
  ~RaftNode() override;
  RaftNode(const RaftNode&) = delete;
  RaftNode& operator=(const RaftNode&) = delete;

  // Writes the first configuration to an empty disk. Returns 0 or a RAFT_
  // error code (RAFT_CANTBOOTSTRAP when the disk already holds a log).
  int bootstrap(const std::vector<Member>& members);
  // Loads the disk (snapshot, then log) and joins. Returns 0 or a RAFT_ code.
  int start();
  std::string error() const;

  void propose(std::string entry, ProposeCb cb) override;
  void barrier(DoneCb cb) override;
  void on_leadership(LeadershipCb cb) override { leadership_cb_ = std::move(cb); }
  bool is_leader() const override;
  // leader | follower | candidate | unavailable (not started, or closing).
  std::string_view state_name() const;
  std::uint64_t id() const override { return id_; }
  std::uint64_t leader_id() const override;
  std::uint64_t term() const override;
  std::uint64_t commit_index() const override;
  std::uint64_t last_applied() const override;
  std::vector<Member> members() const override;
  void add(const Member& m, DoneCb cb) override;
  void assign(std::uint64_t id, Role role, DoneCb cb) override;
  void remove(std::uint64_t id, DoneCb cb) override;
  void transfer(std::uint64_t id, DoneCb cb) override;

 private:
  struct ApplyReq;
  struct BarrierReq;
  struct ChangeReq;
  struct TransferReq;
  static int fsm_apply(raft_fsm* fsm, const raft_buffer* buf, void** result);
  static int fsm_snapshot(raft_fsm* fsm, raft_buffer* bufs[], unsigned* n_bufs);
  static int fsm_restore(raft_fsm* fsm, raft_buffer* buf);
  void check_leadership();
  void fail_later(DoneCb cb, Status s);
  // Runs a user callback on a later turn of the loop: raft calls us back in
  // the middle of its own work, and user code may call into raft again.
  void deliver(std::function<void()> fn);
  static void change_cb(raft_change* r, int status);
  void change(DoneCb cb, const std::function<int(raft_change*)>& submit);

  std::uint64_t id_;
  unsigned min_threshold_;
  std::string address_;
  Env& env_;
  StateMachine& sm_;
  EnvIo io_;
  raft_fsm fsm_{};
  std::unique_ptr<raft> raft_;
  int init_rv_ = 0;                  // raft_init's result, reported by start()
  bool started_ = false;
  bool was_leader_ = false;
  std::uint64_t leader_term_ = 0;
  LeadershipCb leadership_cb_;
  // This member's own proposals waiting to be applied, by log index: the
  // state machine's result goes to their callback.
  std::map<std::uint64_t, ApplyReq*> inflight_;
};

}  // namespace corral::service
