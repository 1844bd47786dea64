#include "proto/mesh_jobs.hpp"

#include "proto/envelope.hpp"

namespace corral::proto::jobs {
namespace {

constexpr KindNames<Message> kKinds = {"forward", "forward_ack", "start", "start_ack", "cancel", "order",
                                           "exec_start", "exec_output", "exec_end", "wait_ask", "wait_answer",
                                           "exec_alive", "exec_cancel", "exec_input"};

}  // namespace

bool is_jobs(std::string_view bytes) { return has_magic(bytes, kMagic); }

std::string encode(const Message& m) { return encode_envelope(m, kMagic, kVersion, kKinds); }

Message decode(std::string_view bytes) {
  return decode_envelope<Message>(bytes, kMagic, kVersion, kKinds, "jobs message");
}

}  // namespace corral::proto::jobs
