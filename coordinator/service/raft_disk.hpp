// What a replica keeps across a crash: its term and vote, its log and its
// last snapshot. It lives outside the raft instance, so a simulated crash
// destroys the instance and a restart loads this again. Held in memory here;
// a file-backed store is still to come (see README.md).
#pragma once

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

struct RaftDisk {
  std::uint64_t term = 0;
  std::uint64_t vote = 0;
  std::uint64_t first_index = 1;   // index of entries.front()
  std::deque<DiskEntry> entries;
  std::optional<DiskSnapshot> snapshot;
};

}  // namespace corral::service
