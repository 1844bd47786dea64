// Messages between mesh members beside raft's own: ["corral-link", version,
// kind, body], body a map. Two channels carry them (docs/mesh.md, "Channels"):
//  - published (each member's PUB socket, at its publish address): its node
//    (`node`, once and on change), the jobs it runs (`jobs`, on every change)
//    and a `heartbeat` every 200 ms. `node` and `jobs` are events, numbered
//    per publisher (`seq` grows by one per event, from 1 in each
//    `incarnation`, the publisher's start); a heartbeat carries the number of
//    the last event, so a subscriber sees a missed last event too;
//  - the request channel (the ROUTER/DEALER sockets raft uses): a member that
//    does not vote introduces itself (`hello`) until it is admitted, and a
//    subscriber that saw a gap, or hears a publisher for the first time or in
//    a new incarnation, asks it for its whole report (`snapshot_ask`), which
//    it answers (`snapshot`, with the number of its last event); the
//    coordinator answers a removed node's hello with `removed`.
// Version 2: version 1 (every report in a hello) is refused as "of another
// version"; every member of a mesh must run the same version.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "proto/proto.hpp"

namespace corral::proto::link {

inline constexpr std::uint32_t kVersion = 2;
inline constexpr std::string_view kMagic = "corral-link";
// A heartbeat's state when its corrald shuts down: its last one. Voters' changes and handovers
// no longer count it up; its jobs' fate waits on its silence as before.
inline constexpr std::string_view kStopping = "stopping";

// A member that does not vote, to every voter until it is in the raft configuration.
struct Hello {
  std::string mesh;              // a message of another mesh is ignored
  std::uint64_t id = 0;
  std::string name;
  std::string address;           // host:port (its listen)
  CORRAL_MSGPACK_MAP(mesh, id, name, address)
};

// Published: the node's resources (0 cores: not reported yet).
struct NodeEvent {
  std::string mesh;
  std::uint64_t id = 0;
  std::uint64_t incarnation = 0;
  std::uint64_t seq = 0;
  std::int32_t cores = 0;
  std::int64_t mem_mb = 0;
  std::int64_t jobfs_mb = 0;
  CORRAL_MSGPACK_MAP(mesh, id, incarnation, seq, cores, mem_mb, jobfs_mb)
};

// Published: every job the node runs now (the whole set, not a change).
struct JobsEvent {
  std::string mesh;
  std::uint64_t id = 0;
  std::uint64_t incarnation = 0;
  std::uint64_t seq = 0;
  std::vector<std::uint64_t> running;
  CORRAL_MSGPACK_MAP(mesh, id, incarnation, seq, running)
};

// Published every 200 ms: the member's view of raft and the number of its last event.
struct Heartbeat {
  std::string mesh;
  std::uint64_t id = 0;
  std::uint64_t incarnation = 0;
  std::uint64_t seq = 0;         // of the last event published
  std::string name;
  std::string address;           // host:port (its listen)
  std::string state;             // leader | follower | candidate | unavailable | stopping (kStopping)
  std::uint64_t term = 0;
  std::uint64_t commit_index = 0;
  CORRAL_MSGPACK_MAP(mesh, id, incarnation, seq, name, address, state, term, commit_index)
};

// Request channel: member `id` (at `address`, its listen) asks for a snapshot.
struct SnapshotAsk {
  std::string mesh;
  std::uint64_t id = 0;
  std::string address;
  CORRAL_MSGPACK_MAP(mesh, id, address)
};

// Request channel: the publisher's whole report as of event `seq`.
struct Snapshot {
  std::string mesh;
  std::uint64_t id = 0;
  std::uint64_t incarnation = 0;
  std::uint64_t seq = 0;
  std::string name;
  std::string address;
  std::string state;
  std::uint64_t term = 0;
  std::uint64_t commit_index = 0;
  std::int32_t cores = 0;
  std::int64_t mem_mb = 0;
  std::int64_t jobfs_mb = 0;
  std::vector<std::uint64_t> running;
  CORRAL_MSGPACK_MAP(mesh, id, incarnation, seq, name, address, state, term, commit_index, cores, mem_mb, jobfs_mb,
                     running)
};

// Request channel: the coordinator's answer to the hello of a member whose
// node the mesh removed (corral mesh remove): the mesh ended its runs
// (node_fail when it was removed while silent), so the member stops the
// processes it still runs for them. Sent at every such hello; a member of
// an older version drops it as a bad message.
struct Removed {
  std::string mesh;
  std::uint64_t id = 0;          // the member told
  std::string name;              // its node name
  std::string by;                // the coordinator's node name
  CORRAL_MSGPACK_MAP(mesh, id, name, by)
};

using Message = std::variant<Hello, NodeEvent, JobsEvent, Heartbeat, SnapshotAsk, Snapshot, Removed>;

// A member that does not vote: its id, a hash of its node name (FNV-1a) in
// [kFirstMemberId, kLastMemberId]; the first voters are 1..the number of voters (a member
// promoted to voter keeps its own).
inline constexpr std::uint64_t kFirstMemberId = 1000, kLastMemberId = 9999999;
inline std::uint64_t member_id_of(std::string_view node_name) {
  std::uint64_t h = 14695981039346656037ull;
  for (unsigned char c : node_name) h = (h ^ c) * 1099511628211ull;
  return kFirstMemberId + h % (kLastMemberId - kFirstMemberId + 1);
}

// A member's publish address: its listen host:port with the port one higher
// ("" when `listen` has no port, or port 65535).
std::string publish_address(std::string_view listen);

// Whether `bytes` are a link message (by their first bytes): raft's own
// messages are not.
bool is_link(std::string_view bytes);
std::string encode(const Message& m);
// Throws ProtoError (clear text) on anything but a well-formed message of
// this version.
Message decode(std::string_view bytes);

}  // namespace corral::proto::link
