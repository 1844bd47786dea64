// `corral submit SCRIPT` over any script: its directives read as the command reads them. A
// UsageError or a parsed job; the script is written once per input under the fuzzer's own
// temporary directory.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>

#include "tools/corral/client.hpp"

namespace {

std::string script_path() {
  static const std::string path = [] {
    const char* tmp = std::getenv("TMPDIR");
    std::string dir = std::string(tmp && *tmp ? tmp : "/tmp") + "/corral-fuzz-XXXXXX";
    if (::mkdtemp(dir.data()) == nullptr) std::abort();
    return dir + "/job.sh";
  }();
  return path;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = script_path();
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  std::string submit = "submit", file = path;
  char* argv[] = {submit.data(), file.data(), nullptr};
  try {
    (void)corral::cli::parse_submit(2, argv);
  } catch (const corral::cli::UsageError&) {
  }
  return 0;
}
