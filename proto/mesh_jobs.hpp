// Messages that carry jobs between mesh members, beside raft's own and the
// link's hellos, on the same ZeroMQ sockets: ["corral-jobs", version, kind,
// body], body a map (field names as keys: a newer writer may add fields, an
// older reader keeps defaults).
//
// A member that is not the coordinator forwards a submission to it
// (SubmitFwd); the coordinator proposes it as a JobAccepted entry and answers
// (SubmitAck) once the entry is committed, or says it does not lead. The
// forwarder resends with the same token until it has an answer, so a
// submission that reached a coordinator which then died gets its first id.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <variant>

#include "proto/mesh.hpp"

namespace corral::proto::jobs {

inline constexpr std::uint32_t kVersion = 1;
inline constexpr std::string_view kMagic = "corral-jobs";

struct SubmitFwd {
  std::string mesh;              // a message of another mesh is ignored
  std::uint64_t from = 0;        // the forwarding member's id (the answer goes there)
  std::uint64_t request = 0;     // the forwarder's number for this attempt
  mesh::JobAccepted job;         // token set: a resend is the same submission
  MSGPACK_DEFINE_MAP(mesh, from, request, job)
};

struct SubmitAck {
  std::string mesh;
  std::uint64_t from = 0;        // the answering member
  std::uint64_t request = 0;     // SubmitFwd::request
  // "ok": committed, `job` is its id; "not_leader": resend to `leader` (0:
  // none known); anything else: refused for `message`.
  std::string status;
  std::uint64_t job = 0;
  std::uint64_t leader = 0;
  std::string message;
  MSGPACK_DEFINE_MAP(mesh, from, request, status, job, leader, message)
};

using Message = std::variant<SubmitFwd, SubmitAck>;

// Whether `bytes` are a jobs message (by their first bytes).
bool is_jobs(std::string_view bytes);
std::string encode(const Message& m);
// Throws ProtoError (clear text) on anything but a well-formed message of
// this version.
Message decode(std::string_view bytes);

}  // namespace corral::proto::jobs
