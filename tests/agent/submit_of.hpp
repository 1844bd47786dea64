// `corral submit ARGS...` parsed as the command line would be, for tests of its options.
#pragma once

#include <string>
#include <vector>

#include "tools/corral/client.hpp"

inline corral::cli::SubmitArgs submit_of(std::vector<std::string> args) {
  std::vector<char*> v;
  for (auto& a : args) v.push_back(a.data());
  return corral::cli::parse_submit(static_cast<int>(v.size()), v.data());
}
