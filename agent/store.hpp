// corrald's job state: every job it knows, kept in memory and in an
// append-only journal in the state directory.
//
// Write-ahead: a change is appended to an in-memory batch; flush() writes the
// batch and fdatasync()s it. The daemon flushes before it answers any request
// of the same loop iteration (group commit), so a submit is on disk before its
// id is printed. Each journal entry carries a CRC32 so a torn tail (crash while
// writing) is detected and cut off at load; every complete entry survives.
// When the journal grows well beyond the live jobs it is rewritten to a new file
// (fsync) that atomically replaces the old one (rename + directory fsync).
#pragma once

#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "proto/proto.hpp"

namespace corral::agent {

// One job as the daemon stores it.
struct JobRecord {
  std::uint64_t id = 0;
  proto::JobSpec spec;           // script dropped once the job has ended; spec.env
                                 // stays empty: the environment is env_blob
  std::string env_blob;          // KEY=VALUE entries joined by NUL: one allocation
                                 // per job instead of one per variable (agent RSS)
  std::uint32_t uid = 0;
  std::uint32_t gid = 0;
  std::string user;
  std::string group;
  std::string state = "pending";  // proto::state names
  std::int32_t exit_code = -1;
  std::string end_reason;
  std::string comment;           // last scheduler/launcher message
  double submit_time = 0;
  double start_time = 0;
  double end_time = 0;
  std::vector<int> cores;
  std::int32_t requeues = 0;
  std::int32_t pba_preemptions = 0;  // PBA's own requeues of it (its requeue bound; not suspensions)
  double priority = 0;           // scheduling policy state (Plan::updates)
  std::int32_t cycles_pending = 0;
  double last_start_priority = 0;
  std::int64_t work_done = 0;
  double first_start = -1;
  bool cancel_requested = false;
  bool requeue_requested = false;
  double cpu_seconds = 0;
  std::int64_t rss_mb = 0;
  // Suspension (live part): seconds suspended during the current run (walltime
  // excludes them), since when it is suspended (0: not), and whether an admin
  // suspended it (`corral suspend`: only `corral resume` thaws it). The slots
  // granted at the last start are cores.size().
  double suspended_seconds = 0;
  double suspended_since = 0;
  bool held = false;
  // Times the job was checkpointed (its checkpoint dir kept). Every later start is a restart
  // (CORRAL_RESTART=1), however short the run before it was. Added after the journal format
  // shipped: older journals lack it (map keys: a missing one keeps its default).
  std::int32_t checkpoints = 0;
  // Runs that ended, oldest first (the current run is start_time..now). A run stopped to requeue
  // the job (requeue, checkpoint, preemption, lost at a restart) ends "preempted". Added after the
  // journal format shipped: older journals have none.
  std::vector<proto::RunInfo> runs;
  // The current run was started as a backfilled job under the checkpoint policy
  // (checkpoint-backfill-patent.zh.txt), and its split estimate then (s): at start + that
  // estimate its window ends and, if the reserved job still lacks cores, it is checkpointed.
  // Added after the journal format shipped: older journals lack them (not backfilled).
  bool backfilled = false;
  std::int64_t backfill_estimate = 0;
  // The dependencies (spec.depend) not met yet: the job is not eligible to start until this is
  // empty. Added after the journal format shipped: older journals lack it (nothing to wait for).
  std::vector<proto::Dependency> waits_on;
  // A hold (corral hold; proto::hold names, "" none) and who set it: a held pending job is not
  // eligible to start until released. Added after the journal format shipped.
  std::string hold;
  std::string hold_by;
  // Job arrays (agent/arrays.cpp). Added after the journal format shipped. A task: its array's
  // id and its index (array_id 0: not a task). The array itself (spec.array on, array_id 0)
  // never runs: array_next is the next index to hand to the scheduler, array_ahead the indices
  // beyond it handed out of turn (one task cancelled or held by name), array_failed how many of
  // its tasks ended other than completed.
  std::uint64_t array_id = 0;
  std::int64_t array_index = -1;
  std::int64_t array_next = 0;
  std::vector<std::int64_t> array_ahead;
  std::int64_t array_failed = 0;
  // A mesh job across nodes whose script runs on another node: this node holds its share (the
  // cgroups of its cores and memory) for `corral exec`; its end is not the job's. Added after
  // the journal format shipped.
  bool share = false;
  CORRAL_MSGPACK_MAP(id, spec, env_blob, uid, gid, user, group, state, exit_code, end_reason, comment,
                     submit_time, start_time, end_time, cores, requeues, priority, cycles_pending,
                     last_start_priority, work_done, first_start, cancel_requested,
                     requeue_requested, cpu_seconds, rss_mb, suspended_seconds, suspended_since,
                     held, pba_preemptions, checkpoints, runs, backfilled, backfill_estimate, waits_on,
                     hold, hold_by, array_id, array_index, array_next, array_ahead, array_failed, share)

  bool ended() const { return state == proto::state::kEnded; }
  // A job array: it stands for its tasks and never runs itself.
  bool is_array() const { return spec.array.on() && array_id == 0; }
};

// What load() found, for the log.
struct LoadReport {
  std::size_t entries = 0;
  std::size_t jobs = 0;
  std::size_t dropped_bytes = 0;   // torn tail cut off, or damaged bytes skipped by recovery
  std::string warning;
  // Recovery only: the copy of the original, the jobs no intact entry restored, and the jobs
  // restored from entries written before damaged bytes (a later change may be lost).
  std::string damaged_copy;
  std::vector<std::uint64_t> lost, maybe_stale;
};

// The state disk has no room (ENOSPC, EDQUOT): nothing of the failed write stays on disk.
struct StoreFull : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class Store {
 public:
  // Opens (creating) dir/journal and loads it. Throws std::runtime_error with
  // the path and errno text when the directory or file cannot be used, or when
  // the journal is damaged and `recover` is false.
  explicit Store(std::string dir, bool fsync = true, bool recover = false);
  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  const LoadReport& load_report() const { return report_; }

  // Throws StoreFull when a new block of ids cannot be reserved.
  std::uint64_t next_id();
  std::uint64_t peek_next_id() const { return next_id_; }

  // Records `rec` (new or changed) in memory and in the pending batch.
  void put(const JobRecord& rec);
  // Forgets a job (old ended jobs beyond the retention limit).
  void erase(std::uint64_t id);
  // Forgets a job put since the last flush, and its pending entries (a submit
  // that could not be made durable).
  void withdraw(std::uint64_t id);
  // Writes the pending batch; with sync (the default) also fdatasync()s it.
  // Unsynced entries survive a crash of the process (page cache), not of the
  // machine. Throws on I/O error: StoreFull when the disk is full. A failed
  // write is cut off the file and the batch kept, to be written again.
  void flush(bool sync = true);
  bool dirty() const { return !batch_.empty(); }

  JobRecord* find(std::uint64_t id);
  const std::map<std::uint64_t, JobRecord>& jobs() const { return jobs_; }
  // Mutable access for in-place edits; call put() to persist them.
  std::map<std::uint64_t, JobRecord>& jobs_mut() { return jobs_; }

  // Keeps at most `keep` ended jobs (the newest); older ones are erased.
  void trim_ended(std::size_t keep);

  const std::string& path() const { return path_; }

 private:
  void load(bool recover);
  void keep_damaged_copy();
  void compact();
  void reserve_ids(std::uint64_t upto);
  void append_entry(std::string_view op, const JobRecord* rec, std::uint64_t id);

  struct Pending {
    std::uint64_t id;
    std::string bytes;           // one framed entry
  };

  std::string dir_, path_;
  bool fsync_;
  int fd_ = -1;
  int lock_fd_ = -1;             // fcntl lock: one agent per state directory
  std::map<std::uint64_t, JobRecord> jobs_;
  std::uint64_t next_id_ = 1;
  std::uint64_t reserved_ = 0;   // ids below it may have been handed out (next_id file)
  std::vector<Pending> batch_;
  std::size_t entries_ = 0;      // entries in the journal file
  std::size_t size_ = 0;         // bytes in the journal file
  bool unsynced_ = false;        // written but not yet fdatasync'ed
  LoadReport report_;
};

}  // namespace corral::agent
