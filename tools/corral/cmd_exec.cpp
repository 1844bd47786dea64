// corral exec NODE COMMAND [ARGS...]: a process of the running job on
// another of its nodes (docs/commands.md). The words after NODE are joined
// with spaces and run by /bin/sh -c there, as ssh runs them, so that MPI
// launchers can use it in place of ssh; it stays attached, relays its own
// stdin to the command and the command's output back, and exits with its
// status (255 when it could not run it, as ssh does).
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

#include "tools/corral/client.hpp"
#include "tools/corral/commands.hpp"

namespace corral::cli {
namespace {

const char* const kExecHelp =
    "usage: corral exec [--socket PATH] [-n] NODE COMMAND [ARGS...]\n"
    "From inside a running job: runs COMMAND (the words joined with spaces, by /bin/sh -c)\n"
    "on NODE, one of the job's nodes, in the job's cgroups there and as the job's user.\n"
    "Relays its stdin to it (its end closes the command's stdin; -n: the command reads\n"
    "/dev/null, as ssh -n) and its output back, and exits with its exit status (128+N when\n"
    "signal N killed it; 255 when it could not be run). Works as Open MPI's plm_rsh_agent\n"
    "and MPICH's -launcher-exec.\n";

constexpr int kCannotRun = 255;
constexpr std::size_t kChunk = 65536;
constexpr std::size_t kMaxPending = 1 << 20;  // stdin read ahead of what corrald took

void write_all(int fd, const std::string& data) {
  std::size_t off = 0;
  while (off < data.size()) {
    ssize_t n = ::write(fd, data.data() + off, data.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // the reader went away: the command's status still counts
    off += static_cast<std::size_t>(n);
  }
}

// Reads a chunk of stdin into `out` as an ExecIn frame (the last one with eof); false once stdin
// has ended (or cannot be read: the same to the command).
bool read_stdin(std::string& out) {
  char buf[kChunk];
  ssize_t n;
  while ((n = ::read(0, buf, sizeof buf)) < 0 && errno == EINTR) {
  }
  const bool more = n > 0;
  out += proto::frame(proto::encode(proto::ExecIn{more ? std::string(buf, static_cast<std::size_t>(n)) : "", !more}));
  return more;
}

// Sends the request, then stdin as it comes (the socket is non-blocking: the command's output
// is read meanwhile), and relays the answers until the command's end.
int run_exec(const std::string& socket, const proto::ExecReq& req) {
  int fd = connect_corrald(socket);
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  std::string out = proto::frame(proto::encode(req));
  bool in_open = req.input;
  proto::FrameReader rd;
  std::string frame;
  char buf[kChunk];
  for (;;) {
    pollfd p[2] = {{fd, static_cast<short>(POLLIN | (out.empty() ? 0 : POLLOUT)), 0},
                   {in_open && out.size() < kMaxPending ? 0 : -1, POLLIN, 0}};
    if (::poll(p, 2, -1) < 0 && errno != EINTR) throw std::runtime_error(std::string("poll: ") + std::strerror(errno));
    if (p[1].revents) in_open = read_stdin(out);
    if (!out.empty() && (p[0].revents & (POLLOUT | POLLERR | POLLHUP))) {
      ssize_t n = ::send(fd, out.data(), out.size(), MSG_NOSIGNAL);
      if (n > 0) out.erase(0, static_cast<std::size_t>(n));
      else if (n < 0 && errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK && !(p[0].revents & POLLIN)) {
        ::close(fd);
        throw std::runtime_error(std::string("lost corrald while sending: ") + std::strerror(errno));
      }
    }
    if (!(p[0].revents & (POLLIN | POLLHUP | POLLERR))) continue;
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) continue;
    if (n <= 0) {
      ::close(fd);
      throw std::runtime_error("corrald closed the connection before the command ended");
    }
    rd.feed(buf, static_cast<std::size_t>(n));
    while (rd.next(frame)) {
      proto::Message m = proto::decode(frame);
      if (auto* o = std::get_if<proto::ExecOut>(&m)) {
        write_all(o->stream == 2 ? 2 : 1, o->data);
      } else if (auto* r = std::get_if<proto::ExecRep>(&m)) {
        ::close(fd);
        return r->exit_code;
      } else if (auto* e = std::get_if<proto::ErrorRep>(&m)) {
        ::close(fd);
        throw std::runtime_error(e->message);
      } else {
        ::close(fd);
        throw std::runtime_error("unexpected reply '" + std::string(proto::type_name(m)) + "' from corrald");
      }
    }
  }
}

}  // namespace

int cmd_exec(int argc, char** argv) {
  // Parsed by hand: every word after NODE is the command's, options included.
  std::string socket;
  bool no_input = false;
  int i = 1;
  for (; i < argc && argv[i][0] == '-'; ++i) {
    std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      std::fputs(kExecHelp, stdout);
      return 0;
    }
    if (a == "-n") {
      no_input = true;
    } else if (a == "--socket" && i + 1 < argc) {
      socket = argv[++i];
    } else if (a.rfind("--socket=", 0) == 0) {
      socket = a.substr(9);
    } else if (a == "--") {
      ++i;
      break;
    } else {
      std::fprintf(stderr, "corral exec: unknown option '%s' (see corral exec --help)\n", a.c_str());
      return 2;
    }
  }
  if (argc - i < 2) {
    std::fprintf(stderr, "corral exec: give a node and a command (see corral exec --help)\n");
    return 2;
  }
  proto::ExecReq req;
  req.input = !no_input;
  req.node = argv[i++];
  for (; i < argc; ++i) req.command += (req.command.empty() ? "" : " ") + std::string(argv[i]);
  const char* job = std::getenv("CORRAL_JOBID");
  if (job && *job) {
    char* end = nullptr;
    errno = 0;
    unsigned long long v = std::strtoull(job, &end, 10);
    if (errno == 0 && end && *end == '\0') req.job = v;
  }
  try {
    return run_exec(socket.empty() ? default_socket() : socket, req);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "corral exec: %s\n", e.what());
    return kCannotRun;
  }
}

}  // namespace corral::cli
