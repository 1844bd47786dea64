// What `corral console` shows and the changes it asks for: each refresh reads the same requests
// as `corral nodes`, `stat`, `alloc` and `mesh`; each key sends the same request as its command,
// so corrald checks the same permissions (the console adds none of its own).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "proto/proto.hpp"

namespace corral::cli {

// One refresh of the mesh as the local corrald sees it.
struct ConsoleState {
  std::vector<proto::NodeLine> nodes;
  std::vector<proto::JobInfo> queue;  // running and suspended first, then pending by planned start
  proto::AllocRep alloc;
  std::string alloc_note;             // why there is no calendar ("" when there is one)
  proto::MeshStatus mesh;
  std::string error;                  // the first request that failed ("" when all answered)
  double now = 0;                     // epoch seconds of the refresh
};

// Reads every part; a part that fails leaves its fields empty and its reason in `error`.
ConsoleState console_fetch(const std::string& socket);

// The changes: each returns the line for the status bar, corrald's refusal included.
std::string console_node_admin(const std::string& socket, const std::string& node, const std::string& action,
                               const std::string& reason);
std::string console_job_control(const std::string& socket, std::uint64_t id, const std::string& action);
std::string console_cancel(const std::string& socket, std::uint64_t id);
// `words` as typed after `a`: PROJECT WEEK SLOTS.
std::string console_alloc_set(const std::string& socket, const std::string& words);

}  // namespace corral::cli
