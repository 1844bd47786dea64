// Drawing `corral console`: one function per part of the screen, each writing whole rows
// clipped to the terminal's width. The selected row is marked '>' (and reversed in the pane
// the keys act on) so that it reads in plain text too.
#include "tools/corral/console_draw.hpp"

#include "tools/corral/console_curses.hpp"

#include <algorithm>
#include <cstdio>
#include <string>

#include "proto/spec_check.hpp"
#include "tools/corral/client.hpp"

namespace corral::cli {
namespace {

constexpr int kQueueTextWidth = 66;  // the queue's columns before its time axis

void console_row(int y, const std::string& text, bool selected = false, bool active = false) {
  if (y < 0 || y >= LINES) return;
  move(y, 0);
  clrtoeol();
  if (selected && active) attron(A_REVERSE);
  addnstr(((selected ? "> " : "  ") + text).c_str(), COLS);
  if (selected && active) attroff(A_REVERSE);
}

std::string console_fmt(const char* f, auto... args) {
  char b[512];
  std::snprintf(b, sizeof b, f, args...);
  return b;
}

// "45s", "12m", "3h20m", "2d4h": the length of the time axis.
std::string console_span_text(double s) {
  const long long t = static_cast<long long>(s);
  if (t < 60) return std::to_string(t) + "s";
  if (t < 3600) return std::to_string(t / 60) + "m";
  if (t < 86400) return std::to_string(t / 3600) + "h" + (t % 3600 >= 60 ? std::to_string(t % 3600 / 60) + "m" : "");
  return std::to_string(t / 86400) + "d" + (t % 86400 >= 3600 ? std::to_string(t % 86400 / 3600) + "h" : "");
}

// When a job holds (running) or is planned to hold (pending) its cores: [begin, end); end 0
// when it has no start.
std::pair<double, double> console_interval(const proto::JobInfo& j) {
  const double b = j.state == proto::state::kPending ? j.planned_start : j.start_time;
  if (b <= 0) return {0, 0};
  return {b, b + static_cast<double>(std::max<std::int64_t>(j.walltime, 1))};
}

// The time axis runs from now to the last planned end (ten minutes at least, a week at most).
double console_axis_span(const ConsoleState& s) {
  double span = 600;
  for (const auto& j : s.queue) span = std::max(span, console_interval(j).second - s.now);
  return std::min(span, 7 * 86400.0);
}

// The job's bar: '#' while it runs, '=' where it is planned, '.' elsewhere.
std::string console_bar(const proto::JobInfo& j, double now, double span, int width) {
  const auto [b, e] = console_interval(j);
  const char mark = j.state == proto::state::kPending ? '=' : '#';
  std::string bar(static_cast<std::size_t>(std::max(width, 0)), '.');
  for (int i = 0; i < width; ++i) {
    const double t0 = now + span * i / width, t1 = now + span * (i + 1) / width;
    if (e > 0 && b < t1 && e > t0) bar[static_cast<std::size_t>(i)] = mark;
  }
  return bar;
}

void console_draw_title(const ConsoleState& s) {
  const proto::MeshStatus& m = s.mesh;
  std::string where = m.node.empty()             ? "(corrald has not answered)"
                      : m.state == "standalone"  ? "standalone " + m.node + " (a mesh of one)"
                                                : "mesh " + m.mesh + "  node " + m.node + " (" + m.state + ")";
  std::string coord = m.coordinator.empty() ? "none known (election)" : m.coordinator;
  mvaddnstr(0, 0, console_fmt("corral console  %s  coordinator %s  term %llu  %s", where.c_str(), coord.c_str(),
                              static_cast<unsigned long long>(m.term), clock_time(s.now).c_str()).c_str(), COLS);
  clrtoeol();
  mvaddnstr(1, 0, "Tab pane  j/k move  d/u drain/undrain  h/r hold/release  c cancel  a alloc set  q quit", COLS);
  clrtoeol();
}

int console_draw_nodes(const ConsoleState& s, const ConsoleView& v, int y, int rows) {
  console_row(y++, console_fmt("NODES %-14s %-11s %11s %17s %5s  %s", "", "STATE", "CORES USED", "MEM USED (MB)",
                               "JOBS", "REASON"));
  const int first = std::max(0, v.node_row - rows + 1);
  for (int i = first; i < static_cast<int>(s.nodes.size()) && i < first + rows; ++i) {
    const proto::NodeLine& n = s.nodes[static_cast<std::size_t>(i)];
    console_row(y++, console_fmt("%-20.20s %-11s %5d/%-5d %8lld/%-8lld %5d  %s", proto::printable(n.name).c_str(),
                                 n.state.c_str(), n.cores_used, n.cores, static_cast<long long>(n.mem_used_mb),
                                 static_cast<long long>(n.mem_mb), n.jobs, proto::printable(n.reason).c_str()),
                i == v.node_row, v.pane == ConsolePane::kNodes);
  }
  return y;
}

std::string console_job_text(const proto::JobInfo& j) {
  const bool pending = j.state == proto::state::kPending;
  const std::string when = pending ? (j.planned_start > 0 ? clock_time(j.planned_start) : "-") : clock_time(j.start_time);
  const std::string why = pending ? j.wait_reason : "";
  return console_fmt("%-7llu %-12.12s %-8.8s %-9.9s %4d %-8s %-10.10s", static_cast<unsigned long long>(j.id),
                     proto::printable(j.name).c_str(), proto::printable(j.user).c_str(), j.state.c_str(), j.ncpus,
                     when.c_str(), why.c_str());
}

int console_draw_queue(const ConsoleState& s, const ConsoleView& v, int y, int rows) {
  const int width = std::max(0, COLS - kQueueTextWidth - 3);
  const double span = console_axis_span(s);
  std::string axis = width > 12 ? "now" + std::string(static_cast<std::size_t>(width - 3 - 8), ' ') : "";
  if (!axis.empty()) axis += console_fmt("%8s", ("+" + console_span_text(span)).c_str());
  console_row(y++, console_fmt("QUEUE   %-12s %-8s %-9s %4s %-8s %-10s ", "NAME", "USER", "STATE", "CPUS", "START",
                               "WAITS") + axis);
  const int first = std::max(0, v.job_row - rows + 1);
  for (int i = first; i < static_cast<int>(s.queue.size()) && i < first + rows; ++i) {
    const proto::JobInfo& j = s.queue[static_cast<std::size_t>(i)];
    std::string line = console_job_text(j);
    if (width > 12) line += " " + console_bar(j, s.now, span, width);
    console_row(y++, line, i == v.job_row, v.pane == ConsolePane::kQueue);
  }
  if (s.queue.empty()) console_row(y++, "(no jobs pending or running)");
  return y;
}

int console_draw_projects(const ConsoleState& s, int y, int rows) {
  if (!s.alloc_note.empty()) {
    console_row(y++, "PROJECTS  " + s.alloc_note);
    return y;
  }
  console_row(y++, "PROJECTS  week " + s.alloc.current_week + console_fmt("  %-14s %9s %10s", "", "ALLOCATED", "USED"));
  for (const proto::AllocLine& l : s.alloc.weeks) {
    if (l.week != s.alloc.current_week || rows-- <= 0) continue;
    const int filled = l.allocated > 0 ? std::min(20, static_cast<int>(20 * l.used_slots / l.allocated + 0.5)) : 0;
    console_row(y++, console_fmt("%-26.26s %9d %10.2f  [%s%s]", proto::printable(l.project).c_str(), l.allocated,
                                 l.used_slots, std::string(static_cast<std::size_t>(filled), '#').c_str(),
                                 std::string(static_cast<std::size_t>(20 - filled), '.').c_str()));
  }
  return y;
}

void console_draw_status(const ConsoleState& s, const ConsoleView& v) {
  move(LINES - 1, 0);
  clrtoeol();
  if (!v.prompt.empty()) {
    addnstr((v.prompt + " " + v.input).c_str(), COLS);
    return;
  }
  const std::string line = !s.error.empty() ? "corrald: " + s.error : v.status;
  addnstr(line.c_str(), COLS);
}

}  // namespace

void console_clamp(ConsoleView& v, const ConsoleState& s) {
  v.node_row = std::clamp(v.node_row, 0, std::max(0, static_cast<int>(s.nodes.size()) - 1));
  v.job_row = std::clamp(v.job_row, 0, std::max(0, static_cast<int>(s.queue.size()) - 1));
}

void console_draw(const ConsoleState& s, const ConsoleView& v) {
  erase();
  console_draw_title(s);
  const int body = std::max(3, LINES - 4);  // title, keys, blank above the status line
  const int node_rows = std::clamp(static_cast<int>(s.nodes.size()), 1, std::max(1, body / 4));
  int y = console_draw_nodes(s, v, 3, node_rows) + 1;
  const int project_rows = std::min(5, std::max(1, body / 6));
  const int queue_rows = std::max(1, LINES - 1 - y - project_rows - 3);
  y = console_draw_queue(s, v, y, queue_rows) + 1;
  console_draw_projects(s, y, project_rows);
  console_draw_status(s, v);
  refresh();
}

}  // namespace corral::cli
