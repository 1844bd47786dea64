// Job arrays as users write them: the range of `corral submit -J` (PBS) and `-t` (Grid Engine),
// Grid Engine's `-tc` limit, and the names of one task, "ID[i]" (PBS). One grammar for the
// command line and the script directives. Pure: no I/O.
#pragma once

#include <cstdint>
#include <string>

#include "proto/proto.hpp"

namespace corral::cli {

// "first-last[:step][%max_running]" or "n" (one task, as Grid Engine's -t n) into spec.array.
// Without "%N" an earlier limit (-tc) is kept. `opt` ("-J", "-t") names the option in errors.
// Throws UsageError.
void apply_array(proto::JobSpec& spec, const std::string& opt, const std::string& text);
// Grid Engine's -tc N: at most N tasks of the array run at once. Throws UsageError.
void apply_task_limit(proto::JobSpec& spec, const std::string& text);

// A job as commands name it: "42" (a job, or a whole array), "42[]" (the array, as PBS prints
// it), "42[7]" (task 7 of array 42); ".host" after it is accepted as PBS prints ids.
struct JobRef {
  std::uint64_t id = 0;
  std::int64_t index = -1;       // -1: the job or the whole array
  bool operator==(const JobRef&) const = default;
};
JobRef parse_job_ref(const std::string& text);
// "42" or "42[7]".
std::string job_ref_text(std::uint64_t id, std::int64_t index);

}  // namespace corral::cli
