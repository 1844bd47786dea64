// corrald's log and clocks, shared by the agent's parts.
#pragma once

#include <string>
#include <vector>

namespace corral::agent {

// Log one line to the daemon log ("2026-01-02T03:04:05.678Z corrald: ..."). Control characters
// in `msg` are escaped (\n, \xHH): what a user sent can never start a line of its own.
void log_line(const std::string& msg);
// log_line() for what others can cause at will (refused connections, bad requests): at most a
// few lines of one `kind` every 10 s; the rest are counted, and the next line of that kind says
// "(N more like this suppressed)".
void log_limited(const std::string& kind, const std::string& msg);
// Reports the counts log_limited() holds back that no later line has reported yet.
void log_suppressed();
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
