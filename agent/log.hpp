// corrald's log and clocks, shared by the agent's parts.
#pragma once

#include <string>
#include <vector>

namespace corral::agent {

// Log one line to the daemon log ("2026-01-02T03:04:05.678Z corrald: ...").
void log_line(const std::string& msg);
// Sends the log to `path` (append) instead of stderr; "" keeps stderr.
void log_to(const std::string& path);
// Reopens the log file given to log_to() (SIGHUP: rotation); no-op on stderr.
void log_reopen();

// CORRAL_TRACE=1 in corrald's environment logs the time of each loop stage.
bool trace_on();

double wall_now();  // seconds, CLOCK_REALTIME
double mono_now();  // seconds, CLOCK_MONOTONIC

std::string errno_text();                          // strerror(errno)
std::string join_ints(const std::vector<int>& v);  // "0,1,2"

}  // namespace corral::agent
