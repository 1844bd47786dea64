#include "coordinator/sim/pictures/svg.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>

namespace corral::sim::svg {

std::string esc(std::string_view s) {
  std::string o;
  o.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': o += "&amp;"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '"': o += "&quot;"; break;
      default: o += c;
    }
  }
  return o;
}

std::string num(double v) {
  char b[64];
  std::snprintf(b, sizeof b, "%.2f", v);
  std::string s = b;
  while (s.back() == '0') s.pop_back();
  if (s.back() == '.') s.pop_back();
  if (s == "-0") s = "0";
  return s;
}

Doc::Doc(double width, double height) {
  o_ = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + num(width) + "\" height=\"" + num(height) +
       "\" viewBox=\"0 0 " + num(width) + " " + num(height) +
       "\" font-family=\"DejaVu Sans, Verdana, sans-serif\" font-size=\"12\">\n";
  rect(0, 0, width, height, "fill=\"#fff\"");
}

void Doc::rect(double x, double y, double w, double h, std::string_view attrs) {
  // Edges rounded, not sizes: rectangles that meet still meet when written.
  auto r2 = [](double v) { return std::round(v * 100) / 100; };
  o_ += "<rect x=\"" + num(x) + "\" y=\"" + num(y) + "\" width=\"" + num(r2(x + w) - r2(x)) + "\" height=\"" +
        num(r2(y + h) - r2(y)) + "\" ";
  o_ += attrs;
  o_ += "/>\n";
}

void Doc::line(double x1, double y1, double x2, double y2, std::string_view attrs) {
  o_ += "<line x1=\"" + num(x1) + "\" y1=\"" + num(y1) + "\" x2=\"" + num(x2) + "\" y2=\"" + num(y2) + "\" ";
  o_ += attrs;
  o_ += "/>\n";
}

void Doc::text(double x, double y, std::string_view s, std::string_view anchor, std::string_view attrs) {
  o_ += "<text x=\"" + num(x) + "\" y=\"" + num(y) + "\"";
  if (anchor != "start") o_ += " text-anchor=\"" + std::string(anchor) + "\"";
  if (!attrs.empty()) o_ += " " + std::string(attrs);
  o_ += ">" + esc(s) + "</text>\n";
}

void Doc::open(std::string_view tag, std::string_view attrs) {
  o_ += "<" + std::string(tag);
  if (!attrs.empty()) o_ += " " + std::string(attrs);
  o_ += ">";
}

void Doc::close(std::string_view tag) { o_ += "</" + std::string(tag) + ">\n"; }

void Doc::title(std::string_view s) { o_ += "<title>" + esc(s) + "</title>"; }

std::string Doc::finish() { return o_ + "</svg>\n"; }

std::vector<Tick> value_ticks(double lo, double hi, int most, std::string_view suffix) {
  std::vector<Tick> t;
  if (!(hi > lo) || most < 1) return t;
  const double raw = (hi - lo) / most;
  const double p = std::pow(10.0, std::floor(std::log10(raw)));
  double step = 10 * p;
  for (double m : {1.0, 2.0, 5.0})
    if (m * p >= raw) {
      step = m * p;
      break;
    }
  for (double v = std::ceil(lo / step - 1e-9) * step; v <= hi + step * 1e-9; v += step) {
    const double r = std::abs(v) < step * 1e-9 ? 0 : v;
    char b[64];
    std::snprintf(b, sizeof b, "%.*f", step >= 1 ? 0 : static_cast<int>(std::ceil(-std::log10(step))), r);
    t.push_back({r, b + std::string(suffix)});
  }
  return t;
}

std::vector<Tick> time_ticks(Time lo, Time hi, int most) {
  static constexpr Time kSteps[] = {60,    120,   300,   600,    900,    1800,   3600,    7200,    10800,
                                    21600, 43200, 86400, 172800, 604800, 1209600, 2592000, 5184000, 7776000};
  std::vector<Tick> t;
  if (hi <= lo || most < 1) return t;
  Time step = kSteps[std::size(kSteps) - 1];
  for (Time s : kSteps)
    if ((hi - lo) / s <= most) {
      step = s;
      break;
    }
  // Whole weeks and months of days count from 0, not from a week's start.
  Time v = lo >= 0 ? (lo + step - 1) / step * step : -((-lo) / step * step);
  for (; v <= hi; v += step) t.push_back({static_cast<double>(v), duration_label(v)});
  return t;
}

std::string duration_label(Time s) {
  if (s == 0) return "0";
  std::string o = s < 0 ? "-" : "";
  s = std::abs(s);
  const Time d = s / 86400, h = s % 86400 / 3600, m = s % 3600 / 60, x = s % 60;
  auto part = [&](Time v, const char* unit) {
    if (v == 0) return;
    if (o.size() > 1 || (o.size() == 1 && o[0] != '-')) o += ' ';
    o += std::to_string(v) + unit;
  };
  part(d, "d");
  part(h, "h");
  part(m, "m");
  part(x, "s");
  return o;
}

std::string duration_text(Time s) {
  char b[64];
  if (s < 0) s = 0;
  if (s < 60) std::snprintf(b, sizeof b, "%llds", static_cast<long long>(s));
  else if (s < 3600) std::snprintf(b, sizeof b, "%lldm %02llds", static_cast<long long>(s / 60), static_cast<long long>(s % 60));
  else if (s < 86400)
    std::snprintf(b, sizeof b, "%lldh %02lldm", static_cast<long long>(s / 3600), static_cast<long long>(s % 3600 / 60));
  else
    std::snprintf(b, sizeof b, "%lldd %02lldh", static_cast<long long>(s / 86400), static_cast<long long>(s % 86400 / 3600));
  return b;
}

std::string clock_text(Time s) {
  char b[64];
  const long long a = std::abs(s), d = a / 86400, h = a % 86400 / 3600, m = a % 3600 / 60, x = a % 60;
  if (d > 0) std::snprintf(b, sizeof b, "%s%lldd %02lld:%02lld:%02lld", s < 0 ? "-" : "", d, h, m, x);
  else std::snprintf(b, sizeof b, "%s%02lld:%02lld:%02lld", s < 0 ? "-" : "", h, m, x);
  return b;
}

std::string utc_text(std::int64_t epoch) {
  const std::time_t t = static_cast<std::time_t>(epoch);
  std::tm tm{};
  if (gmtime_r(&t, &tm) == nullptr) return "?";
  char b[64];
  std::strftime(b, sizeof b, "%Y-%m-%d %H:%M UTC", &tm);
  return b;
}

namespace {
bool within(const Scale& s, double v) {
  const double lo = std::min(s.v0, s.v1), hi = std::max(s.v0, s.v1), eps = (hi - lo) * 1e-9;
  return v >= lo - eps && v <= hi + eps;
}
std::string range_attrs(const Scale& s, const char* cls) {
  return "class=\"axis " + std::string(cls) + "\" data-min=\"" + num(std::min(s.v0, s.v1)) + "\" data-max=\"" +
         num(std::max(s.v0, s.v1)) + "\"";
}
}  // namespace

void x_axis(Doc& d, const Scale& s, double y, const std::vector<Tick>& ticks, std::string_view title,
            double grid_to) {
  d.open("g", range_attrs(s, "x-axis"));
  d.raw("\n");
  d.line(s.p0, y, s.p1, y, "stroke=\"#333\"");
  for (const Tick& t : ticks) {
    if (!within(s, t.value)) continue;
    const double x = s(t.value);
    d.open("g", "class=\"tick\" data-value=\"" + num(t.value) + "\"");
    if (grid_to != y) d.line(x, grid_to, x, y, "stroke=\"#000\" stroke-opacity=\"0.12\"");
    d.line(x, y, x, y + 5, "stroke=\"#333\"");
    d.text(x, y + 18, t.label, "middle");
    d.close("g");
  }
  d.text((s.p0 + s.p1) / 2, y + 36, title, "middle", "class=\"axis-title\"");
  d.close("g");
}

void y_axis(Doc& d, const Scale& s, double x, const std::vector<Tick>& ticks, std::string_view title,
            double grid_to) {
  d.open("g", range_attrs(s, "y-axis"));
  d.raw("\n");
  d.line(x, s.p0, x, s.p1, "stroke=\"#333\"");
  std::size_t widest = 0;
  for (const Tick& t : ticks) {
    if (!within(s, t.value)) continue;
    const double y = s(t.value);
    widest = std::max(widest, t.label.size());
    d.open("g", "class=\"tick\" data-value=\"" + num(t.value) + "\"");
    if (grid_to != x) d.line(x, y, grid_to, y, "stroke=\"#000\" stroke-opacity=\"0.12\"");
    d.line(x - 5, y, x, y, "stroke=\"#333\"");
    d.text(x - 8, y + 4, t.label, "end");
    d.close("g");
  }
  const double tx = x - 16 - 7.0 * static_cast<double>(widest), ty = (s.p0 + s.p1) / 2;
  d.text(tx, ty, title, "middle",
         "class=\"axis-title\" transform=\"rotate(-90 " + num(tx) + " " + num(ty) + ")\"");
  d.close("g");
}

std::string palette(std::size_t i) {
  // Tableau 10: distinct, and dark enough for white text and thin lines.
  static constexpr const char* kColours[] = {"#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2",
                                             "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"};
  return kColours[i % std::size(kColours)];
}

}  // namespace corral::sim::svg
