// Reading MONITOR schedule files (sge6-reservation-backfill.txt 2d) in tests:
// the lines of a job, and one field of a line.
#pragma once

#include <sstream>
#include <string>
#include <vector>

namespace corral_test {

// The lines of `text` that begin with `prefix` (e.g. "12:1:" for job 12).
inline std::vector<std::string> lines_with(const std::string& text, const std::string& prefix) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);)
    if (l.rfind(prefix, 0) == 0) out.push_back(l);
  return out;
}

// Field k (0-based) of a line "id:task:STATE:start:duration:level:name:resource:amount".
inline std::string monitor_field(const std::string& line, int k) {
  std::size_t a = 0;
  for (int i = 0; i < k; ++i) a = line.find(':', a) + 1;
  return line.substr(a, line.find(':', a) - a);
}

}  // namespace corral_test
