// A versioned MessagePack envelope for a variant of message bodies:
// ["magic", version, kind, body], body a map, kind the alternative's name in
// `kinds` (variant order). Shared by the mesh's log entries (mesh.hpp) and
// the messages between members (mesh_link.hpp). decode_envelope() refuses
// anything else with a ProtoError naming `what` ("mesh entry"); it never
// crashes on bad bytes.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

#include "proto/proto.hpp"

namespace corral::proto {

// Whether `bytes` begin as an envelope with `magic` (under 32 bytes): the
// first bytes tell the kinds of message that share one socket apart.
inline bool has_magic(std::string_view bytes, std::string_view magic) {
  return bytes.size() > magic.size() + 1 && static_cast<unsigned char>(bytes[0]) == 0x94 &&
         static_cast<unsigned char>(bytes[1]) == (0xa0 | magic.size()) && bytes.substr(2, magic.size()) == magic;
}

template <class V>
using KindNames = std::array<std::string_view, std::variant_size_v<V>>;

template <class V>
std::string encode_envelope(const V& v, std::string_view magic, std::uint32_t version,
                            const KindNames<V>& kinds) {
  msgpack::sbuffer buf;
  msgpack::packer<msgpack::sbuffer> pk(buf);
  pk.pack_array(4);
  pk.pack(magic);
  pk.pack(version);
  pk.pack(kinds[v.index()]);
  std::visit([&](const auto& body) { pk.pack(body); }, v);
  return std::string(buf.data(), buf.size());
}

namespace detail {
template <class V, std::size_t... I>
bool convert_kind(std::string_view kind, const msgpack::object& body, V& out, const KindNames<V>& kinds,
                  std::index_sequence<I...>) {
  return ((kinds[I] == kind && (out.template emplace<I>(body.as<std::variant_alternative_t<I, V>>()), true)) ||
          ...);
}
}  // namespace detail

template <class V>
V decode_envelope(std::string_view bytes, std::string_view magic, std::uint32_t version,
                  const KindNames<V>& kinds, const std::string& what) {
  if (bytes.empty()) throw ProtoError("empty " + what);
  // Element counts capped by the byte count: a forged header cannot make
  // msgpack allocate more than the bytes could hold.
  std::size_t cap = bytes.size();
  msgpack::unpack_limit limit(cap, cap, cap, cap, cap, 16);
  msgpack::object_handle oh;
  std::size_t off = 0;
  try {
    oh = msgpack::unpack(bytes.data(), bytes.size(), off, nullptr, nullptr, limit);
  } catch (const std::exception& ex) {
    throw ProtoError("not a " + what + " (bad MessagePack: " + ex.what() + ")");
  }
  if (off != bytes.size()) throw ProtoError("not a " + what + " (trailing bytes)");
  const msgpack::object& o = oh.get();
  if (o.type != msgpack::type::ARRAY || o.via.array.size != 4)
    throw ProtoError("not a " + what + " (expected a 4-element array)");
  const msgpack::object* f = o.via.array.ptr;
  if (f[0].type != msgpack::type::STR || f[0].as<std::string_view>() != magic)
    throw ProtoError("not a " + what + " (bad magic)");
  if (f[1].type != msgpack::type::POSITIVE_INTEGER || f[1].via.u64 != version)
    throw ProtoError(what + " of another version (this side reads version " + std::to_string(version) + ")");
  if (f[2].type != msgpack::type::STR) throw ProtoError("bad " + what + " kind field");
  std::string_view kind = f[2].as<std::string_view>();
  if (f[3].type != msgpack::type::MAP)
    throw ProtoError("bad '" + std::string(kind) + "' " + what + " (body is not a map)");
  V out;
  bool known = false;
  try {
    known = detail::convert_kind(kind, f[3], out, kinds, std::make_index_sequence<std::variant_size_v<V>>{});
  } catch (const std::exception&) {
    throw ProtoError("bad '" + std::string(kind) + "' " + what + " (a field has the wrong type)");
  }
  if (!known) throw ProtoError("unknown " + what + " kind '" + std::string(kind.substr(0, 64)) + "'");
  return out;
}

}  // namespace corral::proto
