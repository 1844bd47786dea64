// `corral exec` between mesh members, on the jobs channel (mesh_jobs.hpp):
// the caller's node asks the named node to start a process of a running job
// there (ExecStart); that node starts it in its share of the job's cgroups as
// the job's user and relays what it writes (ExecOutput, in order) and how it
// ended (ExecEnd) to the asking member; the asking member relays the caller's
// stdin to it (ExecInput, in order, when ExecStart says `input`). `request` is the asking member's
// number for the call: every answer names it. While the process runs, its
// node says so every second (ExecAlive): the asking member fails a call it has
// not heard of for some seconds. The asking member stops a call whose caller
// went away, or that it no longer knows (ExecCancel).
#pragma once

#include <cstdint>
#include <string>

#include "proto/msgpack_map.hpp"

namespace corral::proto::jobs {

struct ExecStart {
  std::string mesh;
  std::uint64_t from = 0;        // the asking member (the answers go there)
  std::uint64_t request = 0;
  std::uint64_t job = 0;
  std::int32_t run = 0;          // the job's run the caller is a process of
  std::string node;              // the node asked (its name)
  std::string command;           // run by /bin/sh -c, as ssh runs its words
  std::string who;               // the caller, for the node's log
  bool input = false;            // stdin comes as ExecInput (else /dev/null)
  CORRAL_MSGPACK_MAP(mesh, from, request, job, run, node, command, who, input)
};

// From the asking member: the caller's stdin, in order; `eof` closes the process's stdin. Input
// for a call the node does not run is dropped.
struct ExecInput {
  std::string mesh;
  std::uint64_t from = 0;
  std::uint64_t request = 0;
  std::string data;
  bool eof = false;
  CORRAL_MSGPACK_MAP(mesh, from, request, data, eof)
};

struct ExecOutput {
  std::string mesh;
  std::uint64_t from = 0;
  std::uint64_t request = 0;
  std::int32_t stream = 1;       // 1 stdout, 2 stderr
  std::string data;
  CORRAL_MSGPACK_MAP(mesh, from, request, stream, data)
};

// status: "exited" (exit_code: its exit status, 128+N when signal N killed
// it), "refused" (the node holds no such run of the job; message says why)
// or "failed" (it could not be started; message says why).
struct ExecEnd {
  std::string mesh;
  std::uint64_t from = 0;
  std::uint64_t request = 0;
  std::string status;
  std::int32_t exit_code = 0;
  std::string message;
  CORRAL_MSGPACK_MAP(mesh, from, request, status, exit_code, message)
};

// From the node running the process, every second while it runs.
struct ExecAlive {
  std::string mesh;
  std::uint64_t from = 0;
  std::uint64_t request = 0;
  CORRAL_MSGPACK_MAP(mesh, from, request)
};

// From the asking member: stop the process of call `request` (SIGTERM to its process group,
// SIGKILL a few seconds later). A call the node does not run is ignored.
struct ExecCancel {
  std::string mesh;
  std::uint64_t from = 0;
  std::uint64_t request = 0;
  std::string why;               // for the node's log
  CORRAL_MSGPACK_MAP(mesh, from, request, why)
};

}  // namespace corral::proto::jobs
