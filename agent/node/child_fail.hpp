// What the shepherd (spawned, or forked in-process as a fallback) reports from
// the child side, where only async-signal-safe calls are allowed.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>

#include <cerrno>
#include <cstddef>

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

}  // namespace corral::node
