// proto::decode over any bytes: a clean ProtoError or a message that encodes and decodes again
// to the same type.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "proto/proto.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  for (std::size_t cap : {std::size_t{1} << 16, std::size_t{16}}) {
    try {
      const corral::proto::Message m = corral::proto::decode(bytes, cap);
      const corral::proto::Message again = corral::proto::decode(corral::proto::encode(m));
      if (again.index() != m.index()) __builtin_trap();
    } catch (const corral::proto::ProtoError&) {
    }
  }
  return 0;
}
