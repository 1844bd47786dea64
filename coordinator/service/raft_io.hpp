// libraft's raft_io implemented over an Env (clock, randomness, network) and a
// RaftDisk: the one place where the real raft algorithm meets the world.
// Messages leave as bytes (raft_codec.hpp) through Env::send, so the same code
// runs on the simulated network and on ZeroMQ.
//
// Disk writes (appends, truncations, snapshots) complete one at a time, in
// the order raft issued them, after Env::disk_latency_ms(); appends queued
// behind one another are written together, with one sync; a crash (the
// instance closed before they complete) loses exactly the writes not yet
// completed. Term and vote are written at once, as raft requires. With files
// (RaftDisk::files) a write completes once the files have it; a write the
// files refuse fails with RAFT_IOERR and leaves the image as it was.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "coordinator/service/env.hpp"
#include "coordinator/service/raft_c.hpp"
#include "coordinator/service/raft_disk.hpp"

namespace corral::service {

class EnvIo {
 public:
  EnvIo(Env& env, RaftDisk& disk);
  ~EnvIo();
  EnvIo(const EnvIo&) = delete;
  EnvIo& operator=(const EnvIo&) = delete;

  raft_io* io() { return &io_; }
  // Why the files last refused a write ("" when they never did).
  const std::string& last_error() const { return last_error_; }
  // Called after every tick and every delivered message, once raft has run
  // (the owner checks for leadership changes there).
  void after_event(std::function<void()> fn) { after_ = std::move(fn); }

 private:
  // A request raft is waiting for: finish(status) fires its callback.
  using Finish = std::function<void(int status)>;
  struct DiskOp {
    std::function<int()> write;    // applies the write to the disk: 0 or RAFT_IOERR
    Finish finish;                 // may be empty (truncate)
    // An append's entries: consecutive appends are written as one (write unused).
    std::shared_ptr<std::deque<DiskEntry>> append;
  };

  static EnvIo* self(raft_io* io) { return static_cast<EnvIo*>(io->impl); }
  static int m_init(raft_io* io, raft_id id, const char* address);
  static void m_close(raft_io* io, raft_io_close_cb cb);
  static int m_load(raft_io* io, raft_term* term, raft_id* vote, raft_snapshot** snapshot,
                    raft_index* start_index, raft_entry** entries, size_t* n_entries);
  static int m_start(raft_io* io, unsigned msecs, raft_io_tick_cb tick, raft_io_recv_cb recv);
  static int m_bootstrap(raft_io* io, const raft_configuration* conf);
  static int m_recover(raft_io* io, const raft_configuration* conf);
  static int m_set_term(raft_io* io, raft_term term);
  static int m_set_vote(raft_io* io, raft_id id);
  static int m_send(raft_io* io, raft_io_send* req, const raft_message* m, raft_io_send_cb cb);
  static int m_append(raft_io* io, raft_io_append* req, const raft_entry entries[], unsigned n,
                      raft_io_append_cb cb);
  static int m_truncate(raft_io* io, raft_index index);
  static int m_snapshot_put(raft_io* io, unsigned trailing, raft_io_snapshot_put* req,
                            const raft_snapshot* snapshot, raft_io_snapshot_put_cb cb);
  static int m_snapshot_get(raft_io* io, raft_io_snapshot_get* req, raft_io_snapshot_get_cb cb);
  static raft_time m_time(raft_io* io);
  static int m_random(raft_io* io, int min, int max);
  static int m_async_work(raft_io* io, raft_io_async_work* req, raft_io_async_work_cb cb);

  // Fires `finish` on a later turn of the loop (or with RAFT_CANCELED at close).
  void later(Finish finish);
  void enqueue_disk(DiskOp op);
  void next_disk();
  // The appends at the front of the queue, written as one: their statuses, in order.
  std::vector<std::pair<Finish, int>> append_run();
  void schedule_tick();
  void receive(std::string_view bytes);
  raft_snapshot* copy_snapshot() const;
  void cap_match(raft_message& result);
  // Runs `write` on the files when the disk has them: 0, or RAFT_IOERR (the
  // reason in last_error()).
  int durable(const std::function<void(DiskWriter&)>& write);

  // libraft 0.15 answers a successful AppendEntries with its last stored
  // index, even when entries past prev_log_index + n_entries are a leftover
  // of an older term that the leader never sent; the leader then counts them
  // as replicated and may commit an entry that only it holds (found by the
  // randomized simulation). The reply is capped here at the highest index
  // this member verified against the current term's leader.
  struct Verifying {
    bool active = false;           // inside raft's handling of AppendEntries / InstallSnapshot
    bool appended = false;         // raft accepted it and writes its entries or snapshot
    std::uint64_t upto = 0;        // prev_log_index + n_entries, or the snapshot's last index
  } verifying_;
  std::uint64_t verified_ = 0;
  std::uint64_t verified_term_ = 0;

  Env& env_;
  RaftDisk& disk_;
  raft_io io_{};
  std::uint64_t id_ = 0;
  std::string address_;
  std::string last_error_;
  unsigned tick_ms_ = 0;
  raft_io_tick_cb tick_cb_ = nullptr;
  raft_io_recv_cb recv_cb_ = nullptr;
  std::function<void()> after_;
  std::uint64_t next_req_ = 1;
  std::map<std::uint64_t, Finish> pending_;   // requests whose callback has not fired
  std::deque<DiskOp> disk_queue_;
  bool disk_busy_ = false;
  bool closed_ = false;
  // Posted work holds a weak reference: once this io is gone it does nothing.
  std::shared_ptr<EnvIo*> alive_;
};

}  // namespace corral::service
