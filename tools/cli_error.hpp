// CLI11's parse errors in the words corral and corrald use for a bad command
// line ("unknown option '--x'", "--socket needs a value", "--json takes no
// value", "--aging given more than once"); anything else as CLI11 says it. Header only, for both programs.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace corral {

inline std::string usage_error(const CLI::ParseError& e) {
  const std::string m = e.what();
  if (dynamic_cast<const CLI::ExtrasError*>(&e)) {  // its get_name() is the app's name
    const std::size_t colon = m.find(": ");
    std::string arg = colon == std::string::npos ? m : m.substr(colon + 2);
    arg = arg.substr(0, arg.find(' '));
    return (arg.size() > 1 && arg[0] == '-' ? "unknown option '" : "unexpected argument '") + arg + "'";
  }
  if (e.get_name() == "ArgumentMismatch") {
    if (const std::size_t p = m.find(" was given a disallowed flag override"); p != std::string::npos) {
      std::string flag = m.substr(0, p);  // CLI11 names it without its dashes
      if (!flag.empty() && flag[0] != '-') flag = (flag.size() == 1 ? "-" : "--") + flag;
      return flag + " takes no value";
    }
    const std::size_t p = m.find(": ");
    if (p != std::string::npos && m.find("At Most 1 required but received") != std::string::npos)
      return m.substr(0, p) + " given more than once";
    if (p != std::string::npos && m.find(" required ") != std::string::npos) return m.substr(0, p) + " needs a value";
  }
  return m;
}

}  // namespace corral
