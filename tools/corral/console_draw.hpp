// The screen of `corral console` (ncurses): the mesh line, the nodes, the queue with each job's
// start and its bar on a time axis, the projects against this week's allocation, the status line.
#pragma once

#include <string>

#include "tools/corral/console_state.hpp"

namespace corral::cli {

enum class ConsolePane { kNodes, kQueue };

// What the person has chosen: the pane the keys act on, the selected row of each, the last
// change's outcome, and a question being answered (prompt "" when none).
struct ConsoleView {
  ConsolePane pane = ConsolePane::kQueue;
  int node_row = 0;
  int job_row = 0;
  std::string status;
  std::string prompt;
  std::string input;
};

// Keeps the selections inside their lists (which change with every refresh).
void console_clamp(ConsoleView& v, const ConsoleState& s);

// Draws the whole screen from `s` and `v` (after initscr).
void console_draw(const ConsoleState& s, const ConsoleView& v);

}  // namespace corral::cli
