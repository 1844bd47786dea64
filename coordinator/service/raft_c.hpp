// libraft's C header for C++: raft.h (canonical raft 0.15) has no extern "C"
// of its own. Include raft through this header only.
#pragma once

extern "C" {
#include <raft.h>
}
