// A connection on corrald's local socket: who it is (SO_PEERCRED), the
// frames read so far, the replies not yet written.
#pragma once

#include <cstdint>
#include <string>

#include "agent/daemon.hpp"
#include "proto/proto.hpp"

namespace corral::agent {

struct Daemon::Client {
  int fd = -1;
  Peer peer;
  bool privileged = false;       // root or an operator: never refused, no byte budget
  double last_active = 0;        // monotonic: the last byte in or out
  std::size_t counted = 0;       // reader bytes counted in the socket's budgets
  proto::FrameReader reader;
  std::string out;
  std::uint64_t waiting = 0;     // job id a `wait` blocks on
  std::uint64_t mesh_ticket = 0; // a request the mesh answers later (mesh_jobs.cpp)
  bool blocked() const { return waiting != 0 || mesh_ticket != 0; }
  bool exec_input = false;       // its `corral exec` call sends its stdin (ExecIn) while blocked
  bool reads_input() const { return exec_input && mesh_ticket != 0; }
  bool close_after_write = false;
  bool dead = false;
};

}  // namespace corral::agent
