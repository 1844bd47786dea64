// Standard Workload Format (SWF) traces: reading plain or gzip'd files.
//
// The simulator follows the common SWF convention so that its results compare
// exactly with other simulators (see SwfTrace::jobs for the rules applied).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "coordinator/model.hpp"

namespace corral::sim {

struct SwfJob {
  JobId id = 0;
  Time submit = 0;
  Time run = 0;        // field 4, capped by the estimate
  Time estimate = 0;   // field 9 if > 0, else the run time
  int procs = 0;       // field 8 if > 0, else field 5
  // Field 9 (requested time) was given (> 0). If not, `estimate` is the run
  // time (the convention); `corral sim --default-duration` plans such jobs
  // with Grid Engine's default_duration instead.
  bool requested = false;
  long user = -1;      // field 12 (-1: unknown)
  long group = -1;     // field 13
  long queue = -1;     // field 15
};

struct SwfTrace {
  int max_procs = 0;   // header "; MaxProcs:", else "; MaxNodes:" (0: absent)
  int max_nodes = 0;
  std::int64_t unix_start = 0;  // header "; UnixStartTime:" (0: absent): submit 0 in epoch seconds
  // Usable jobs, sorted by submit time then id. A job is skipped when its run
  // time <= 0, procs <= 0, or procs > the machine size.
  std::vector<SwfJob> jobs;
  std::size_t lines = 0;        // data lines seen
  std::size_t bad_lines = 0;    // unparsable lines (reported, skipped)
  std::size_t skipped = 0;      // well-formed but unusable jobs (see above)
  std::string first_bad;        // "line N: why" of the first bad line
};

// Parses SWF text. `machine_procs` > 0 overrides the header's machine size for
// the "procs > machine" rule. Never throws on bad data lines: they are counted.
SwfTrace parse_swf(const std::string& text, int machine_procs = 0);

// Reads a file (gzip detected by magic bytes, so .gz or not does not matter).
// Throws std::runtime_error with a clear message if the file cannot be read.
std::string read_file_maybe_gz(const std::string& path);

inline SwfTrace read_swf(const std::string& path, int machine_procs = 0) {
  return parse_swf(read_file_maybe_gz(path), machine_procs);
}

}  // namespace corral::sim
