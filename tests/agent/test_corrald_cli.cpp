// corrald's command line and config keys, and the commands that run without an agent
// (--help, --export-topology): the real corrald binary (CORRALD from the meson test env).
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "agent/config.hpp"
#include "agent/node/topology.hpp"
#include "harness.hpp"

using corral::agent::Config;
using corral::agent::set_config_key;

namespace {
struct Tmp {
  std::string path;
  Tmp() {
    path = "/tmp/corral-cli-XXXXXX";
    REQUIRE(::mkdtemp(path.data()));
  }
  ~Tmp() { (void)!std::system(("rm -rf '" + path + "'").c_str()); }
};
}  // namespace

TEST_CASE("config: checkpoint_signal by name or number and checkpoint_grace; bad values are clear errors", "[agent]") {
  Config c;
  CHECK(c.checkpoint_signal == SIGUSR1);  // the default
  CHECK(c.checkpoint_grace == 30);
  for (const char* v : {"USR2", "usr2", "SIGUSR2", "12"}) {
    set_config_key(c, "checkpoint_signal", v);
    CHECK(c.checkpoint_signal == SIGUSR2);
  }
  set_config_key(c, "checkpoint_signal", "TERM");
  CHECK(c.checkpoint_signal == SIGTERM);
  set_config_key(c, "checkpoint_signal", "RTMIN+2");
  CHECK(c.checkpoint_signal == SIGRTMIN + 2);
  CHECK(corral::agent::signal_name(SIGRTMIN + 2) == "RTMIN+2");
  CHECK(corral::agent::signal_name(SIGUSR1) == "USR1");
  set_config_key(c, "checkpoint_grace", "5");
  CHECK(c.checkpoint_grace == 5);
  set_config_key(c, "checkpoint_grace", "0");
  CHECK(c.checkpoint_grace == 0);

  CHECK_THROWS_WITH(set_config_key(c, "checkpoint_signal", "USR3"),
                    Catch::Contains("checkpoint_signal: unknown signal 'USR3'"));
  CHECK_THROWS_WITH(set_config_key(c, "checkpoint_signal", "KILL"), Catch::Contains("cannot be caught"));
  CHECK_THROWS_WITH(set_config_key(c, "checkpoint_signal", "9"), Catch::Contains("cannot be caught"));
  CHECK_THROWS_WITH(set_config_key(c, "checkpoint_signal", "STOP"), Catch::Contains("cannot be caught"));
  CHECK_THROWS_WITH(set_config_key(c, "checkpoint_signal", "0"), Catch::Contains("not a signal number"));
  CHECK_THROWS_WITH(set_config_key(c, "checkpoint_signal", "999"), Catch::Contains("not a signal number"));
  CHECK_THROWS_WITH(set_config_key(c, "checkpoint_signal", "12x"), Catch::Contains("not a signal number"));
  CHECK_THROWS_WITH(set_config_key(c, "checkpoint_signal", "RTMIN+99"), Catch::Contains("real-time"));
  CHECK_THROWS_WITH(set_config_key(c, "checkpoint_signal", ""), Catch::Contains("unknown signal"));
  CHECK_THROWS_WITH(set_config_key(c, "checkpoint_grace", "-1"), Catch::Contains("checkpoint_grace: expected an integer >= 0"));
  CHECK_THROWS_WITH(set_config_key(c, "checkpoint_grace", "2.5"), Catch::Contains("checkpoint_grace"));
  CHECK_THROWS_WITH(set_config_key(c, "checkpoint_grace", "9999999"), Catch::Contains("at most"));

  // In a file: the line is named.
  Tmp t;
  std::string f = t.path + "/c.conf";
  std::ofstream(f) << "checkpoint_signal = USR2\ncheckpoint_grace = 7\ncheckpoint_signal = HUPP\n";
  Config c2;
  CHECK_THROWS_WITH(corral::agent::load_config_file(f, c2), Catch::Contains(f + ":3: checkpoint_signal: unknown signal 'HUPP'"));
  CHECK(c2.checkpoint_signal == SIGUSR2);
  CHECK(c2.checkpoint_grace == 7);
}
