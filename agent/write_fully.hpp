// Writing a whole buffer to a file descriptor, through short writes and EINTR.
#pragma once

#include <unistd.h>

#include <cerrno>
#include <string_view>

namespace corral::agent {

// True when every byte went; false (errno set) at the first failed write.
inline bool write_fully(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

}  // namespace corral::agent
