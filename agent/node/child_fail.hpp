// Reporting a failure from a freshly forked or spawned child (the shepherd and
// the fork fallback), where only async-signal-safe calls are allowed.
#pragma once

#include <unistd.h>

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

}  // namespace corral::node
