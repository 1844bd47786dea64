// Small durable-file helpers of the agent's state directory: whole writes,
// synced replacement through a renamed temp file, and a kept copy of a
// damaged file. Errors throw std::runtime_error naming the path and errno
// text; a full disk (ENOSPC, EDQUOT) throws StoreFull (store.hpp).
#pragma once

#include <string>
#include <string_view>

namespace corral::agent::durable {

// Throws for `what path: strerror(errno)`: StoreFull on a full disk.
[[noreturn]] void fail(const std::string& what, const std::string& path);
void write_all(int fd, std::string_view data, const std::string& path);
void sync_dir(const std::string& dir);
// The whole file; "" when it does not exist.
std::string read_file(const std::string& path);
// `data` to path through a synced temp file (path.new) renamed into place; never a partial file.
void replace_file(const std::string& dir, const std::string& path, std::string_view data, bool sync);
// Appends `data` to a log file (fd opened O_APPEND, `size` bytes long), fdatasync'ed with `sync`.
// On any failure the file is cut back to `size`, so no partial entry stays mid-file (it would
// read as damage later), and the error is thrown ("cannot sync WHAT path: ...").
void append(int fd, std::string_view data, std::size_t size, bool sync, const std::string& what,
            const std::string& path);
// Keeps a copy of a damaged file beside it (path.damaged-STAMP: a hard link, else a copy);
// returns its path.
std::string keep_copy(const std::string& dir, const std::string& path, bool sync);

}  // namespace corral::agent::durable
