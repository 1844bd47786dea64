// proto::link::decode (every link message kind: hello, node, jobs, heartbeat,
// snapshot_ask, snapshot) over any bytes.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "proto/mesh_link.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  (void)corral::proto::link::is_link(bytes);
  try {
    (void)corral::proto::link::decode(bytes);
  } catch (const corral::proto::ProtoError&) {
  }
  return 0;
}
