// parse_swf over any text: it never throws on bad lines, it counts them.
#include <cstddef>
#include <cstdint>
#include <string>

#include "coordinator/sim/swf.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  (void)corral::sim::parse_swf(text);
  (void)corral::sim::parse_swf(text, 64);
  return 0;
}
