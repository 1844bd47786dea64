#include "coordinator/names.hpp"

namespace corral {

std::string join_names(std::span<const std::string_view> names, std::string_view sep) {
  std::string o;
  for (std::string_view n : names) {
    if (!o.empty()) o += sep;
    o += n;
  }
  return o;
}

PolicyPreset policy_preset(Policy p) {
  PolicyPreset s;
  switch (p) {
    case Policy::Fcfs: s.backfill = Backfill::Fcfs; break;
    case Policy::Easy: s.backfill = Backfill::Easy; break;
    case Policy::Conservative: s.backfill = Backfill::Conservative; break;
    case Policy::Reserve: s.backfill = Backfill::Reserve; break;
    case Policy::Checkpoint: s.backfill = Backfill::Checkpoint; break;
    case Policy::Corral:
      // bench/sim/RESULTS.md: each part, added one at a time, lowered the mean
      // bounded slowdown on every trace without lowering utilization.
      s.backfill = Backfill::Checkpoint;
      s.order = Order::Lxf;
      s.aging = 14 * 86400;
      s.aging_wide = 7 * 86400;
      s.wide_fraction = 0.1;
      s.split_factor = 0.1;
      s.preempt = true;
      s.predict = true;
      s.repredict = true;
      break;
  }
  return s;
}

std::optional<std::int64_t> find_duration(std::string_view s) {
  std::size_t i = 0;
  std::int64_t v = 0;
  for (; i < s.size() && s[i] >= '0' && s[i] <= '9'; ++i) {
    v = v * 10 + (s[i] - '0');
    if (v > kMaxDuration) return std::nullopt;
  }
  if (i == 0 || i + 1 < s.size()) return std::nullopt;
  std::int64_t unit = 1;
  if (i < s.size()) {
    switch (s[i]) {
      case 's': unit = 1; break;
      case 'm': unit = 60; break;
      case 'h': unit = 3600; break;
      case 'd': unit = 86400; break;
      case 'w': unit = 7 * 86400; break;
      default: return std::nullopt;
    }
  }
  if (v > kMaxDuration / unit) return std::nullopt;
  return v * unit;
}

std::int64_t parse_duration(std::string_view s) {
  if (auto d = find_duration(s)) return *d;
  throw std::invalid_argument("expected a duration (" + std::string(kDurationGrammar) + "), got '" + std::string(s) +
                              "'");
}

}  // namespace corral
