// parse_plan (the project plan file) over any text: errors listed, never thrown.
#include <cstddef>
#include <cstdint>
#include <string>

#include "coordinator/pba/plan_file.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  corral::pba::PlanParseOptions opt;
  opt.origin = 1'700'000'000;
  (void)corral::pba::parse_plan(text, opt);
  return 0;
}
