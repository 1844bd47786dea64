#include "agent/log.hpp"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <cstdint>
#include <map>
#include <stdexcept>

#include "proto/spec_check.hpp"

namespace corral::agent {

namespace {
std::FILE* g_log = stderr;
std::string g_log_path;
}  // namespace

double wall_now() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}
double mono_now() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

bool trace_on() {
  static const bool on = std::getenv("CORRAL_TRACE") != nullptr;
  return on;
}

std::string errno_text() { return std::strerror(errno); }

std::string join_ints(const std::vector<int>& v) {
  std::string s;
  for (int x : v) s += (s.empty() ? "" : ",") + std::to_string(x);
  return s;
}

void log_to(const std::string& path) {
  if (path.empty()) return;
  std::FILE* f = std::fopen(path.c_str(), "a");
  if (!f) throw std::runtime_error("cannot open log file " + path + ": " + errno_text());
  std::setvbuf(f, nullptr, _IOLBF, 0);
  if (g_log != stderr) std::fclose(g_log);
  g_log = f;
  g_log_path = path;
}

void log_reopen() { log_to(g_log_path); }

void log_line(const std::string& msg) {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  tm t{};
  gmtime_r(&ts.tv_sec, &t);
  char stamp[80];
  std::snprintf(stamp, sizeof stamp, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ", t.tm_year + 1900,
                t.tm_mon + 1, t.tm_mday, t.tm_hour, t.tm_min, t.tm_sec, ts.tv_nsec / 1000000);
  std::fprintf(g_log, "%s corrald: %s\n", stamp, proto::printable(msg).c_str());
  std::fflush(g_log);
}

namespace {
constexpr double kLimitWindow = 10;  // s
constexpr int kLimitBurst = 3;       // lines of one kind per window
struct Limited {
  double window_start = -1e9;
  int shown = 0;
  std::uint64_t suppressed = 0;
};
std::map<std::string, Limited> g_limited;

std::string suppressed_text(std::uint64_t n) {
  return " (" + std::to_string(n) + " more like this suppressed)";
}
}  // namespace

void log_limited(const std::string& kind, const std::string& msg) {
  Limited& l = g_limited[kind];
  double now = mono_now();
  if (now - l.window_start >= kLimitWindow) {
    l.window_start = now;
    l.shown = 0;
  }
  if (l.shown >= kLimitBurst) {
    ++l.suppressed;
    return;
  }
  ++l.shown;
  log_line(l.suppressed ? msg + suppressed_text(l.suppressed) : msg);
  l.suppressed = 0;
}

void log_suppressed() {
  double now = mono_now();
  for (auto& [kind, l] : g_limited) {
    if (!l.suppressed || now - l.window_start < kLimitWindow) continue;
    log_line(kind + ":" + suppressed_text(l.suppressed));
    l.suppressed = 0;
    l.window_start = now;
    l.shown = 1;
  }
}

}  // namespace corral::agent
