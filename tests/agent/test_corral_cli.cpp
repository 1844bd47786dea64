// The `corral` command line without an agent: each job command's --help, and
// refusals of unknown options and bad global options (the real binary, CORRAL
// from the meson test env). No socket is ever reached: CORRAL_SOCKET names
// one that does not exist.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "harness.hpp"

namespace {
const std::string kNoSocket = "/nonexistent/corral-cli-test.sock";

harness::Result run_corral(std::vector<std::string> args) {
  args.insert(args.begin(), harness::env_or("CORRAL", "build/tools/corral"));
  return harness::run(args, -1, "", {"CORRAL_SOCKET=" + kNoSocket});
}

const std::vector<std::string> kJobCommands = {"submit", "stat",    "cancel",  "wait",      "node",
                                               "suspend", "resume", "requeue", "checkpoint", "report",
                                               "acct",    "alloc"};
}  // namespace

TEST_CASE("corral CMD --help and -h: the command's usage on stdout, exit 0", "[agent][cli]") {
  for (const std::string& cmd : kJobCommands) {
    for (const char* flag : {"--help", "-h"}) {
      const auto r = run_corral({cmd, flag});
      INFO(cmd << " " << flag << " err: " << r.err);
      CHECK(r.rc == 0);
      CHECK(r.out.rfind("usage: corral " + cmd + " ", 0) == 0);
      CHECK(r.err.empty());
    }
    // --help is answered before anything else on the line is judged.
    const auto first = run_corral({cmd, "--bogus", "--help"});
    INFO(cmd << " --bogus --help err: " << first.err);
    CHECK(first.rc == 0);
    CHECK(first.out.rfind("usage: corral " + cmd + " ", 0) == 0);
  }
  CHECK(run_corral({"submit", "--help"}).out.find("-pe NAME RANGE") != std::string::npos);
  CHECK(run_corral({"stat", "--help"}).out.find("--json") != std::string::npos);
}

TEST_CASE("corral --help, -h and help: every command listed on stdout, exit 0", "[agent][cli]") {
  for (const char* flag : {"--help", "-h", "help"}) {
    const auto r = run_corral({flag});
    INFO(flag);
    CHECK(r.rc == 0);
    CHECK(r.out.rfind("usage: corral ", 0) == 0);
    CHECK(r.err.empty());
    for (const std::string& cmd : kJobCommands) CHECK(r.out.find("\n  " + cmd + " ") != std::string::npos);
    CHECK(r.out.find("\n  sim ") != std::string::npos);
  }
}

TEST_CASE("each job command refuses an unknown option: named, exit 2, nothing on stdout", "[agent][cli]") {
  for (const std::string& cmd : kJobCommands) {
    for (const char* opt : {"--bogus", "-x"}) {
      const auto r = run_corral({cmd, opt, "1"});
      INFO(cmd << " " << opt);
      CHECK(r.rc == 2);
      CHECK(r.err == "corral " + cmd + ": unknown option '" + opt + "' (see corral " + cmd + " --help)\n");
      CHECK(r.out.empty());
    }
    const auto v = run_corral({cmd, "--socket"});
    INFO(cmd << " --socket");
    CHECK(v.rc == 2);
    CHECK(v.err == "corral " + cmd + ": --socket needs a value\n");
  }
  // --json is a flag of stat and node only.
  for (const char* cmd : {"stat", "node"}) {
    const auto r = run_corral({cmd, "--json=yes"});
    CHECK(r.rc == 2);
    CHECK(r.err == std::string("corral ") + cmd + ": --json takes no value\n");
  }
  for (const char* cmd : {"cancel", "wait", "suspend"}) {
    const auto r = run_corral({cmd, "--json", "1"});
    CHECK(r.rc == 2);
    CHECK(r.err.find("unknown option '--json'") != std::string::npos);
  }
}

TEST_CASE("corral itself: no command, an unknown command or option, the global --socket", "[agent][cli]") {
  const auto none = run_corral({});
  CHECK(none.rc == 2);
  CHECK(none.out.empty());
  CHECK(none.err.rfind("usage: corral ", 0) == 0);

  const auto unknown = run_corral({"frob", "1"});
  CHECK(unknown.rc == 2);
  CHECK(unknown.err.rfind("corral: unknown command 'frob'\n", 0) == 0);
  CHECK(unknown.err.find("usage: corral ") != std::string::npos);

  const auto opt = run_corral({"--frob", "stat"});
  CHECK(opt.rc == 2);
  CHECK(opt.err == "corral: unknown option '--frob' (see corral --help)\n");
  const auto bare = run_corral({"--socket"});
  CHECK(bare.rc == 2);
  CHECK(bare.err == "corral: --socket needs a value (see corral --help)\n");

  // The socket asked for is the one tried (and, absent, named): before the
  // command, with '=', or among the command's options.
  const std::string other = "/nonexistent/other.sock";
  for (const auto& args : std::vector<std::vector<std::string>>{{"--socket", other, "stat"},
                                                                {"--socket=" + other, "node"},
                                                                {"wait", "3", "--socket", other},
                                                                {"submit", "--socket=" + other, "--wrap", "true"}}) {
    const auto r = run_corral(args);
    INFO(args[0] << " " << args[1] << " err: " << r.err);
    CHECK(r.rc == 1);
    CHECK(r.err.find("cannot reach corrald at " + other + ":") != std::string::npos);
  }
  const auto env = run_corral({"node"});
  CHECK(env.rc == 1);
  CHECK(env.err.find("cannot reach corrald at " + kNoSocket + ":") != std::string::npos);
}
