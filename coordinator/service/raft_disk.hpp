// What a replica keeps across a crash: its term and vote, its log and its
// last snapshot. It lives outside the raft instance, so a simulated crash
// destroys the instance and a restart loads this again. The image is held in
// memory; when `files` is set every change is first made durable there
// (raft_files.hpp), so a new process loads the same image from the files.
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "coordinator/service/consensus.hpp"

namespace corral::service {

struct DiskEntry {
  std::uint64_t term = 0;
  unsigned short type = 0;     // RAFT_COMMAND, RAFT_BARRIER, RAFT_CHANGE
  std::string data;
};

struct DiskSnapshot {
  std::uint64_t index = 0;
  std::uint64_t term = 0;
  std::vector<Member> conf;
  std::uint64_t conf_index = 0;
  std::string data;
};

// Where a RaftDisk's changes are made durable. Each call returns once the
// change is on stable storage, or throws std::runtime_error (what failed,
// with the file); the image in memory is changed only after it returned.
class DiskWriter {
 public:
  virtual ~DiskWriter() = default;
  virtual void save_term(std::uint64_t term, std::uint64_t vote) = 0;
  // `entries` take indexes `index`, `index + 1`, ... at the end of the log.
  virtual void append(std::uint64_t index, const std::deque<DiskEntry>& entries) = 0;
  // Drops every entry from `index` on.
  virtual void truncate(std::uint64_t index) = 0;
  // Stores `s`; trailing 0: the log restarts after it (installed from the
  // leader), else keeps the last `trailing` entries it covers.
  virtual void put_snapshot(const DiskSnapshot& s, unsigned trailing) = 0;
};

struct RaftDisk {
  std::uint64_t term = 0;
  std::uint64_t vote = 0;
  std::uint64_t first_index = 1;   // index of entries.front()
  std::deque<DiskEntry> entries;
  std::optional<DiskSnapshot> snapshot;
  DiskWriter* files = nullptr;     // none: held in memory only
};

// The index of the first entry a log keeps after a snapshot at `snap_index`
// with `trailing` entries behind it, given its `first` index and `count`
// entries (the in-memory image and the files compute it alike).
inline std::uint64_t first_after_snapshot(std::uint64_t first, std::uint64_t count,
                                          std::uint64_t snap_index, unsigned trailing) {
  if (trailing == 0) return snap_index + 1;
  std::uint64_t keep_from = snap_index > trailing ? snap_index - trailing + 1 : 1;
  return keep_from > first ? first + std::min(count, keep_from - first) : first;
}

}  // namespace corral::service
