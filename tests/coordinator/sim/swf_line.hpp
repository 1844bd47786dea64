// One SWF data line for hand-built test traces: job `id` submitted at
// `submit`, running `run` s on `procs` processors of a `req`-second request,
// by user `user` (every other field -1, status 1).
#pragma once

#include <sstream>
#include <string>

namespace corral::testing {

inline std::string swf_line(long id, long submit, long run, long procs, long req, long user) {
  std::ostringstream o;
  o << id << ' ' << submit << " -1 " << run << ' ' << procs << " -1 -1 " << procs << ' ' << req << " -1 1 " << user
    << " -1 -1 -1 -1 -1 -1\n";
  return o.str();
}

}  // namespace corral::testing
