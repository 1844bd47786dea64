#include "proto/mesh_link.hpp"

#include "proto/envelope.hpp"

namespace corral::proto::link {
namespace {

constexpr KindNames<Message> kKinds = {"hello"};

}  // namespace

bool is_link(std::string_view bytes) { return has_magic(bytes, kMagic); }

std::string encode(const Message& m) { return encode_envelope(m, kMagic, kVersion, kKinds); }

Message decode(std::string_view bytes) {
  return decode_envelope<Message>(bytes, kMagic, kVersion, kKinds, "link message");
}

}  // namespace corral::proto::link
