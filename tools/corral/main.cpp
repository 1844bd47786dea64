// `corral`: the one command for users and admins. Dispatches to subcommands.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "tools/cli_args.hpp"
#include "tools/cli_error.hpp"
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
    {"mesh", corral::cli::cmd_mesh, "the mesh: members, coordinator, term: corral mesh [--json]"},
    {"suspend", corral::cli::cmd_control, "freeze a running job until resumed (root)"},
    {"resume", corral::cli::cmd_control, "thaw a suspended job (root)"},
    {"requeue", corral::cli::cmd_control, "stop a running job and queue it again"},
    {"checkpoint", corral::cli::cmd_control, "checkpoint a running job and requeue it"},
    {"hold", corral::cli::cmd_hold, "keep a pending job from starting until released"},
    {"release", corral::cli::cmd_hold, "let a held job start again"},
    {"qmove", corral::cli::cmd_qmove, "move a pending job to another queue: corral qmove QUEUE JOBID"},
    {"drain", corral::cli::cmd_drain, "start nothing new on a node: corral drain NODE --reason TEXT"},
    {"undrain", corral::cli::cmd_drain, "let a drained node take jobs again"},
    {"nodes", corral::cli::cmd_nodes, "every node: state, cores, memory, jobs: corral nodes [--json]"},
    {"acct", corral::cli::cmd_acct, "ended jobs and runs (sacct): corral acct [--user U] [--since T] [--json]"},
    {"alloc", corral::cli::cmd_alloc, "allocation calendar: corral alloc [set PROJECT WEEK SLOTS...] [--json]"},
    {"console", corral::cli::cmd_console, "live terminal view of the mesh with operator keys: corral console"},
    {"exec", corral::cli::cmd_exec, "from inside a job, run a command on one of its nodes: corral exec NODE CMD"},
    {"keygen", corral::cli::cmd_keygen, "a node's CURVE key pair for the mesh: corral keygen [--out DIR]"},
    {"report", corral::cli::cmd_report, "weekly NCI charging per project: corral report [--week W] [--json]"},
    {"sim", corral::cli::cmd_sim, "replay an SWF trace: corral sim TRACE [--policy P]"},
};

void usage(std::FILE* out) {
  std::fprintf(out, "usage: corral [--socket PATH] COMMAND [options]\n\ncommands:\n");
  for (const Sub& s : kSubs) std::fprintf(out, "  %-10s %s\n", s.name, s.help);
  std::fprintf(out, "\n'corral COMMAND --help' describes each command.\n");
}

// Runs the command named by args[0] with args as its argv; 2 for an unknown one.
int dispatch(std::vector<std::string> args) {
  for (const Sub& s : kSubs) {
    if (args[0] != s.name) continue;
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    return s.fn(static_cast<int>(args.size()), argv.data());
  }
  std::fprintf(stderr, "corral: unknown command '%s'\n\n", args[0].c_str());
  usage(stderr);
  return 2;
}
}  // namespace

int main(int argc, char** argv) {
  // `corral-rsh NODE COMMAND...` is `corral exec NODE COMMAND...`: MPI launchers that take one
  // executable and no arguments of its own (MPICH's -launcher-exec) are given this name.
  const std::string_view self = argc > 0 ? argv[0] : "";
  if (self.substr(self.rfind('/') + 1) == "corral-rsh") {
    std::vector<std::string> args{"exec"};
    args.insert(args.end(), argv + 1, argv + argc);
    return dispatch(args);
  }
  // Options before the command are corral's own; the command and all after it
  // are the command's (prefix_command). A global --socket reaches the
  // commands through CORRAL_SOCKET.
  CLI::App app;
  app.set_help_flag("-h,--help");
  app.add_option_function<std::string>("--socket", [](const std::string& v) { ::setenv("CORRAL_SOCKET", v.c_str(), 1); })
      ->type_name("PATH")
      ->trigger_on_parse();
  app.prefix_command();
  try {
    corral::cli_parse(app, corral::cli_args(argc, argv));
  } catch (const CLI::CallForHelp&) {
    usage(stdout);
    return 0;
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "corral: %s (see corral --help)\n", corral::usage_error(e).c_str());
    return 2;
  }
  const std::vector<std::string> rest = app.remaining();
  if (rest.empty()) {
    usage(stderr);
    return 2;
  }
  if (rest[0] == "help") {
    usage(stdout);
    return 0;
  }
  if (rest[0].size() > 1 && rest[0][0] == '-') {
    std::fprintf(stderr, "corral: unknown option '%s' (see corral --help)\n", rest[0].c_str());
    return 2;
  }
  return dispatch(rest);
}
