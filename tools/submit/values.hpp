// The values of `corral submit`'s options, parsed once for the command line and for a script's
// directives (directives.hpp): walltimes, sizes, resource lists, slot ranges, projects, y/n
// choices, dependencies. Pure: no I/O.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

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
// Applies one -l list ("walltime=1:00:00,ncpus=2,mem=4gb,jobfs=1gb"; Grid Engine's h_rt= and
// h_vmem=; NCI's wd, the default). True when it names ncpus. Throws UsageError.
bool apply_resources(const std::string& list, proto::JobSpec& spec);

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

// y|yes or n|no, as qsub's -R and -now; else UsageError "OPT takes y or n, got 'x'".
bool yes_no(const char* opt, const std::string& value);
// -P PROJECT or -P PROJECT:STEP (the step of one of the project's flows).
void apply_project(proto::JobSpec& s, const std::string& value);
// requeue | suspend (coordinator/names.hpp), refused as "WHAT: expected requeue or suspend, got 'x'".
std::string preempt_choice(const std::string& what, const std::string& value);
// -j oe (PBS), -j y (Grid Engine): stderr into the stdout file; -j n: apart.
void apply_join(proto::JobSpec& s, const std::string& value);

// "42" or "42.host" (as PBS prints) -> 42. Throws UsageError.
std::uint64_t parse_job_id(const std::string& text);
// -W ATTR=VALUE (PBS): only depend=TYPE:ID[:ID...][,TYPE:ID...] is known; its dependencies
// are added to the job's (one repeated is kept once). Throws UsageError.
void apply_w(proto::JobSpec& s, const std::string& value);
// -hold_jid ID[,ID...] (Grid Engine): afterany on each, added as -W depend's.
void apply_hold_jid(proto::JobSpec& s, const std::string& value);

}  // namespace corral::cli
