// Messages between mesh members beside raft's own, on the same ZeroMQ
// sockets: ["corral-link", version, kind, body], body a map. A member
// announces itself (hello) to every voter a few times a second: its name,
// its view of the mesh (and so every member's "last contact"), and its node.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "proto/proto.hpp"

namespace corral::proto::link {

inline constexpr std::uint32_t kVersion = 1;
inline constexpr std::string_view kMagic = "corral-link";

struct Hello {
  std::string mesh;              // a hello of another mesh is ignored
  std::uint64_t id = 0;
  std::string name;
  std::string address;           // host:port
  std::string state;             // leader | follower | candidate | unavailable
  std::uint64_t term = 0;
  std::uint64_t commit_index = 0;
  // The member's node, for the coordinator's pass: its cores, memory and
  // scratch space, and the jobs it runs (0 cores: not reported yet).
  std::int32_t cores = 0;
  std::int64_t mem_mb = 0;
  std::int64_t jobfs_mb = 0;
  std::vector<std::uint64_t> running;
  MSGPACK_DEFINE_MAP(mesh, id, name, address, state, term, commit_index, cores, mem_mb, jobfs_mb, running)
};

using Message = std::variant<Hello>;

// A member that does not vote: its id, a hash of its node name (FNV-1a) in
// [kFirstMemberId, kLastMemberId]; voters are 1..the number of voters.
inline constexpr std::uint64_t kFirstMemberId = 1000, kLastMemberId = 9999999;
inline std::uint64_t member_id_of(std::string_view node_name) {
  std::uint64_t h = 14695981039346656037ull;
  for (unsigned char c : node_name) h = (h ^ c) * 1099511628211ull;
  return kFirstMemberId + h % (kLastMemberId - kFirstMemberId + 1);
}

// Whether `bytes` are a link message (by their first bytes): raft's own
// messages are not.
bool is_link(std::string_view bytes);
std::string encode(const Message& m);
// Throws ProtoError (clear text) on anything but a well-formed message of
// this version.
Message decode(std::string_view bytes);

}  // namespace corral::proto::link
