#include "proto/proto.hpp"

#include <algorithm>
#include <array>
#include <cstring>

namespace corral::proto {
namespace {

// Wire type names, in the order of the Message variant.
constexpr std::array<std::string_view, std::variant_size_v<Message>> kTypeNames = {
    "submit_req", "submit_rep", "stat_req", "stat_rep",  "cancel_req", "cancel_rep",
    "wait_req",   "wait_rep",   "node_req", "node_rep",  "error_rep",  "event",
    "control_req", "control_rep", "report_req", "report_rep", "mesh_req", "mesh_rep",
    "node_admin_req", "node_admin_rep", "nodes_req", "nodes_rep", "acct_req", "acct_rep",
    "alloc_req", "alloc_rep", "exec_req", "exec_out", "exec_rep", "exec_in",
};

template <std::size_t I = 0>
Message make_alternative(std::size_t index, const msgpack::object& body) {
  if constexpr (I < std::variant_size_v<Message>) {
    if (index == I) {
      std::variant_alternative_t<I, Message> v;
      body.convert(v);
      return Message{std::in_place_index<I>, std::move(v)};
    }
    return make_alternative<I + 1>(index, body);
  } else {
    throw ProtoError("internal: bad message index");
  }
}

std::string describe(const msgpack::object& o) {
  switch (o.type) {
    case msgpack::type::NIL: return "nil";
    case msgpack::type::BOOLEAN: return "a boolean";
    case msgpack::type::POSITIVE_INTEGER:
    case msgpack::type::NEGATIVE_INTEGER: return "an integer";
    case msgpack::type::FLOAT32:
    case msgpack::type::FLOAT64: return "a float";
    case msgpack::type::STR: return "a string";
    case msgpack::type::BIN: return "binary";
    case msgpack::type::ARRAY: return "an array";
    case msgpack::type::MAP: return "a map";
    case msgpack::type::EXT: return "an extension";
  }
  return "unknown";
}

}  // namespace

std::string_view type_name(const Message& m) { return kTypeNames[m.index()]; }

std::string encode(const Message& m) {
  msgpack::sbuffer buf;
  msgpack::packer<msgpack::sbuffer> pk(buf);
  pk.pack_array(4);
  pk.pack(kMagic);
  pk.pack(kVersion);
  pk.pack(type_name(m));
  std::visit([&](const auto& body) { pk.pack(body); }, m);
  return std::string(buf.data(), buf.size());
}

Message decode(std::string_view bytes, std::size_t max_elems) {
  if (bytes.empty()) throw ProtoError("empty message");
  // An honest message cannot hold more elements than it has bytes; capping the
  // counts keeps a garbage header from making msgpack allocate gigabytes.
  std::size_t cap = std::min(bytes.size(), max_elems);
  msgpack::unpack_limit limit(cap, cap, cap, cap, cap, 16);
  msgpack::object_handle oh;
  std::size_t off = 0;
  try {
    oh = msgpack::unpack(bytes.data(), bytes.size(), off, nullptr, nullptr, limit);
  } catch (const std::exception& e) {
    throw ProtoError(std::string("not a Corral message (bad MessagePack: ") + e.what() + ")");
  }
  if (off != bytes.size())
    throw ProtoError("not a Corral message (" + std::to_string(bytes.size() - off) +
                     " trailing bytes)");
  const msgpack::object& o = oh.get();
  if (o.type != msgpack::type::ARRAY || o.via.array.size != 4)
    throw ProtoError("not a Corral message (expected a 4-element envelope, got " + describe(o) +
                     ")");
  const msgpack::object* f = o.via.array.ptr;
  if (f[0].type != msgpack::type::STR ||
      std::string_view(f[0].via.str.ptr, f[0].via.str.size) != kMagic)
    throw ProtoError("not a Corral message (bad magic)");
  if (f[1].type != msgpack::type::POSITIVE_INTEGER)
    throw ProtoError("bad protocol version field (" + describe(f[1]) + ")");
  if (f[1].via.u64 != kVersion)
    throw ProtoError("protocol version " + std::to_string(f[1].via.u64) +
                     " not supported (this side speaks version " + std::to_string(kVersion) +
                     "); use matching corral and corrald builds");
  if (f[2].type != msgpack::type::STR) throw ProtoError("bad message type field");
  std::string_view tn(f[2].via.str.ptr, f[2].via.str.size);
  for (std::size_t i = 0; i < kTypeNames.size(); ++i) {
    if (kTypeNames[i] != tn) continue;
    if (f[3].type != msgpack::type::MAP)
      throw ProtoError("bad '" + std::string(tn) + "' body (expected a map, got " +
                       describe(f[3]) + ")");
    try {
      return make_alternative(i, f[3]);
    } catch (const std::exception& e) {
      throw ProtoError("bad '" + std::string(tn) + "' body (a field has the wrong type)");
    }
  }
  throw ProtoError("unknown message type '" + std::string(tn.substr(0, 64)) + "'");
}

Message decode(std::string_view bytes) { return decode(bytes, std::size_t{1} << 20); }

std::string frame(std::string_view payload) {
  std::string out;
  out.reserve(payload.size() + 4);
  auto n = static_cast<std::uint32_t>(payload.size());
  out.push_back(static_cast<char>((n >> 24) & 0xff));
  out.push_back(static_cast<char>((n >> 16) & 0xff));
  out.push_back(static_cast<char>((n >> 8) & 0xff));
  out.push_back(static_cast<char>(n & 0xff));
  out.append(payload);
  return out;
}

void FrameReader::feed(const char* data, std::size_t n) {
  std::size_t need = buf_.size() + n;
  if (need > buf_.capacity()) {
    std::size_t want = std::max(need, buf_.capacity() * 2);
    if (buf_.size() - pos_ >= 4) {
      const auto* p = reinterpret_cast<const unsigned char*>(buf_.data() + pos_);
      std::size_t len = (std::size_t{p[0]} << 24) | (std::size_t{p[1]} << 16) | (std::size_t{p[2]} << 8) | p[3];
      want = std::min(want, std::max(need, pos_ + 4 + std::min<std::size_t>(len, kMaxFrame)));
    }
    buf_.reserve(want);
  }
  buf_.append(data, n);
}

bool FrameReader::next(std::string& out) {
  if (buf_.size() - pos_ < 4) return false;
  const auto* p = reinterpret_cast<const unsigned char*>(buf_.data() + pos_);
  std::uint32_t n = (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) |
                    (std::uint32_t{p[2]} << 8) | std::uint32_t{p[3]};
  if (n > kMaxFrame)
    throw ProtoError("frame of " + std::to_string(n) + " bytes exceeds the limit of " +
                     std::to_string(kMaxFrame));
  if (buf_.size() - pos_ - 4 < n) return false;
  out.assign(buf_, pos_ + 4, n);
  pos_ += 4 + n;
  if (pos_ == buf_.size()) {
    if (buf_.capacity() > (1u << 16)) std::string().swap(buf_);  // an idle connection keeps little
    buf_.clear();
    pos_ = 0;
  } else if (pos_ > (1u << 16)) {
    buf_.erase(0, pos_);
    pos_ = 0;
  }
  return true;
}

}  // namespace corral::proto
