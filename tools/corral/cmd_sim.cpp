// Placeholder until the sim part lands.
#include <cstdio>
#include "tools/corral/commands.hpp"
namespace corral::cli {
int cmd_sim(int, char**) {
  std::fprintf(stderr, "corral sim: not built yet\n");
  return 1;
}
}  // namespace corral::cli
