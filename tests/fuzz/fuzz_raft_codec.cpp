// decode_raft_message over any bytes: false, or a message whose memory is then released as raft
// would release it (LeakSanitizer checks nothing else was allocated).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "coordinator/service/raft_codec.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  raft_message m{};
  std::string address;
  if (!corral::service::decode_raft_message(std::string_view(reinterpret_cast<const char*>(data), size), m, address))
    return 0;
  if (m.type == RAFT_IO_APPEND_ENTRIES && m.append_entries.n_entries > 0) {
    raft_free(m.append_entries.entries[0].batch);
    raft_free(m.append_entries.entries);
  } else if (m.type == RAFT_IO_INSTALL_SNAPSHOT) {
    raft_configuration_close(&m.install_snapshot.conf);
    raft_free(m.install_snapshot.data.base);
  }
  return 0;
}
