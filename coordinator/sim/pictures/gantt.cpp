#include "coordinator/sim/pictures/gantt.hpp"

#include <algorithm>
#include <numeric>
#include <unordered_map>
#include <vector>

#include "coordinator/sim/pictures/svg.hpp"

namespace corral::sim {

namespace {

using svg::num;

using svg::kLeft, svg::kTop, svg::kWidth, svg::kRight;
const char* const kCheckpoint = "#d62728";
const char* const kPreempt = "#6a3d9a";

// The rows (processors) of every segment, in the order of r.segments: a
// host's rows are node * cores .. + cores - 1; on a host a run takes the
// lowest rows free at its start. A segment without placement takes the
// lowest free rows anywhere.
std::vector<std::vector<int>> assign_rows(const SimResult& r, int nodes, int cores) {
  std::vector<std::vector<int>> rows(r.segments.size());
  std::vector<std::size_t> order(r.segments.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return r.segments[a].start < r.segments[b].start; });
  std::vector<Time> busy_until(static_cast<std::size_t>(nodes) * static_cast<std::size_t>(cores), -kForever);
  // Takes n rows of [lo, hi): the free ones first, lowest first; if too few
  // are free (a placement the simulator should not have made), the ones
  // freed soonest, so that the overlap shows.
  auto take = [&](std::size_t k, int lo, int hi, int n) {
    const Segment& g = r.segments[k];
    std::vector<int> cand;
    for (int row = lo; row < hi; ++row) cand.push_back(row);
    std::stable_sort(cand.begin(), cand.end(), [&](int a, int b) {
      const bool fa = busy_until[static_cast<std::size_t>(a)] <= g.start;
      const bool fb = busy_until[static_cast<std::size_t>(b)] <= g.start;
      if (fa != fb) return fa;
      return fa ? false : busy_until[static_cast<std::size_t>(a)] < busy_until[static_cast<std::size_t>(b)];
    });
    for (int i = 0; i < n && i < static_cast<int>(cand.size()); ++i) {
      rows[k].push_back(cand[static_cast<std::size_t>(i)]);
      busy_until[static_cast<std::size_t>(cand[static_cast<std::size_t>(i)])] = g.end;
    }
  };
  for (std::size_t k : order) {
    const Segment& g = r.segments[k];
    if (g.placement.empty()) {
      take(k, 0, nodes * cores, g.slots);
    } else {
      for (const Placement& p : g.placement)
        for (std::uint32_t c = 0; c < p.count; ++c) {
          const int node = static_cast<int>(p.node + c);
          if (node < nodes) take(k, node * cores, (node + 1) * cores, static_cast<int>(p.slots));
        }
    }
    std::sort(rows[k].begin(), rows[k].end());
  }
  return rows;
}

// Consecutive runs of sorted rows: (first, count).
std::vector<std::pair<int, int>> row_runs(const std::vector<int>& rows) {
  std::vector<std::pair<int, int>> out;
  for (std::size_t a = 0; a < rows.size();) {
    std::size_t z = a;
    while (z + 1 < rows.size() && rows[z + 1] == rows[z] + 1) ++z;
    out.emplace_back(rows[a], static_cast<int>(z - a + 1));
    a = z + 1;
  }
  return out;
}

// Host names of a run's rows: "n3, n7-n9".
std::string host_list(const std::vector<int>& rows, int cores) {
  std::vector<int> hosts;
  for (int row : rows)
    if (hosts.empty() || hosts.back() != row / cores) hosts.push_back(row / cores);
  std::string o;
  for (std::size_t a = 0; a < hosts.size();) {
    std::size_t z = a;
    while (z + 1 < hosts.size() && hosts[z + 1] == hosts[z] + 1) ++z;
    if (!o.empty()) o += ", ";
    o += "n" + std::to_string(hosts[a]);
    if (z > a) o += "-n" + std::to_string(hosts[z]);
    a = z + 1;
  }
  return o;
}

struct Frame {
  svg::Scale x, y;  // x: seconds since origin; y: rows
  double rowh = 1;
  Time from = 0, to = 1, origin = 0;
  double left() const { return x.p0; }
  double right() const { return x.p1; }
  double top() const { return y.p0; }
  double bottom() const { return y.p1; }
  // Pixels of trace seconds a..b, clipped to the range.
  std::pair<double, double> span(Time a, Time b) const {
    return {x(static_cast<double>(std::clamp(a - origin, from, to))),
            x(static_cast<double>(std::clamp(b - origin, from, to)))};
  }
};

std::string user_colour(long user) {
  const unsigned hue = static_cast<unsigned>((static_cast<unsigned long>(user + 2) * 2654435761UL) % 360UL);
  return "hsl(" + std::to_string(hue) + ",55%,62%)";
}

std::string tooltip(const Segment& g, const JobResult* j, const std::vector<int>& rows, int cores, Time origin) {
  std::string t = "job " + std::to_string(g.id);
  if (j) t += j->user >= 0 ? ", user " + std::to_string(j->user) : ", user unknown";
  t += ", " + std::to_string(g.slots) + (g.slots == 1 ? " proc" : " procs") + " on " + host_list(rows, cores);
  if (j) {
    t += "\nsubmit " + svg::clock_text(j->submit - origin);
    t += ", start " + svg::clock_text(j->first_start - origin);
    t += j->end >= 0 ? ", end " + svg::clock_text(j->end - origin) : ", never ended";
    t += "\nwait " + svg::duration_text(j->first_start - j->submit);
  }
  if (!j || g.start != j->first_start || (j->end >= 0 && g.end != j->end))
    t += "\nthis run " + svg::clock_text(g.start - origin) + " to " + svg::clock_text(g.end - origin);
  if (g.checkpointed) t += "\nended by a checkpoint (requeued, work kept)";
  if (g.requeued) t += "\nended by a preemption (requeued, work lost)";
  if (g.suspended) t += "\nended by a preemption (suspended)";
  if (g.reserved_at >= 0) t += "\nreserved to start at " + svg::clock_text(g.reserved_at - origin);
  return t;
}

void draw_jobs(svg::Doc& d, const SimResult& r, const Frame& f, const std::vector<std::vector<int>>& rows,
               const std::unordered_map<JobId, const JobResult*>& jobs, int cores) {
  const std::string stroke = f.rowh >= 3 ? "stroke=\"#fff\" stroke-width=\"0.6\"" : "";
  for (std::size_t k = 0; k < r.segments.size(); ++k) {
    const Segment& g = r.segments[k];
    if (g.end - f.origin <= f.from || g.start - f.origin >= f.to || rows[k].empty()) continue;
    auto it = jobs.find(g.id);
    const JobResult* j = it == jobs.end() ? nullptr : it->second;
    d.open("g", "class=\"job\" data-job=\"" + std::to_string(g.id) + "\" data-start=\"" + std::to_string(g.start) +
                    "\" data-end=\"" + std::to_string(g.end) + "\" data-procs=\"" + std::to_string(g.slots) + "\"");
    d.title(tooltip(g, j, rows[k], cores, f.origin));
    const auto [x0, x1] = f.span(g.start, g.end);
    const std::string fill = "fill=\"" + user_colour(j ? j->user : -1) + "\" " + stroke;
    for (const auto& [row, n] : row_runs(rows[k]))
      d.rect(x0, f.y(row), x1 - x0, n * f.rowh,
             "class=\"job-run\" data-row=\"" + std::to_string(row) + "\" data-rows=\"" + std::to_string(n) + "\" " +
                 fill);
    d.close("g");
  }
}

// Reservation outlines (on top of the jobs, so that they show over them).
void draw_reservations(svg::Doc& d, const SimResult& r, const Frame& f, const std::vector<std::vector<int>>& rows,
                       const std::unordered_map<JobId, const JobResult*>& jobs) {
  for (std::size_t k = 0; k < r.segments.size(); ++k) {
    const Segment& g = r.segments[k];
    auto it = jobs.find(g.id);
    if (g.reserved_at < 0 || it == jobs.end() || rows[k].empty()) continue;
    const Time end = g.reserved_at + std::max<Time>(1, it->second->estimate);
    if (end - f.origin <= f.from || g.reserved_at - f.origin >= f.to) continue;
    const auto [x0, x1] = f.span(g.reserved_at, end);
    d.open("g", "class=\"reservation\" data-job=\"" + std::to_string(g.id) + "\"");
    d.title("job " + std::to_string(g.id) + ": reserved from " + svg::clock_text(g.reserved_at - f.origin) +
            " for its requested " + svg::duration_text(it->second->estimate) + "; started " +
            svg::clock_text(g.start - f.origin));
    for (const auto& [row, n] : row_runs(rows[k]))
      d.rect(x0, f.y(row), x1 - x0, n * f.rowh,
             "fill=\"none\" stroke=\"#111\" stroke-width=\"1.2\" stroke-dasharray=\"5 3\"");
    d.close("g");
  }
}

// A mark at the end of each segment stopped by a checkpoint or a preemption:
// a bar across its rows and a triangle above them.
void draw_marks(svg::Doc& d, const SimResult& r, const Frame& f, const std::vector<std::vector<int>>& rows) {
  for (std::size_t k = 0; k < r.segments.size(); ++k) {
    const Segment& g = r.segments[k];
    const bool pre = g.requeued || g.suspended;
    if ((!g.checkpointed && !pre) || rows[k].empty()) continue;
    if (g.end - f.origin < f.from || g.end - f.origin > f.to) continue;
    const double x = f.x(static_cast<double>(g.end - f.origin));
    const char* c = g.checkpointed ? kCheckpoint : kPreempt;
    d.open("g", std::string("class=\"mark ") + (g.checkpointed ? "checkpoint" : "preemption") + "\" data-job=\"" +
                    std::to_string(g.id) + "\"");
    d.title("job " + std::to_string(g.id) + (g.checkpointed ? " checkpointed" : g.requeued ? " requeued" : " suspended") +
            " at " + svg::clock_text(g.end - f.origin));
    for (const auto& [row, n] : row_runs(rows[k]))
      d.rect(x - 1.5, f.y(row), 3, n * f.rowh, std::string("fill=\"") + c + "\"");
    const double y = f.y(rows[k].front());
    d.raw("<path d=\"M" + num(x - 5) + " " + num(y - 8) + " h10 l-5 7 z\" fill=\"" + c + "\"/>");
    d.close("g");
  }
}

void draw_legend(svg::Doc& d, double x, double y, std::size_t shown, std::size_t ckpts, std::size_t pre) {
  d.open("g", "class=\"legend\"");
  d.rect(x, y - 10, 22, 12, "fill=\"" + user_colour(3) + "\" stroke=\"#fff\"");
  d.text(x + 28, y, "job run (colour: its user; hover for details)");
  x += 300;
  d.rect(x, y - 10, 22, 12, "fill=\"none\" stroke=\"#111\" stroke-width=\"1.2\" stroke-dasharray=\"5 3\"");
  d.text(x + 28, y, "reservation (promised start, requested time)");
  x += 300;
  d.rect(x + 9, y - 11, 3, 14, std::string("fill=\"") + kCheckpoint + "\"");
  d.text(x + 20, y, "checkpoint");
  x += 100;
  d.rect(x + 9, y - 11, 3, 14, std::string("fill=\"") + kPreempt + "\"");
  d.text(x + 20, y, "preemption");
  x += 100;
  d.rect(x, y - 10, 22, 12, "fill=\"#ececec\" stroke=\"#bbb\"");
  d.text(x + 28, y, "idle");
  d.text(kLeft, y + 20,
         std::to_string(shown) + " job runs, " + std::to_string(ckpts) + " checkpoints, " + std::to_string(pre) +
             " preemptions in this range",
         "start", "fill=\"#444\"");
  d.close("g");
}

std::string heading(const GanttOptions& g) {
  std::string range = "from " + svg::duration_label(g.from) + " to " + svg::duration_label(g.to) +
                      " after the trace's first submit";
  if (g.unix_start > 0)
    range += ": " + svg::utc_text(g.unix_start + g.origin + g.from) + " to " +
             svg::utc_text(g.unix_start + g.origin + g.to);
  else
    range += " (trace seconds " + std::to_string(g.origin + g.from) + " to " + std::to_string(g.origin + g.to) + ")";
  return range;
}

}  // namespace

std::string gantt_svg(const SimResult& r, const GanttOptions& g) {
  const int cores = std::max(1, g.cores_per_node);
  const int nodes = std::max(1, (r.machine_procs + cores - 1) / cores), nrows = nodes * cores;
  Frame f;
  f.origin = g.origin;
  f.from = g.from;
  f.to = g.to > g.from ? g.to : g.from + 1;
  f.rowh = std::clamp(640.0 / nrows, 0.5, 24.0);
  const double height = nrows * f.rowh;
  f.x = {static_cast<double>(f.from), static_cast<double>(f.to), kLeft, kLeft + kWidth};
  f.y = {0, static_cast<double>(nrows), kTop, kTop + height};
  svg::Doc d(kLeft + kWidth + kRight, kTop + height + 110);
  d.text(kLeft, 22, (g.title.empty() ? "" : g.title + ": ") + "who ran where", "start",
         "font-size=\"16\" font-weight=\"bold\"");
  d.text(kLeft, 42, heading(g), "start", "fill=\"#333\"");
  d.rect(kLeft, kTop, kWidth, height, "class=\"plot\" fill=\"#ececec\"");

  // Host ticks far enough apart for their labels.
  const double host_px = f.rowh * cores;
  int step = 1;
  for (int s : {1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000}) {
    step = s;
    if (host_px * s >= 14) break;
  }
  std::vector<svg::Tick> hosts;
  for (int h = 0; h < nodes; h += step)
    hosts.push_back({static_cast<double>(h) * cores + cores / 2.0, "n" + std::to_string(h)});
  svg::y_axis(d, f.y, kLeft, hosts, cores == 1 ? "processor (host)" : "host (" + std::to_string(cores) + " cores each)",
              kLeft);
  svg::x_axis(d, f.x, kTop + height, svg::time_ticks(f.from, f.to, 12),
              "time since the trace's first submit (h: hours, d: days)", kTop);

  const std::vector<std::vector<int>> rows = assign_rows(r, nodes, cores);
  std::unordered_map<JobId, const JobResult*> jobs;
  for (const JobResult& j : r.per_job) jobs.emplace(j.id, &j);
  draw_jobs(d, r, f, rows, jobs, cores);
  draw_reservations(d, r, f, rows, jobs);
  draw_marks(d, r, f, rows);

  std::size_t shown = 0, ckpts = 0, pre = 0;
  for (const Segment& s : r.segments) {
    if (s.end - g.origin <= f.from || s.start - g.origin >= f.to) continue;
    ++shown;
    const bool ends_inside = s.end - g.origin <= f.to;
    ckpts += ends_inside && s.checkpointed;
    pre += ends_inside && (s.requeued || s.suspended);
  }
  if (shown == 0)
    d.text(kLeft + kWidth / 2, kTop + height / 2, "no job ran in this range", "middle", "font-size=\"16\" fill=\"#555\"");
  draw_legend(d, kLeft, kTop + height + 70, shown, ckpts, pre);
  return d.finish();
}

}  // namespace corral::sim
