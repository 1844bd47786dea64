#include "coordinator/sim/pictures/timeline.hpp"

#include <algorithm>
#include <vector>

namespace corral::sim {

namespace {

using svg::num;

using svg::kLeft, svg::kWidth, svg::kRight;
constexpr double kPanel = 110, kGap = 18;

// A step line of per-bin values, filled down to the panel's base.
void area(svg::Doc& d, const std::vector<double>& v, const svg::Scale& x, const svg::Scale& y, Time bin,
          const std::string& colour, const std::string& cls) {
  if (v.empty()) return;
  std::string path = "M" + num(x(0)) + " " + num(y(0));
  for (std::size_t i = 0; i < v.size(); ++i) {
    const double yv = y(std::min(v[i], y.v1));
    path += " L" + num(x(static_cast<double>(bin) * static_cast<double>(i))) + " " + num(yv);
    path += " L" + num(x(static_cast<double>(bin) * static_cast<double>(i + 1))) + " " + num(yv);
  }
  path += " L" + num(x(static_cast<double>(bin) * static_cast<double>(v.size()))) + " " + num(y(0)) + " Z";
  d.raw("<path class=\"" + cls + "\" d=\"" + path + "\" fill=\"" + colour + "\" fill-opacity=\"0.35\" stroke=\"" +
        colour + "\" stroke-width=\"1\"/>\n");
}

double mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? 0 : s / static_cast<double>(v.size());
}

// Ticks from 0 up to the first tick at or above hi (the panel's top), "12 k"
// for large values.
std::vector<svg::Tick> count_ticks(double hi) {
  std::vector<svg::Tick> t = svg::value_ticks(0, hi, 4);
  if (t.size() >= 2 && t.back().value < hi) {
    const double v = 2 * t.back().value - t[t.size() - 2].value;
    t.push_back({v, num(v)});
  }
  if (hi >= 10000)
    for (svg::Tick& k : t) k.label = k.value == 0 ? "0" : num(k.value / 1000) + " k";
  return t;
}

// One panel: frame, y axis, vertical grid at the time ticks, the area.
void panel(svg::Doc& d, const Series& s, const std::vector<double>& v, const svg::Scale& x, double y0, double top,
           const std::vector<svg::Tick>& yt, const std::string& ytitle, const std::string& colour,
           const std::string& cls, const std::string& note) {
  const svg::Scale y{0, top, y0 + kPanel, y0};
  d.rect(x.p0, y0, x.p1 - x.p0, kPanel, "fill=\"#fafafa\" stroke=\"#ccc\"");
  for (const svg::Tick& t : svg::time_ticks(0, s.bin * static_cast<Time>(v.size()), 12))
    d.line(x(t.value), y0, x(t.value), y0 + kPanel, "stroke=\"#000\" stroke-opacity=\"0.12\"");
  svg::y_axis(d, y, x.p0, yt, ytitle, x.p1);
  area(d, v, x, y, s.bin, colour, cls);
  d.text(x.p1, y0 - 5, note, "end", "fill=\"#333\"");
}

}  // namespace

QueueScale queue_scale(const Series& s) {
  QueueScale q;
  for (double v : s.queued) q.jobs = std::max(q.jobs, v);
  for (double v : s.queued_ph) q.proc_hours = std::max(q.proc_hours, v);
  return q;
}

QueueScale widest(const QueueScale& a, const QueueScale& b) {
  return {std::max(a.jobs, b.jobs), std::max(a.proc_hours, b.proc_hours)};
}

double draw_timeline(svg::Doc& d, const Series& s, double x, double y, double w, const QueueScale& q,
                     const std::string& label, const std::string& colour, bool labels) {
  const Time span = s.bin * static_cast<Time>(std::max<std::size_t>(1, s.busy.size()));
  const svg::Scale xs{0, static_cast<double>(span), x, x + w};
  d.open("g", "class=\"timeline\" data-label=\"" + svg::esc(label) + "\"");
  d.text(x, y + 12, label, "start", "font-weight=\"bold\"");
  y += 20;
  std::vector<double> pct(s.busy.size());
  for (std::size_t i = 0; i < pct.size(); ++i) pct[i] = s.procs > 0 ? 100.0 * s.busy[i] / s.procs : 0;
  char note[96];
  std::snprintf(note, sizeof note, "mean %.1f %% of %d processors busy", mean(pct), s.procs);
  panel(d, s, pct, xs, y, 100, svg::value_ticks(0, 100, 4, "%"), "busy", colour, "utilization", note);
  y += kPanel + kGap;
  const auto jt = count_ticks(q.jobs);
  std::snprintf(note, sizeof note, "mean %.1f jobs waiting", mean(s.queued));
  panel(d, s, s.queued, xs, y, std::max(q.jobs, jt.empty() ? 1.0 : jt.back().value), jt, "jobs queued",
        colour, "queue-jobs", note);
  y += kPanel + kGap;
  const auto pt = count_ticks(q.proc_hours);
  std::snprintf(note, sizeof note, "mean %.0f processor-hours requested by waiting jobs", mean(s.queued_ph));
  panel(d, s, s.queued_ph, xs, y, std::max(q.proc_hours, pt.empty() ? 1.0 : pt.back().value), pt, "proc-hours queued",
        colour, "queue-proc-hours", note);
  y += kPanel;
  double used = 20 + 3 * kPanel + 2 * kGap;
  if (labels) {
    svg::x_axis(d, xs, y, svg::time_ticks(0, span, 12),
                "time since the trace's first submit (d: days; each step a mean over " + svg::duration_text(s.bin) + ")",
                y);
    used += 44;
  }
  d.close("g");
  return used;
}

std::string timeline_svg(const SimResult& r, const TimelineOptions& t) {
  const Series s = series_of(r, t.bins);
  const double h = 56 + 20 + 3 * kPanel + 2 * kGap + 44 + 8;
  svg::Doc d(kLeft + kWidth + kRight, h);
  std::string title = t.title.empty() ? "" : t.title + ": ";
  title += "utilization and queue over time, policy " + t.policy;
  d.text(kLeft, 22, title, "start", "font-size=\"16\" font-weight=\"bold\"");
  std::string sub = "the whole trace: " + svg::duration_label(s.end() - s.origin) + " from its first submit";
  if (t.unix_start > 0)
    sub += " (" + svg::utc_text(t.unix_start + s.origin) + " to " + svg::utc_text(t.unix_start + s.end()) + ")";
  sub += ", " + std::to_string(r.jobs) + " jobs";
  d.text(kLeft, 42, sub, "start", "fill=\"#333\"");
  draw_timeline(d, s, kLeft, 56, kWidth, queue_scale(s), "", svg::palette(0), true);
  return d.finish();
}

}  // namespace corral::sim
