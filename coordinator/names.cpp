#include "coordinator/names.hpp"

#include <cctype>
#include <cmath>
#include <cstdlib>

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
      // bench/sim/RESULTS.md, the checkpointable table: with few
      // checkpointable jobs, preemption checkpointed more jobs for no gain;
      // the short aging bound and the reservations beyond the head bound the
      // worst waits, and only the six oldest aged jobs go ahead of the
      // order (a FIFO backlog of aged jobs cost lublin_256 most of its gain);
      // beyond the head only aged jobs get reservations (one for a young
      // job kept cores idle and bought no bound); predictions that only
      // order lose no reservation when a job outlives its prediction; short
      // split windows (0.05 of the request) let checkpointable jobs fill
      // more holes: lower slowdown and idle time than 0.25, checkpointing
      // at most 4.6 % of the jobs.
      s.backfill = Backfill::Checkpoint;
      s.order = Order::Lxf;
      s.aging = 2 * 86400;
      s.aging_wide = 0;
      s.aged_ahead = 6;
      s.wide_fraction = 0.1;
      s.split_factor = 0.05;
      s.reserve_depth = 3;
      s.reserve_wait = 2 * 86400;  // as the aging: reservations for aged jobs only
      s.preempt = false;
      s.predict = true;
      s.repredict = true;
      s.predictor = Predictor::Similar;
      s.predict_order_only = true;
      break;
  }
  return s;
}

PreemptMode parse_preempt_mode(std::string_view s) {
  if (auto m = find_name<PreemptMode>(s)) return *m;
  throw std::invalid_argument("expected " + names_of<PreemptMode>(" or ") + ", got '" + std::string(s) + "'");
}

double parse_split_factor(std::string_view s) {
  const std::string t(s);
  char* end = nullptr;
  const double p = t.empty() ? NAN : std::strtod(t.c_str(), &end);
  if (t.empty() || end != t.c_str() + t.size() || !(p > 0 && p <= 1))
    throw std::invalid_argument("expected a number in (0, 1], got '" + t + "'");
  return p;
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

std::int64_t parse_size_mb(std::string_view text) {
  std::string t(text);
  for (char& c : t) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  std::size_t i = 0;
  while (i < t.size() && t[i] >= '0' && t[i] <= '9') ++i;
  const std::string digits = t.substr(0, i), unit = t.substr(i);
  if (digits.empty() || digits.size() > 12)
    throw std::invalid_argument("unparsable size '" + std::string(text) + "' (use e.g. 512mb, 4gb)");
  const double v = static_cast<double>(std::stoll(digits));
  double mb;
  if (unit.empty() || unit == "b") mb = v / (1024.0 * 1024.0);
  else if (unit == "kb" || unit == "k") mb = v / 1024.0;
  else if (unit == "mb" || unit == "m") mb = v;
  else if (unit == "gb" || unit == "g") mb = v * 1024.0;
  else if (unit == "tb" || unit == "t") mb = v * 1024.0 * 1024.0;
  else
    throw std::invalid_argument("unparsable size '" + std::string(text) + "' (unknown unit '" + unit +
                                "'; use b, kb, mb, gb, tb)");
  if (v <= 0) throw std::invalid_argument("size must be positive, got '" + std::string(text) + "'");
  if (mb > 9.0e15) throw std::invalid_argument("size too large, got '" + std::string(text) + "'");
  return static_cast<std::int64_t>(std::ceil(mb));
}

}  // namespace corral
