// A process that `corral exec` starts in a running job's cgroups on this
// node: /bin/sh -c COMMAND as the job's user, joined to the job's cgroups
// before it runs anything, stdin from /dev/null or a pipe that ExecWatch
// feeds with the caller's input, stdout and stderr into pipes that ExecWatch
// relays until it ends.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace corral::agent {

struct ExecLaunch {
  std::vector<std::string> procs_files;  // the job's cgroups: the child writes "0" into each
  uid_t uid = 0;
  gid_t gid = 0;
  std::string user;                      // for its group list ("": the gid alone)
  std::string cwd;                       // "/" when it cannot be entered
  std::vector<std::string> env;          // KEY=VALUE, the whole environment
  std::string command;
  bool input = false;                    // stdin from a pipe (ExecChild::in_fd), else /dev/null
};

struct ExecChild {
  pid_t pid = -1;
  int out_fd = -1;
  int err_fd = -1;
  int in_fd = -1;
};

// Starts the process. Returns "" once it runs the shell, else why it could not
// (joining the cgroups, becoming the user, exec), with nothing left running.
std::string spawn_exec(const ExecLaunch& l, ExecChild& child);

// A thread per started process: its output (stream 1 or 2) as it comes, a
// sign of life every kAliveMs while it runs, then its exit status (128+N when
// signal N killed it). The callbacks run on that thread. Destroying an
// ExecWatch stops every thread (the processes go on: the job's end stops them
// with its cgroups).
class ExecWatch {
 public:
  using Output = std::function<void(int stream, std::string data)>;
  using Ended = std::function<void(int exit_code)>;
  using Alive = std::function<void()>;
  static constexpr int kAliveMs = 1000;
  static constexpr int kKillGraceMs = 3000;  // after stop()'s SIGTERM, SIGKILL
  ExecWatch();
  ~ExecWatch();
  ExecWatch(const ExecWatch&) = delete;
  ExecWatch& operator=(const ExecWatch&) = delete;
  // `key` names the process for stop().
  void watch(std::string key, ExecChild child, Output out, Ended ended, Alive alive);
  // SIGTERM to the process group of the process named `key` (its shell and what it started
  // there), SIGKILL kKillGraceMs later if the shell still runs. False when no such process runs.
  bool stop(const std::string& key);
  // Input for the stdin of the process named `key`, written as it reads it; `eof` closes its
  // stdin once all is written. False when no such process runs (its input is dropped).
  bool input(const std::string& key, std::string data, bool eof);

  struct Session;

 private:
  int stop_fd_ = -1;  // an eventfd: readable once every thread should stop
  std::list<std::unique_ptr<Session>> sessions_;
};

}  // namespace corral::agent
