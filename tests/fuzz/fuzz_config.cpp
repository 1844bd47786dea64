// corrald's config file text: a std::runtime_error naming the line, or a config.
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "agent/config.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  corral::agent::Config cfg;
  try {
    corral::agent::parse_config_text(std::string(reinterpret_cast<const char*>(data), size), "fuzz.conf", cfg);
  } catch (const std::runtime_error&) {
  }
  return 0;
}
