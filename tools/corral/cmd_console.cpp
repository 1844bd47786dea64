// corral console: a live terminal view of the mesh (ncurses) with keys for the operator
// commands. Each key sends the command's own request, so corrald judges it as it judges the
// command; its refusal is shown on the status line and the view goes on.
#include "tools/corral/console_curses.hpp"
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>

#include "tools/corral/client.hpp"
#include "tools/corral/commands.hpp"
#include "tools/corral/console_draw.hpp"
#include "tools/corral/console_state.hpp"
#include "tools/corral/reply.hpp"

namespace corral::cli {
namespace {

const char* const kConsoleHelp =
    "usage: corral console [--interval SECONDS] [--socket PATH]\n"
    "A live view of the mesh from this node (refreshed every SECONDS, default 1): nodes,\n"
    "the queue in scheduling order with each job's start and its bar on a time axis, the\n"
    "projects against this week's allocation, the coordinator and its term.\n"
    "Keys: Tab switch between nodes and queue; arrows or j/k move; d drain the node (asks\n"
    "the reason); u undrain it; h hold, r release, c cancel the job (asks to confirm);\n"
    "a alloc set (asks PROJECT WEEK SLOTS); q quit. corrald checks each as the command.\n";

using ConsoleClock = std::chrono::steady_clock;

// ncurses for the lifetime of the console; the terminal is given back however it ends.
struct ConsoleScreen {
  ConsoleScreen() {
    initscr();
    cbreak();
    noecho();
    keypad(stdscr, TRUE);
    curs_set(0);
  }
  ~ConsoleScreen() { endwin(); }
  ConsoleScreen(const ConsoleScreen&) = delete;
  ConsoleScreen& operator=(const ConsoleScreen&) = delete;
};

// Asks on the status line; false when the person pressed Esc. The view stands still meanwhile.
bool console_ask(const ConsoleState& s, ConsoleView& v, const std::string& question, std::string& answer) {
  v.prompt = question;
  v.input.clear();
  timeout(-1);
  bool ok = false;
  for (;;) {
    console_draw(s, v);
    const int ch = getch();
    if (ch == 27) break;
    if (ch == '\n' || ch == '\r' || ch == KEY_ENTER) {
      ok = true;
      break;
    }
    if ((ch == KEY_BACKSPACE || ch == 127 || ch == 8) && !v.input.empty()) v.input.pop_back();
    else if (ch >= 32 && ch < 127 && v.input.size() < 200) v.input.push_back(static_cast<char>(ch));
  }
  answer = v.input;
  v.prompt.clear();
  v.input.clear();
  if (!ok) v.status = "(not done)";
  return ok;
}

const proto::NodeLine* console_node(const ConsoleState& s, const ConsoleView& v) {
  if (v.pane != ConsolePane::kNodes || s.nodes.empty()) return nullptr;
  return &s.nodes[static_cast<std::size_t>(v.node_row)];
}

const proto::JobInfo* console_job(const ConsoleState& s, const ConsoleView& v) {
  if (v.pane != ConsolePane::kQueue || s.queue.empty()) return nullptr;
  return &s.queue[static_cast<std::size_t>(v.job_row)];
}

void console_move(ConsoleView& v, int by) {
  (v.pane == ConsolePane::kNodes ? v.node_row : v.job_row) += by;
}

// A change key on the selected node or job; false when the key is none of them.
bool console_change_key(int ch, const std::string& socket, const ConsoleState& s, ConsoleView& v) {
  std::string answer;
  const proto::NodeLine* node = console_node(s, v);
  const proto::JobInfo* job = console_job(s, v);
  switch (ch) {
    case 'd':
    case 'u':
      if (!node) v.status = "select a node first (Tab to the nodes)";
      else if (ch == 'u') v.status = console_node_admin(socket, node->name, std::string(proto::node_action::kUndrain), "");
      else if (console_ask(s, v, "drain " + node->name + ", reason:", answer))
        v.status = answer.empty() ? "drain needs a reason (not done)" : console_node_admin(socket, node->name, std::string(proto::node_action::kDrain), answer);
      return true;
    case 'h':
    case 'r':
      if (!job) v.status = "select a job first (Tab to the queue)";
      else v.status = console_job_control(socket, job->id, ch == 'h' ? "hold" : "release");
      return true;
    case 'c':
      if (!job) v.status = "select a job first (Tab to the queue)";
      else if (console_ask(s, v, "cancel job " + std::to_string(job->id) + "? (y/n)", answer))
        v.status = answer == "y" || answer == "yes" ? console_cancel(socket, job->id) : "(not cancelled)";
      return true;
    case 'a':
      if (console_ask(s, v, "alloc set PROJECT WEEK SLOTS:", answer)) v.status = console_alloc_set(socket, answer);
      return true;
    default:
      return false;
  }
}

int console_run(const ConsoleArgs& a) {
  if (!::isatty(STDIN_FILENO) || !::isatty(STDOUT_FILENO)) throw std::runtime_error("needs a terminal");
  ConsoleScreen screen;
  ConsoleView v;
  ConsoleState s = console_fetch(a.socket);
  auto last = ConsoleClock::now();
  const auto period = std::chrono::duration<double>(a.interval);
  for (;;) {
    console_clamp(v, s);
    console_draw(s, v);
    timeout(100);
    const int ch = getch();
    bool changed = false;
    if (ch == 'q' || ch == 'Q') return 0;
    if (ch == '\t') v.pane = v.pane == ConsolePane::kNodes ? ConsolePane::kQueue : ConsolePane::kNodes;
    else if (ch == KEY_DOWN || ch == 'j') console_move(v, 1);
    else if (ch == KEY_UP || ch == 'k') console_move(v, -1);
    else if (ch != ERR) changed = console_change_key(ch, a.socket, s, v);
    if (changed || ConsoleClock::now() - last >= period) {
      s = console_fetch(a.socket);
      last = ConsoleClock::now();
    }
  }
}

}  // namespace

int cmd_console(int argc, char** argv) {
  return guarded("console", [&] {
    ConsoleArgs a = parse_console(argc, argv);
    if (a.help) return std::fputs(kConsoleHelp, stdout), 0;
    return console_run(a);
  });
}

}  // namespace corral::cli
