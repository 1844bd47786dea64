// The `corral` side of the local socket: qsub-style option parsing, one
// request/reply exchange with corrald, JSON output. Parsing is separate from
// I/O so tests can drive it directly.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "proto/proto.hpp"
#include "tools/submit/array_values.hpp"
#include "tools/submit/values.hpp"

namespace corral::cli {

struct SubmitArgs {
  proto::JobSpec spec;           // without env/cwd (filled by the caller)
  std::string socket;
  bool help = false;             // --help: nothing else is read
};
// Parses `corral submit` arguments (argv[0] is "submit"); reads the script
// file. Throws UsageError with a clear message.
SubmitArgs parse_submit(int argc, char** argv);

// The environment variable that sets a job's suspend-or-requeue choice (as --preempt) when
// neither the command line nor a #CORRAL directive does.
inline constexpr const char* kPreemptEnv = "CORRAL_PREEMPT";

// Completes a parsed submit with what the job inherits: the working directory, the environment
// (NULL-terminated, as environ) and this process's umask; then checks every field as corrald
// will (proto/spec_check.hpp). Throws UsageError.
void finish_submit(proto::JobSpec& spec, const std::string& cwd, char** env);

// The socket path: --socket, else $CORRAL_SOCKET, else /run/corral/corrald.sock.
std::string default_socket();

// A connected socket to corrald at `path`. Throws std::runtime_error saying why not.
int connect_corrald(const std::string& path);

// One exchange with corrald. Throws std::runtime_error when it cannot be
// reached or answers garbage.
proto::Message request(const std::string& socket, const proto::Message& req);

// Shared flags of the commands that take job ids or nothing: --socket PATH,
// --json (when json_ok), --reason TEXT (when reason_ok), --help; the rest are args.
// Throws UsageError on an unknown option.
struct Common {
  std::string socket;
  bool json = false;
  bool help = false;             // --help: nothing else is read
  std::string reason;
  std::vector<std::string> args;
};
Common parse_common(const char* cmd, int argc, char** argv, bool json_ok, bool reason_ok = false);

// `corral report [--week W] [--project P] [--json]` arguments: the week and project as given
// (corrald judges them: it knows which weeks and projects there are). Throws UsageError on an
// unknown option, an argument, or an empty --week or --project.
struct ReportArgs {
  std::string week;
  std::string project;
  bool json = false;
  std::string socket;
  bool help = false;             // --help: nothing else is read
};
ReportArgs parse_report(int argc, char** argv);

// `corral stat [JOBID] [-u USER] [-P PROJECT] [-s STATE[,STATE...]] [--mine] [--json]`
// arguments: the filters as corrald applies them. Throws UsageError on an unknown state, an
// empty value, or a job id with filters.
struct StatArgs {
  proto::StatReq filter;
  bool json = false;
  std::string socket;
  bool help = false;             // --help: nothing else is read
};
StatArgs parse_stat(int argc, char** argv);

// `corral acct [--user U] [--project P] [--since T] [--json]` arguments (-u and -P also): the
// filters as given (corrald reads T against its own clock). Throws UsageError on an unknown
// option, an argument or an empty value.
struct AcctArgs {
  proto::AcctReq req;
  bool json = false;
  std::string socket;
  bool help = false;             // --help: nothing else is read
};
AcctArgs parse_acct(int argc, char** argv);
// `corral alloc [--json]` and `corral alloc set PROJECT WEEK SLOTS [WEEK SLOTS...]`: the changes
// (corrald checks the project and the weeks). Throws UsageError on a missing or bad slot count.
struct AllocArgs {
  proto::AllocReq req;
  bool json = false;
  std::string socket;
  bool help = false;             // --help: nothing else is read
};
AllocArgs parse_alloc(int argc, char** argv);
// `corral suspend|resume|requeue|checkpoint JOBID...` arguments (argv[0] is
// the command): the ids and --socket. Throws UsageError.
struct ControlArgs {
  std::string action;
  std::vector<JobRef> ids;
  std::string socket;
  bool help = false;             // --help: nothing else is read
};
ControlArgs parse_control(int argc, char** argv);

// `corral console [--interval SECONDS]`: the refresh period (0.2 to 3600 s). Throws UsageError.
struct ConsoleArgs {
  double interval = 1;
  std::string socket;
  bool help = false;             // --help: nothing else is read
};
ConsoleArgs parse_console(int argc, char** argv);

// Epoch seconds t as local time in strftime's `format` ("-" for 0), and as the time of day
// HH:MM:SS (cmd_jobs.cpp).
std::string local_time(double t, const char* format);
std::string clock_time(double t);

// JSON text of a job / node status.
std::string to_json(const proto::JobInfo& j);
std::string to_json(const proto::NodeStatus& n);

}  // namespace corral::cli
