// Whether CRIU could checkpoint jobs on this node: CRIU is used only where `criu check` passes
// (it fails on some kernels), never depended on. corrald probes once at start and
// reports the result (log, `corral node --json`); checkpoints stay cooperative either way.
#pragma once

#include <string>

namespace corral::node {

struct CriuProbe {
  bool found = false;      // a criu binary on PATH
  bool available = false;  // `criu check` exited 0 in time
  std::string path;        // the binary run
  std::string why;         // what was found, in words (the failing check's message, a timeout, ...)
};

// Runs `criu check` (the first criu on $PATH) with stdin from /dev/null, in its own session, and
// waits at most timeout_ms for it (then kills its process group). Never throws.
CriuProbe probe_criu(int timeout_ms = 3000);

}  // namespace corral::node
