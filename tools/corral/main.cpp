// `corral`: the one command for users and admins. Dispatches to subcommands.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "tools/corral/commands.hpp"

namespace {
struct Sub {
  const char* name;
  int (*fn)(int, char**);
  const char* help;
};
constexpr Sub kSubs[] = {
    {"submit", corral::cli::cmd_submit, "submit a job (qsub style); prints its id"},
    {"stat", corral::cli::cmd_stat, "show jobs: corral stat [JOBID] [--json]"},
    {"cancel", corral::cli::cmd_cancel, "cancel a job: corral cancel JOBID"},
    {"wait", corral::cli::cmd_wait, "block until a job ends; exit with its exit code"},
    {"node", corral::cli::cmd_node, "node-local status: corral node [--json]"},
    {"suspend", corral::cli::cmd_control, "freeze a running job until resumed (root)"},
    {"resume", corral::cli::cmd_control, "thaw a suspended job (root)"},
    {"requeue", corral::cli::cmd_control, "stop a running job and queue it again"},
    {"checkpoint", corral::cli::cmd_control, "checkpoint a running job and requeue it"},
    {"sim", corral::cli::cmd_sim, "replay an SWF trace: corral sim TRACE [--policy P]"},
};

void usage(std::FILE* out) {
  std::fprintf(out, "usage: corral COMMAND [options]\n\ncommands:\n");
  for (const Sub& s : kSubs) std::fprintf(out, "  %-10s %s\n", s.name, s.help);
  std::fprintf(out, "\n'corral COMMAND --help' describes each command.\n");
}
}  // namespace

int main(int argc, char** argv) {
  // `corral --socket PATH COMMAND ...`: a global --socket before the command
  // (daemon part); the commands read it from CORRAL_SOCKET.
  while (argc >= 3 && std::string_view(argv[1]) == "--socket") {
    ::setenv("CORRAL_SOCKET", argv[2], 1);
    argc -= 2;
    argv += 2;
  }
  if (argc < 2) {
    usage(stderr);
    return 2;
  }
  std::string_view cmd = argv[1];
  if (cmd == "--help" || cmd == "-h" || cmd == "help") {
    usage(stdout);
    return 0;
  }
  for (const Sub& s : kSubs)
    if (cmd == s.name) return s.fn(argc - 1, argv + 1);
  std::fprintf(stderr, "corral: unknown command '%s'\n\n", argv[1]);
  usage(stderr);
  return 2;
}
