#include "proto/mesh_link.hpp"

#include <charconv>

#include "proto/envelope.hpp"

namespace corral::proto::link {
namespace {

constexpr KindNames<Message> kKinds = {"hello", "node", "jobs", "heartbeat", "snapshot_ask", "snapshot", "removed"};

}  // namespace

std::string publish_address(std::string_view listen) {
  const std::size_t colon = listen.rfind(':');
  if (colon == std::string_view::npos) return "";
  unsigned port = 0;
  const char* first = listen.data() + colon + 1;
  const char* last = listen.data() + listen.size();
  auto [end, ec] = std::from_chars(first, last, port);
  if (ec != std::errc() || end != last || first == last || port == 0 || port >= 65535) return "";
  return std::string(listen.substr(0, colon + 1)) + std::to_string(port + 1);
}

bool is_link(std::string_view bytes) { return has_magic(bytes, kMagic); }

std::string encode(const Message& m) { return encode_envelope(m, kMagic, kVersion, kKinds); }

Message decode(std::string_view bytes) {
  return decode_envelope<Message>(bytes, kMagic, kVersion, kKinds, "link message");
}

}  // namespace corral::proto::link
