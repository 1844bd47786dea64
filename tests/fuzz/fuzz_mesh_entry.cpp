// proto::decode_entry (the mesh's replicated log entries) over any bytes.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "proto/mesh.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    (void)corral::proto::mesh::decode_entry(std::string_view(reinterpret_cast<const char*>(data), size));
  } catch (const corral::proto::ProtoError&) {
  }
  return 0;
}
