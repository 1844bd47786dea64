// The `corral` side of the local socket: qsub-style option parsing, one
// request/reply exchange with corrald, JSON output. Parsing is separate from
// I/O so tests can drive it directly.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "proto/proto.hpp"

namespace corral::cli {

// A user mistake: printed as "corral CMD: <what>", exit code 2.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// "HH:MM:SS", "MM:SS" or plain seconds -> seconds. Throws UsageError.
std::int64_t parse_walltime(const std::string& text);
// "4gb", "512mb", "100kb", "1tb", "2048" (bytes, as PBS) -> MiB, rounded up.
// Throws UsageError on anything else.
std::int64_t parse_size_mb(const std::string& text);
// Applies one -l list ("walltime=1:00:00,ncpus=2,mem=4gb,jobfs=1gb").
void apply_resources(const std::string& list, proto::JobSpec& spec);

// A Grid Engine slot range (sge6-reservation-backfill.txt section 3):
// "n-m", "n" (n-n), "-m" (1-m), "n-" (n to as many as the node has:
// slots_max = proto::kSlotsUnbounded). Throws UsageError on 0, max < min,
// range lists ("2-4,8") and anything else.
struct SlotRange {
  std::int32_t min = 1, max = 1;
};
SlotRange parse_slot_range(const std::string& text);
// -pe NAME RANGE into spec (pe, slots_min, slots_max; ncpus = the minimum).
void apply_pe(const std::string& name, const std::string& range, proto::JobSpec& spec);

struct SubmitArgs {
  proto::JobSpec spec;           // without env/cwd (filled by the caller)
  std::string socket;
  bool help = false;             // --help: nothing else is read
};
// Parses `corral submit` arguments (argv[0] is "submit"); reads the script
// file. Throws UsageError with a clear message.
SubmitArgs parse_submit(int argc, char** argv);

// Completes a parsed submit with what the job inherits: the working directory, the environment
// (NULL-terminated, as environ) and this process's umask; then checks every field as corrald
// will (proto/spec_check.hpp). Throws UsageError.
void finish_submit(proto::JobSpec& spec, const std::string& cwd, char** env);

// The socket path: --socket, else $CORRAL_SOCKET, else /run/corral/corrald.sock.
std::string default_socket();

// One exchange with corrald. Throws std::runtime_error when it cannot be
// reached or answers garbage.
proto::Message request(const std::string& socket, const proto::Message& req);

// Shared flags of the commands that take job ids or nothing: --socket PATH,
// --json (when json_ok), --help; the rest are args. Throws UsageError on an
// unknown option.
struct Common {
  std::string socket;
  bool json = false;
  bool help = false;             // --help: nothing else is read
  std::vector<std::string> args;
};
Common parse_common(const char* cmd, int argc, char** argv, bool json_ok);

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

// `corral suspend|resume|requeue|checkpoint JOBID...` arguments (argv[0] is
// the command): the ids and --socket. Throws UsageError.
struct ControlArgs {
  std::string action;
  std::vector<std::uint64_t> ids;
  std::string socket;
  bool help = false;             // --help: nothing else is read
};
ControlArgs parse_control(int argc, char** argv);
// "42" or "42.host" (as PBS prints) -> 42. Throws UsageError.
std::uint64_t parse_job_id(const std::string& text);

// JSON text of a job / node status.
std::string to_json(const proto::JobInfo& j);
std::string to_json(const proto::NodeStatus& n);

}  // namespace corral::cli
