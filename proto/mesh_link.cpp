#include "proto/mesh_link.hpp"

#include <array>

namespace corral::proto::link {
namespace {

constexpr std::array<std::string_view, std::variant_size_v<Message>> kKinds = {"hello"};

template <std::size_t... I>
bool convert_kind(std::string_view kind, const msgpack::object& body, Message& out,
                  std::index_sequence<I...>) {
  return ((kKinds[I] == kind &&
           (out.emplace<I>(body.as<std::variant_alternative_t<I, Message>>()), true)) ||
          ...);
}

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

std::string encode(const Message& m) {
  msgpack::sbuffer buf;
  msgpack::packer<msgpack::sbuffer> pk(buf);
  pk.pack_array(4);
  pk.pack(kMagic);
  pk.pack(kVersion);
  pk.pack(kKinds[m.index()]);
  std::visit([&](const auto& body) { pk.pack(body); }, m);
  return std::string(buf.data(), buf.size());
}

Message decode(std::string_view bytes) {
  std::size_t cap = bytes.size();
  msgpack::unpack_limit limit(cap, cap, cap, cap, cap, 16);
  msgpack::object_handle oh;
  std::size_t off = 0;
  try {
    oh = msgpack::unpack(bytes.data(), bytes.size(), off, nullptr, nullptr, limit);
  } catch (const std::exception& e) {
    throw ProtoError(std::string("not a link message (bad MessagePack: ") + e.what() + ")");
  }
  const msgpack::object& o = oh.get();
  if (off != bytes.size() || o.type != msgpack::type::ARRAY || o.via.array.size != 4)
    throw ProtoError("not a link message (expected a 4-element array)");
  const msgpack::object* f = o.via.array.ptr;
  if (f[0].type != msgpack::type::STR || f[0].as<std::string_view>() != kMagic)
    throw ProtoError("not a link message (bad magic)");
  if (f[1].type != msgpack::type::POSITIVE_INTEGER || f[1].via.u64 != kVersion)
    throw ProtoError("link message of another version (this side speaks version " +
                     std::to_string(kVersion) + ")");
  if (f[2].type != msgpack::type::STR || f[3].type != msgpack::type::MAP)
    throw ProtoError("bad link message kind or body");
  std::string_view kind = f[2].as<std::string_view>();
  Message out;
  bool known = false;
  try {
    known = convert_kind(kind, f[3], out, std::make_index_sequence<std::variant_size_v<Message>>{});
  } catch (const std::exception&) {
    throw ProtoError("bad '" + std::string(kind) + "' link message (a field has the wrong type)");
  }
  if (!known) throw ProtoError("unknown link message kind '" + std::string(kind.substr(0, 64)) + "'");
  return out;
}

}  // namespace corral::proto::link
