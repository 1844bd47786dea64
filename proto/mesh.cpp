#include "proto/mesh.hpp"

#include <array>

namespace corral::proto::mesh {
namespace {

constexpr std::array<std::string_view, std::variant_size_v<Entry>> kKinds = {
    "job_accepted", "job_started", "job_ended",  "job_requeued",  "job_suspended",
    "node_admin",   "grant_set",   "charge",     "allocation_set",
};

// The alternative named by `kind`, converted from `body`; false when no
// alternative has that name.
template <std::size_t... I>
bool convert_kind(std::string_view kind, const msgpack::object& body, Entry& out,
                  std::index_sequence<I...>) {
  return ((kKinds[I] == kind &&
           (out.emplace<I>(body.as<std::variant_alternative_t<I, Entry>>()), true)) ||
          ...);
}

}  // namespace

std::string_view kind_name(const Entry& e) { return kKinds[e.index()]; }

std::string encode_entry(const Entry& e) {
  msgpack::sbuffer buf;
  msgpack::packer<msgpack::sbuffer> pk(buf);
  pk.pack_array(4);
  pk.pack(kMagic);
  pk.pack(kVersion);
  pk.pack(kind_name(e));
  std::visit([&](const auto& body) { pk.pack(body); }, e);
  return std::string(buf.data(), buf.size());
}

Entry decode_entry(std::string_view bytes) {
  if (bytes.empty()) throw ProtoError("empty mesh entry");
  // Element counts capped by the byte count: a forged header cannot make
  // msgpack allocate more than the entry could hold.
  std::size_t cap = bytes.size();
  msgpack::unpack_limit limit(cap, cap, cap, cap, cap, 16);
  msgpack::object_handle oh;
  std::size_t off = 0;
  try {
    oh = msgpack::unpack(bytes.data(), bytes.size(), off, nullptr, nullptr, limit);
  } catch (const std::exception& ex) {
    throw ProtoError(std::string("not a mesh entry (bad MessagePack: ") + ex.what() + ")");
  }
  if (off != bytes.size()) throw ProtoError("not a mesh entry (trailing bytes)");
  const msgpack::object& o = oh.get();
  if (o.type != msgpack::type::ARRAY || o.via.array.size != 4)
    throw ProtoError("not a mesh entry (expected a 4-element array)");
  const msgpack::object* f = o.via.array.ptr;
  if (f[0].type != msgpack::type::STR || f[0].as<std::string_view>() != kMagic)
    throw ProtoError("not a mesh entry (bad magic)");
  if (f[1].type != msgpack::type::POSITIVE_INTEGER || f[1].via.u64 != kVersion)
    throw ProtoError("mesh entry of another version (this side reads version " +
                     std::to_string(kVersion) + ")");
  if (f[2].type != msgpack::type::STR) throw ProtoError("bad mesh entry kind field");
  std::string_view kind = f[2].as<std::string_view>();
  if (f[3].type != msgpack::type::MAP)
    throw ProtoError("bad '" + std::string(kind) + "' mesh entry (body is not a map)");
  Entry out;
  bool known = false;
  try {
    known = convert_kind(kind, f[3], out, std::make_index_sequence<std::variant_size_v<Entry>>{});
  } catch (const std::exception&) {
    throw ProtoError("bad '" + std::string(kind) + "' mesh entry (a field has the wrong type)");
  }
  if (!known) throw ProtoError("unknown mesh entry kind '" + std::string(kind.substr(0, 64)) + "'");
  return out;
}

}  // namespace corral::proto::mesh
