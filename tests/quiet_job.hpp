// A one-cpu job running `script`, its output discarded, 60 s of walltime:
// what the mesh tests and benchmarks submit in bulk.
#pragma once

#include <string>

#include "proto/proto.hpp"

namespace corral::testing {

inline proto::JobSpec quiet_job(const std::string& name, const std::string& script, const std::string& cwd) {
  proto::JobSpec s;
  s.name = name;
  s.script = script;
  s.script_name = "--wrap";
  s.cwd = cwd;
  s.stdout_path = "/dev/null";
  s.stderr_path = "/dev/null";
  s.walltime = 60;
  s.ncpus = 1;
  return s;
}

}  // namespace corral::testing
