// The names users type and read, each list defined once: scheduling
// policies, queue orders, job end reasons and the duration grammar. `corral
// sim`, corrald's config, the plan file and the commands all parse and print
// through here, so a name means the same everywhere and an unknown one is
// refused with the list of valid ones.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>

#include "coordinator/model.hpp"  // PreemptMode

namespace corral {

// The planner's backfilling algorithm (coordinator/planner/planner.hpp).
enum class Backfill { Fcfs, Easy, Conservative, Reserve, Checkpoint };

// A policy as a user names it: the five textbook planner policies alone
// (FIFO order, requested times, no aging, no preemption), and `corral`,
// Corral's best measured setting (policy_preset below).
enum class Policy { Fcfs, Easy, Conservative, Reserve, Checkpoint, Corral };

// Queue orders (coordinator/planner/order.hpp says what each does).
enum class Order { Fifo, Sjf, Saf, Wfp3, Lxf, Sjbf, Lxbf };

// The simulator's run-time predictors (coordinator/sim/predict.hpp says what
// each does).
enum class Predictor { Mean2, Max3, Similar };

// Why a job (or one run of it) ended, as `corral stat --json`, the journal
// and events spell it.
enum class EndReason { Completed, Failed, Walltime, Memory, Jobfs, Cancelled, Preempted, Checkpointed,
                       LaunchFailed, Rejected, DependencyNeverMet, NodeFail };

// Each list, in enum order.
inline constexpr std::array<std::string_view, 5> kBackfillNames = {"fcfs", "easy", "conservative", "reserve",
                                                                   "checkpoint"};
inline constexpr std::array<std::string_view, 6> kPolicyNames = {"fcfs",    "easy",       "conservative",
                                                                 "reserve", "checkpoint", "corral"};
inline constexpr std::array<std::string_view, 7> kOrderNames = {"fifo", "sjf", "saf", "wfp3", "lxf", "sjbf", "lxbf"};
// How a policy stops a job it preempts (Job::preempt), in enum order.
inline constexpr std::array<std::string_view, 2> kPreemptModeNames = {"requeue", "suspend"};
// Run-time predictors (the simulator's --predictor), in enum order.
inline constexpr std::array<std::string_view, 3> kPredictorNames = {"mean2", "max3", "similar"};
inline constexpr std::array<std::string_view, 12> kEndReasonNames = {
    "completed", "failed", "walltime", "mem", "jobfs", "cancelled", "preempted", "checkpointed", "launch_failed",
    "rejected", "dependency_never_met", "node_fail"};

// What each list is called in an error message, and its names.
template <class E> struct NameList;
template <> struct NameList<Backfill> {
  static constexpr std::string_view what = "policy";
  static constexpr std::span<const std::string_view> names = kBackfillNames;
};
template <> struct NameList<Policy> {
  static constexpr std::string_view what = "policy";
  static constexpr std::span<const std::string_view> names = kPolicyNames;
};
template <> struct NameList<Order> {
  static constexpr std::string_view what = "order";
  static constexpr std::span<const std::string_view> names = kOrderNames;
};
template <> struct NameList<PreemptMode> {
  static constexpr std::string_view what = "preempt mode";
  static constexpr std::span<const std::string_view> names = kPreemptModeNames;
};
template <> struct NameList<Predictor> {
  static constexpr std::string_view what = "predictor";
  static constexpr std::span<const std::string_view> names = kPredictorNames;
};
template <> struct NameList<EndReason> {
  static constexpr std::string_view what = "end reason";
  static constexpr std::span<const std::string_view> names = kEndReasonNames;
};

// "a, b, c": the names of a list joined by `sep`.
std::string join_names(std::span<const std::string_view> names, std::string_view sep = ", ");
template <class E> std::string names_of(std::string_view sep = ", ") { return join_names(NameList<E>::names, sep); }

template <class E> constexpr std::string_view name(E e) { return NameList<E>::names[static_cast<std::size_t>(e)]; }

template <class E> constexpr std::optional<E> find_name(std::string_view s) {
  for (std::size_t i = 0; i < NameList<E>::names.size(); ++i)
    if (NameList<E>::names[i] == s) return static_cast<E>(i);
  return std::nullopt;
}

// The value named `s`; else std::invalid_argument
// "unknown policy 'x' (fcfs, easy, conservative, reserve, checkpoint, corral)".
template <class E> E parse_name(std::string_view s) {
  if (auto e = find_name<E>(s)) return *e;
  throw std::invalid_argument("unknown " + std::string(NameList<E>::what) + " '" + std::string(s) + "' (" +
                              names_of<E>() + ")");
}

// ------------------------------------------------------------- policies --

// What a policy name sets. The textbook policies are their planner policy
// alone; `corral` is checkpoint-based aggressive backfilling (only
// checkpointable jobs are split) with reservations for the head and the next
// two blocked jobs, the queue ordered by largest expansion factor on run
// times predicted from similar jobs (re-predicted as each user's jobs end;
// the prediction orders only, plans use the requested times) and a 2-day
// aging bound, without preemption: the best setting measured on every trace
// with 30 % and with no job checkpointable (bench/sim/RESULTS.md). Options a
// user gives are applied on top of the preset.
struct PolicyPreset {
  Backfill backfill = Backfill::Easy;
  Order order = Order::Fifo;
  std::int64_t aging = 0;       // s; 0: no aging
  std::int64_t aging_wide = 0;  // s; 0: as aging
  int aged_ahead = 0;           // OrderConfig::aged_ahead; 0: every aged job
  double wide_fraction = 0.5;   // OrderConfig's default
  double split_factor = 0.5;    // PlannerConfig::checkpoint_split's default
  int reserve_depth = 1;        // PlannerConfig::reserve_depth's default
  std::int64_t reserve_wait = 0;  // s; PlannerConfig::reserve_wait
  double aging_factor = 0;      // OrderConfig::aging_factor; 0: off
  double reserve_factor = 0;    // PlannerConfig::reserve_factor; 0: off
  bool preempt = false;         // selective preemption (planner/preempt.hpp)
  // Run-time prediction: the simulator only (corrald has no history).
  bool predict = false;
  bool repredict = false;
  Predictor predictor = Predictor::Mean2;  // EASY++
  bool predict_order_only = false;         // false: predictions plan too (EASY++)
};
PolicyPreset policy_preset(Policy p);

// The preempt mode `s` (requeue, suspend); else std::invalid_argument
// "expected requeue or suspend, got 'x'".
PreemptMode parse_preempt_mode(std::string_view s);

// The checkpoint policy's split factor p (PlannerConfig::checkpoint_split): a
// number in (0, 1]; else std::invalid_argument "expected a number in (0, 1],
// got 'x'". corrald's split_factor and `corral sim --split-factor`.
double parse_split_factor(std::string_view s);

// ------------------------------------------------------------ durations --

// Durations in whole seconds: "3600", "90s", "30m", "12h", "7d", "2w".
inline constexpr std::string_view kDurationGrammar = "3600, 90s, 30m, 12h, 7d or 2w";
// At most 2^40 s.
inline constexpr std::int64_t kMaxDuration = std::int64_t{1} << 40;
// nullopt if `s` is not a duration (or above kMaxDuration).
std::optional<std::int64_t> find_duration(std::string_view s);
// The duration `s`; else std::invalid_argument
// "expected a duration (3600, 90s, 30m, 12h, 7d or 2w), got 'x'".
std::int64_t parse_duration(std::string_view s);

// Sizes in MB, rounded up: "512mb", "4gb", "1t", "1500kb", plain bytes "1048576" (as PBS); the
// units b, kb, mb, gb, tb (or k, m, g, t) in any case. Else std::invalid_argument
// "unparsable size 'x' (use e.g. 512mb, 4gb)" (or naming the unknown unit, or a size of 0).
std::int64_t parse_size_mb(std::string_view s);

}  // namespace corral
