// Placeholder until the nci part lands.
#include "coordinator/nci/nci.hpp"
namespace corral {
void nci_stage(const Snapshot&, const NciConfig&, std::uint64_t, PassState&, Plan&) {}
}  // namespace corral
