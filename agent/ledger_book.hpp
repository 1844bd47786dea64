// corrald's charge ledger (NCI service units, coordinator/nci/ledger.hpp), kept
// durable in state_dir/ledger beside the job journal.
//
// The file is an append-only log in the journal's frames (length, CRC32,
// msgpack: journal_format.hpp): a "base" entry first (the ledger's totals and
// every job's charging, as a compaction wrote them), then one "charge" entry
// per increment. A charge entry says how many running seconds of one job's
// run are charged in all (cumulative, not a delta), so replaying the entries
// through Ledger::charge gives the very totals the agent had, and a lost
// entry only merges its seconds into the next one. Damage rules are the
// journal's: a torn tail is cut at load; damage before intact entries stops
// corrald unless --recover (a copy of the original is kept and every intact
// entry replayed). A state directory without the file starts an empty ledger.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "coordinator/model.hpp"
#include "coordinator/nci/ledger.hpp"

namespace corral::agent {

// One job's charging: the run being charged (or the last one) and its totals over every run.
struct JobCharge {
  double run_start = 0;            // JobRecord::start_time of that run
  std::int64_t run_seconds = 0;    // its running seconds charged so far
  bool closed = false;             // the run ended and was charged to its end
  double su = 0;                   // every run
  std::int64_t seconds = 0;        // every run
};

struct LedgerLoad {
  std::size_t entries = 0;
  std::size_t dropped_bytes = 0;   // a torn tail cut off, or damaged bytes skipped by recovery
  std::string warning;
  std::string damaged_copy;        // recovery only
};

class LedgerBook {
 public:
  // Opens dir/ledger (creating it: week 0 is the ISO week of `now`) and loads it. Throws
  // std::runtime_error with the path and why when it cannot be used, or is damaged and
  // `recover` is false.
  LedgerBook(std::string dir, bool fsync, bool recover, std::vector<Queue> queues, Time now);
  ~LedgerBook();
  LedgerBook(const LedgerBook&) = delete;
  LedgerBook& operator=(const LedgerBook&) = delete;

  const LedgerLoad& load_report() const { return load_; }
  // Grants (plan file `grant` lines) are configuration: set at every start, not stored.
  Ledger& ledger() { return *ledger_; }
  const Ledger& ledger() const { return *ledger_; }
  const JobCharge* job(std::uint64_t id) const;

  // The week and grant periods count from here: Monday 00:00 UTC of the week the file was made.
  Time origin() const { return origin_; }

  // Job `job`'s run that started at `run_start` has run `seconds` in all by `at`, on `cpus`:
  // charges what was not charged yet (nothing for a closed run) at the job's queue's charge;
  // `close` ends the run. Returns the units charged now. Throws std::invalid_argument
  // (Ledger::charge) on an unknown queue; nothing is recorded then.
  double charge(const Job& job, double run_start, std::int64_t seconds, int cpus, Time at, bool close);

  // Writes the entries charged since the last flush (fdatasync with sync). Throws as Store::flush:
  // StoreFull on a full disk, the entries kept to be written again. A file grown long is
  // rewritten as one base entry, forgetting the jobs `keep` says are gone (from the job store).
  void flush(bool sync);
  void set_keep(std::function<bool(std::uint64_t)> keep) { keep_ = std::move(keep); }

  const std::string& path() const { return path_; }

 private:
  struct Entry;
  void load(bool recover, Time now);
  void replay(const Entry& e);
  double apply(const Entry& e);
  void compact();

  std::string dir_, path_;
  bool fsync_;
  std::vector<Queue> queues_;
  std::optional<Ledger> ledger_;
  Time origin_ = 0;
  std::map<std::uint64_t, JobCharge> jobs_;
  std::function<bool(std::uint64_t)> keep_;
  std::string batch_;              // framed entries not yet written
  std::size_t batch_entries_ = 0;
  std::size_t entries_ = 0;        // entries in the file
  std::size_t size_ = 0;           // bytes in the file
  bool unsynced_ = false;
  int fd_ = -1;
  LedgerLoad load_;
};

}  // namespace corral::agent
