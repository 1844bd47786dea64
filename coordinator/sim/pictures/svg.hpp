// A small SVG writer shared by the pictures of a replay: elements appended
// to a string, numbers with at most two decimals, text escaped, and axes
// with readable ticks. Plain SVG 1.1 that browsers and rsvg-convert read.
//
// Axes carry their range and ticks as data attributes (class "axis",
// data-min / data-max; each tick a class "tick" group with data-value) so
// that a test can check a picture without rendering it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "coordinator/model.hpp"

namespace corral::sim::svg {

std::string esc(std::string_view s);  // for text and attribute values
std::string num(double v);            // "12.5", "3", "-0.25"

class Doc {
 public:
  Doc(double width, double height);  // the <svg> element and a white page
  void rect(double x, double y, double w, double h, std::string_view attrs);
  void line(double x1, double y1, double x2, double y2, std::string_view attrs);
  // anchor: "start", "middle" or "end"
  void text(double x, double y, std::string_view s, std::string_view anchor = "start",
            std::string_view attrs = "");
  void open(std::string_view tag, std::string_view attrs = "");
  void close(std::string_view tag);
  void title(std::string_view s);  // the tooltip of the element just opened
  void raw(std::string_view s) { o_ += s; }
  std::string finish();  // the closing </svg>

 private:
  std::string o_;
};

// The page every picture shares: the plot area starts kLeft from the left edge and kTop from the
// top, is kWidth wide, and leaves kRight on its right.
inline constexpr double kLeft = 96, kWidth = 1000, kRight = 24, kTop = 64;

// Maps values v0..v1 to pixels p0..p1 (p1 < p0 for a y axis).
struct Scale {
  double v0 = 0, v1 = 1, p0 = 0, p1 = 1;
  double operator()(double v) const { return p0 + (v - v0) * (p1 - p0) / (v1 - v0); }
};

struct Tick {
  double value = 0;
  std::string label;
};

// Ticks at 1, 2 or 5 x 10^k within [lo, hi], at most about `most` of them.
// `suffix` follows every label ("%", "").
std::vector<Tick> value_ticks(double lo, double hi, int most, std::string_view suffix = "");
// Ticks in seconds within [lo, hi] at a step of minutes, hours or days,
// at most about `most` of them, labelled by duration_label().
std::vector<Tick> time_ticks(Time lo, Time hi, int most);
// "0", "45m", "6h", "1d", "1d 6h", "2d 6h 30m", "6m 40s".
std::string duration_label(Time s);
// "2h 05m", "3d 04h", "45s": a duration to two units, for tooltips and tables.
std::string duration_text(Time s);
// "1d 02:03:04" or "02:03:04": seconds since the trace's first submit.
std::string clock_text(Time s);
// "1996-09-23 12:00 UTC" (epoch seconds).
std::string utc_text(std::int64_t epoch);

// A horizontal axis at pixel y with ticks, tick labels and a title below;
// the ticks outside the scale's range are dropped. `grid_to`, if not y,
// draws light grid lines up to that y.
void x_axis(Doc& d, const Scale& s, double y, const std::vector<Tick>& ticks, std::string_view title,
            double grid_to);
// A vertical axis at pixel x with ticks, labels and a title (rotated) to the
// left; `grid_to`, if not x, draws light grid lines across to that x.
void y_axis(Doc& d, const Scale& s, double x, const std::vector<Tick>& ticks, std::string_view title,
            double grid_to);

// A colour of a categorical palette that stays readable on white.
std::string palette(std::size_t i);

}  // namespace corral::sim::svg
