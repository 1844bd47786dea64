// Reservation planning and backfilling (owned by the planner part).
#pragma once
#include "coordinator/model.hpp"
namespace corral {
enum class Backfill { Fcfs, Easy, Conservative, Reserve, Checkpoint };
struct PlannerConfig {
  Backfill backfill = Backfill::Easy;
};
}  // namespace corral
