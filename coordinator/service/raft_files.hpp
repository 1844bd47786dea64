// A replica's RaftDisk kept in files under one directory, so a member that
// restarts as a new process has its term, vote, log and snapshot:
//
//   term      ["term", version, term, vote]             replaced whole
//   snapshot  ["snapshot", version, index, term, ...]   replaced whole
//   log       ["start", version, first index], then one ["entry", index,
//             term, type, data] per entry, appended
//
// Each record is framed as corrald's journal frames its entries: a 4-byte
// big-endian length, the CRC32 of the payload, the payload (MessagePack).
// Appends and truncations are fdatasync()ed, whole files written to a temp
// file, fsync()ed and renamed into place (then the directory fsync()ed),
// before the write returns: raft learns a write is done only once it is.
//
// At load a torn tail of the log (the last append, cut short by a crash:
// nothing verifies after it) is cut off; a record that does not verify
// anywhere else, or one out of place, is damage: load() throws with the file
// and the byte offset and leaves the files as they are.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "coordinator/service/raft_disk.hpp"

namespace corral::service {

class RaftFiles final : public DiskWriter {
 public:
  // Creates `dir` when missing. `fsync` false only in tests that crash
  // processes, not machines.
  explicit RaftFiles(std::string dir, bool fsync = true);
  ~RaftFiles() override;
  RaftFiles(const RaftFiles&) = delete;
  RaftFiles& operator=(const RaftFiles&) = delete;

  // Reads the files into an image that writes through this object. Call once,
  // before any write. Throws std::runtime_error on damage.
  RaftDisk load();
  // What load() repaired (a torn tail cut off), for the log; "" when nothing.
  const std::string& warning() const { return warning_; }
  const std::string& dir() const { return dir_; }

  void save_term(std::uint64_t term, std::uint64_t vote) override;
  void append(std::uint64_t index, const std::deque<DiskEntry>& entries) override;
  void truncate(std::uint64_t index) override;
  void put_snapshot(const DiskSnapshot& s, unsigned trailing) override;

 private:
  std::string path(const char* name) const { return dir_ + "/" + name; }
  void load_log(RaftDisk& d);
  // Replaces the log with a start record for `new_first`, and with
  // `keep_entries` the entries it holds from `new_first` on.
  void rewrite_log(std::uint64_t new_first, bool keep_entries);
  void open_log();
  // Once a write failed part-way the files may not match the image: every
  // later write is refused.
  void check_usable() const;

  std::string dir_;
  bool fsync_;
  int log_fd_ = -1;
  std::uint64_t first_ = 1;              // index of the log's first entry
  std::vector<std::uint64_t> offsets_;   // byte offset of each entry's record
  std::uint64_t size_ = 0;               // bytes of the log file
  std::string broken_;                   // why writes are refused
  std::string warning_;
};

}  // namespace corral::service
