#include "proto/mesh_link.hpp"

#include "proto/envelope.hpp"

namespace corral::proto::link {
namespace {

constexpr KindNames<Message> kKinds = {"hello"};

std::string prefix() {
  msgpack::sbuffer buf;
  msgpack::packer<msgpack::sbuffer> pk(buf);
  pk.pack_array(4);
  pk.pack(kMagic);
  return std::string(buf.data(), buf.size());
}

}  // namespace

bool is_link(std::string_view bytes) {
  static const std::string p = prefix();
  return bytes.substr(0, p.size()) == p;
}

std::string encode(const Message& m) { return encode_envelope(m, kMagic, kVersion, kKinds); }

Message decode(std::string_view bytes) {
  return decode_envelope<Message>(bytes, kMagic, kVersion, kKinds, "link message");
}

}  // namespace corral::proto::link
