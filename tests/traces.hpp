// The workload traces a test replays: the directory comes from meson's -Dtraces=DIR option,
// passed to the test as CORRAL_TRACES in its environment.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <string>

namespace corral_test {

inline std::string traces_dir() {
  const char* d = std::getenv("CORRAL_TRACES");
  return d ? d : "";
}

// The path of trace `name`, or "" with *why set when it is not there (the caller skips).
inline std::string trace(const std::string& name, std::string* why) {
  std::string dir = traces_dir();
  if (dir.empty()) {
    *why = "CORRAL_TRACES is not set (meson passes -Dtraces=DIR to the tests)";
    return {};
  }
  std::string p = dir + "/" + name;
  if (!std::filesystem::exists(p)) {
    *why = "trace " + p + " not found (meson -Dtraces=DIR)";
    return {};
  }
  return p;
}

}  // namespace corral_test
