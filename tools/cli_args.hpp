// A command line as CLI11 should read it. CLI11 takes "--name=" (an empty
// value after '=') as "--name" and then the next argument as its value, so
// "--socket= 5" would make "5" the socket: here it becomes "--name" and an
// empty value, which the option then judges. Header only, for corral and
// corrald.
#pragma once

#include <CLI/CLI.hpp>
#include <algorithm>
#include <string>
#include <vector>

namespace corral {

// argv[1..argc) with every "--name=" split into "--name" and "" (nothing
// after "--" is touched; an option's value spelt "--name=" would be split too).
inline std::vector<std::string> cli_args(int argc, char** argv) {
  std::vector<std::string> out;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--") {
      out.insert(out.end(), argv + i, argv + argc);
      break;
    }
    if (a.size() > 3 && a.rfind("--", 0) == 0 && a.find('=') == a.size() - 1) {
      a.pop_back();
      out.push_back(a);
      out.emplace_back();
      continue;
    }
    out.push_back(a);
  }
  return out;
}

// app.parse over args in their order (CLI11 takes them from the back).
inline void cli_parse(CLI::App& app, std::vector<std::string> args) {
  std::reverse(args.begin(), args.end());
  app.parse(args);
}

}  // namespace corral
