#include "agent/journal_format.hpp"

#include <zlib.h>

namespace corral::agent::journal {
namespace {

void put_u32(std::string& out, std::uint32_t v) {
  for (int s = 24; s >= 0; s -= 8) out.push_back(static_cast<char>((v >> s) & 0xff));
}
std::uint32_t get_u32(const char* p) {
  const auto* u = reinterpret_cast<const unsigned char*>(p);
  return (std::uint32_t{u[0]} << 24) | (std::uint32_t{u[1]} << 16) | (std::uint32_t{u[2]} << 8) |
         std::uint32_t{u[3]};
}
std::uint32_t crc(const char* p, std::size_t n) {
  return static_cast<std::uint32_t>(crc32(0, reinterpret_cast<const Bytef*>(p), static_cast<uInt>(n)));
}
// Largest payload written (a job's script and environment are bounded by the frame limit).
constexpr std::size_t kMaxPayload = proto::kMaxFrame * 2;

}  // namespace

std::string frame(std::string_view payload) {
  std::string out;
  out.reserve(payload.size() + 8);
  put_u32(out, static_cast<std::uint32_t>(payload.size()));
  put_u32(out, crc(payload.data(), payload.size()));
  out.append(payload);
  return out;
}

std::size_t frame_at(std::string_view data, std::size_t pos, std::string_view& payload) {
  if (pos > data.size() || data.size() - pos < 8) return 0;
  std::size_t len = get_u32(data.data() + pos);
  if (len == 0 || len > kMaxPayload || data.size() - pos - 8 < len) return 0;
  const char* p = data.data() + pos + 8;
  if (crc(p, len) != get_u32(data.data() + pos + 4)) return 0;
  payload = std::string_view(p, len);
  return 8 + len;
}

std::string encode(const Entry& e) {
  msgpack::sbuffer buf;
  msgpack::pack(buf, e);
  return frame(std::string_view(buf.data(), buf.size()));
}

std::size_t decode_at(std::string_view data, std::size_t pos, Entry& out) {
  std::string_view p;
  const std::size_t n = frame_at(data, pos, p);
  if (!n) return 0;
  try {
    msgpack::object_handle oh = msgpack::unpack(p.data(), p.size());
    Entry e;
    oh.get().convert(e);
    if (e.op != "put" && e.op != "del" && e.op != "base") return 0;
    out = std::move(e);
  } catch (const std::exception&) {
    return 0;
  }
  return n;
}

std::size_t resync(std::string_view data, std::size_t from) {
  Entry e;
  for (std::size_t pos = from; pos + 8 <= data.size(); ++pos)
    if (decode_at(data, pos, e)) return pos;
  return std::string_view::npos;
}

std::size_t count_frames(std::string_view data) {
  std::size_t n = 0;
  for (std::size_t pos = 0; pos + 8 <= data.size(); ++n) pos += 8 + get_u32(data.data() + pos);
  return n;
}

}  // namespace corral::agent::journal
