// What the shepherd (spawned, or forked in-process as a fallback) reports from
// the child side, where only async-signal-safe calls are allowed.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>

#include <cerrno>
#include <cstddef>
#include <cstdint>

namespace corral::node {

// Writes "<stage>:<errno>" to `fd` (the launcher's error pipe) and exits 127.
[[noreturn]] inline void child_fail(int fd, const char* stage) {
  int e = errno;
  char buf[128];
  std::size_t n = 0;
  for (const char* p = stage; *p && n < 100; ++p) buf[n++] = *p;
  buf[n++] = ':';
  char digits[16];
  int d = 0;
  do { digits[d++] = static_cast<char>('0' + e % 10); e /= 10; } while (e && d < 15);
  while (d) buf[n++] = digits[--d];
  [[maybe_unused]] auto w = ::write(fd, buf, n);
  ::_exit(127);
}

// Writes the job's wait status as "<decimal>\n" to `tmp`, then renames it to
// `final` so the agent never reads half a status.
inline void write_exit_status(const char* tmp, const char* final, int status) {
  int f = ::open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (f < 0) return;
  char buf[16];
  int n = 0;
  unsigned v = static_cast<unsigned>(status);
  char digits[12];
  int d = 0;
  do { digits[d++] = static_cast<char>('0' + v % 10); v /= 10; } while (v && d < 11);
  while (d) buf[n++] = digits[--d];
  buf[n++] = '\n';
  [[maybe_unused]] auto w = ::write(f, buf, static_cast<std::size_t>(n));
  ::close(f);
  ::rename(tmp, final);
}

// What a shepherd tells the agent on its wake pipe: fixed 16-byte records, written with one
// write() each (atomic on a pipe, < PIPE_BUF), so records from many shepherds never interleave.
struct WakeRecord {
  std::uint64_t id;   // job id (0: a bare nudge)
  std::int32_t pid;   // the shepherd's pid (-1 if it could not be forked)
  std::int32_t kind;  // WakeKind
};
static_assert(sizeof(WakeRecord) == 16, "wake records are 16 bytes");
enum WakeKind : std::int32_t {
  kWakeRunning = 1,  // in its slot cgroups, the job exec'd
  kWakeFailed = 2,   // the launch failed; "<stage>:<errno>" is in the job's .fail file
  kWakeEnded = 3,    // the job's main process ended; its status is in the .exit file
  kWakeNudge = 4,    // no news: the agent put back a wake-up it had consumed
};
// An "ended" record may carry the wait status as well: kind =
// kWakeEnded | kWakeHasStatus | status << 16, so the agent need not open the exit file on the
// path from an end to the next start. The exit file is written first all the same (what an
// agent that restarted reads). An agent that does not know the flag sees an unknown kind and
// finds the end from the pid and the exit file, as before.
constexpr std::int32_t kWakeKindMask = 0xff;
constexpr std::int32_t kWakeHasStatus = 0x100;
inline std::int32_t wake_ended_with(int status) {
  return kWakeEnded | kWakeHasStatus | static_cast<std::int32_t>((static_cast<unsigned>(status) & 0xffffu) << 16);
}
inline int wake_status(std::int32_t kind) { return static_cast<int>((static_cast<std::uint32_t>(kind) >> 16) & 0xffffu); }

inline void send_wake(int fd, std::uint64_t id, std::int32_t pid, std::int32_t kind) {
  WakeRecord r{id, pid, kind};
  ssize_t n;
  do {
    n = ::write(fd, &r, sizeof r);
  } while (n < 0 && errno == EINTR);
}

// Writes "<stage>:<errno>" to `tmp`, then renames it to `final` (a failed launch's reason).
inline void write_fail(const char* tmp, const char* final, const char* stage, int err) {
  int f = ::open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (f < 0) return;
  char buf[160];
  std::size_t n = 0;
  for (const char* p = stage; *p && n < 120; ++p) buf[n++] = *p;
  buf[n++] = ':';
  char digits[16];
  int d = 0;
  unsigned v = static_cast<unsigned>(err < 0 ? 0 : err);
  do { digits[d++] = static_cast<char>('0' + v % 10); v /= 10; } while (v && d < 15);
  while (d) buf[n++] = digits[--d];
  [[maybe_unused]] auto w = ::write(f, buf, n);
  ::close(f);
  ::rename(tmp, final);
}

}  // namespace corral::node
