// Placeholder until the pba part lands.
#include "coordinator/pba/pba.hpp"
namespace corral {
void pba_stage(const Snapshot&, const PbaConfig&, PassState&, Plan&) {}
}  // namespace corral
