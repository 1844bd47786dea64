#include "coordinator/sim/pictures/compare.hpp"

#include <algorithm>
#include <cstdio>
#include <functional>

#include "coordinator/sim/pictures/series.hpp"
#include "coordinator/sim/pictures/svg.hpp"
#include "coordinator/sim/pictures/timeline.hpp"

namespace corral::sim {

namespace {

using svg::num;

using svg::kLeft, svg::kWidth, svg::kRight, svg::kTop;
constexpr double kBars = 170;

struct Figure {
  std::string name;
  std::function<double(const SimResult&)> value;
  std::string unit;     // after each tick label
  int decimals = 0;     // of the value printed over a bar
};

// A wait figure in the unit that keeps the longest one's number readable.
Figure wait_figure(const std::vector<PolicyRun>& runs, const std::string& name,
                   std::function<double(const SimResult&)> seconds) {
  double longest = 0;
  for (const PolicyRun& p : runs) longest = std::max(longest, seconds(p.result));
  const double div = longest >= 2 * 86400 ? 86400 : longest >= 2 * 3600 ? 3600 : 60;
  const std::string unit = div == 86400 ? "d" : div == 3600 ? "h" : "m";
  return {name + " (" + unit + ")", [seconds, div](const SimResult& r) { return seconds(r) / div; }, unit, 1};
}

// One group: a y axis of its own, a bar a policy with its value above.
void group(svg::Doc& d, const std::vector<PolicyRun>& runs, const Figure& f, double x, double w, double y) {
  double hi = 0;
  for (const PolicyRun& p : runs) hi = std::max(hi, f.value(p.result));
  std::vector<svg::Tick> ticks = svg::value_ticks(0, hi > 0 ? hi * 1.1 : 1, 4, f.unit);
  const double top = std::max(hi > 0 ? hi * 1.1 : 1, ticks.empty() ? 1 : ticks.back().value);
  const svg::Scale ys{0, top, y + kBars, y};
  const double ax = x + 52, bw = (w - 64) / static_cast<double>(runs.size());
  d.open("g", "class=\"bars\" data-figure=\"" + svg::esc(f.name) + "\"");
  svg::y_axis(d, ys, ax, ticks, "", ax + bw * static_cast<double>(runs.size()));
  d.line(ax, y + kBars, ax + bw * static_cast<double>(runs.size()), y + kBars, "stroke=\"#333\"");
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const double v = f.value(runs[i].result), bx = ax + bw * static_cast<double>(i) + bw * 0.12;
    char label[64];
    std::snprintf(label, sizeof label, "%.*f", f.decimals, v);
    d.open("g", "class=\"bar\" data-policy=\"" + svg::esc(runs[i].policy) + "\" data-value=\"" + num(v) + "\"");
    d.title(runs[i].policy + ": " + f.name + " " + label + f.unit);
    d.rect(bx, ys(v), bw * 0.76, ys(0) - ys(v), "fill=\"" + svg::palette(i) + "\"");
    d.text(bx + bw * 0.38, ys(v) - 4, label, "middle", "font-size=\"11\"");
    d.close("g");
  }
  d.text(ax + bw * static_cast<double>(runs.size()) / 2, y + kBars + 20, f.name, "middle", "font-weight=\"bold\"");
  d.close("g");
}

std::vector<Figure> figures(const std::vector<PolicyRun>& runs) {
  return {
      wait_figure(runs, "mean wait", [](const SimResult& r) { return r.mean_wait; }),
      wait_figure(runs, "max wait", [](const SimResult& r) { return static_cast<double>(r.max_wait); }),
      {"mean bounded slowdown", [](const SimResult& r) { return r.mean_bsld; }, "", 1},
      {"utilization", [](const SimResult& r) { return 100 * r.utilization; }, "%", 1},
      {"checkpoints", [](const SimResult& r) { return static_cast<double>(r.checkpoints); }, "", 0},
  };
}

}  // namespace

std::string compare_svg(const std::vector<PolicyRun>& runs, const CompareOptions& o) {
  std::vector<Series> series;
  QueueScale q;
  for (const PolicyRun& p : runs) {
    series.push_back(series_of(p.result, o.bins));
    q = widest(q, queue_scale(series.back()));
  }
  const double block = 20 + 3 * 110 + 2 * 18 + 24;
  const double height = kTop + 30 + kBars + 50 + block * static_cast<double>(runs.size()) + 44 + 16;
  svg::Doc d(kLeft + kWidth + kRight, height);
  std::string title = o.title.empty() ? "" : o.title + ": ";
  std::string names;
  for (const PolicyRun& p : runs) names += (names.empty() ? "" : ", ") + p.policy;
  d.text(kLeft, 22, title + "policies side by side (" + names + ")", "start", "font-size=\"16\" font-weight=\"bold\"");
  std::string sub = runs.empty() ? "" : std::to_string(runs.front().result.jobs) + " jobs";
  if (!series.empty() && o.unix_start > 0)
    sub += ", " + svg::utc_text(o.unix_start + series.front().origin) + " to " +
           svg::utc_text(o.unix_start + series.front().end());
  d.text(kLeft, 42, sub + "; waits and slowdown: lower is better", "start", "fill=\"#333\"");
  // Legend: a swatch a policy.
  double lx = kLeft;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    d.rect(lx, kTop - 6, 14, 14, "fill=\"" + svg::palette(i) + "\"");
    d.text(lx + 20, kTop + 6, runs[i].policy);
    lx += 40 + 8.0 * static_cast<double>(runs[i].policy.size());
  }
  const std::vector<Figure> figs = figures(runs);
  const double gw = kWidth / static_cast<double>(figs.size());
  for (std::size_t k = 0; k < figs.size(); ++k)
    if (!runs.empty()) group(d, runs, figs[k], kLeft - 52 + gw * static_cast<double>(k), gw, kTop + 30);
  double y = kTop + 30 + kBars + 50;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const bool last = i + 1 == runs.size();
    d.rect(kLeft - 90, y + 2, 8, block - 30, "fill=\"" + svg::palette(i) + "\"");
    y += draw_timeline(d, series[i], kLeft, y, kWidth, q, "policy " + runs[i].policy, svg::palette(i), last);
    if (!last) y += 24;
  }
  return d.finish();
}

}  // namespace corral::sim
