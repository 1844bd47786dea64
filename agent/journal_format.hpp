// The journal's on-disk format: entries framed as a 4-byte big-endian length, the CRC32 of the
// payload, and the payload (a msgpack map). A frame verifies when its length fits, its CRC
// matches and its payload unpacks; damage is found, and skipped, by that test alone.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "agent/store.hpp"

namespace corral::agent::journal {

struct Entry {
  std::string op;                // "put" | "del" | "base" (first entry of a compacted file)
  std::uint64_t id = 0;
  std::uint64_t next_id = 1;
  JobRecord job;                 // for put
  std::vector<std::uint64_t> live;  // for base: every job the compacted file holds
  CORRAL_MSGPACK_MAP(op, id, next_id, job, live)
};

// Any payload framed so (the charge ledger's file uses the same frames), and the payload of the
// frame at `pos` with its framed size when its length fits and its CRC matches, else 0.
std::string frame(std::string_view payload);
std::size_t frame_at(std::string_view data, std::size_t pos, std::string_view& payload);

std::string encode(const Entry& e);
// The framed size of the entry at `pos` when it verifies (and the entry in `out`), else 0.
std::size_t decode_at(std::string_view data, std::size_t pos, Entry& out);
// The first offset at or after `from` where an entry verifies, or npos.
std::size_t resync(std::string_view data, std::size_t from);
// Frames in an encoded batch (whole entries only).
std::size_t count_frames(std::string_view data);

}  // namespace corral::agent::journal
