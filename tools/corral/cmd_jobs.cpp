// Placeholder until the daemon part lands.
#include <cstdio>
#include "tools/corral/commands.hpp"
namespace corral::cli {
static int nyi(const char* what) {
  std::fprintf(stderr, "corral %s: not built yet\n", what);
  return 1;
}
int cmd_submit(int, char**) { return nyi("submit"); }
int cmd_stat(int, char**) { return nyi("stat"); }
int cmd_cancel(int, char**) { return nyi("cancel"); }
int cmd_wait(int, char**) { return nyi("wait"); }
int cmd_node(int, char**) { return nyi("node"); }
}  // namespace corral::cli
