// A job script's directives (#CORRAL, #PBS, #$) over any text: parse_directives() must give
// options or an error naming the line, and never throw or crash.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "tools/submit/directives.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const corral::cli::DirectiveResult r = corral::cli::parse_directives(text, "job.sh");
  // An error always names the file and line it is about.
  if (!r.ok() && r.error.rfind("job.sh:", 0) != 0) std::abort();
  return 0;
}
