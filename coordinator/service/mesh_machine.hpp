// The mesh state (mesh_state.hpp) as the consensus layer's StateMachine.
#pragma once

#include <functional>

#include "coordinator/service/consensus.hpp"
#include "coordinator/service/mesh_state.hpp"

namespace corral::service {

class MeshMachine final : public StateMachine {
 public:
  // Called after every applied entry (index, bytes, outcome); tests watch the
  // order of applies through it.
  using Observer = std::function<void(std::uint64_t, std::string_view, const Outcome&)>;

  Applied apply(std::uint64_t index, std::string_view entry) override {
    Outcome o = state_.apply_bytes(entry);
    if (observer_) observer_(index, entry, o);
    return Applied{o.ok, o.reason, o.job};
  }
  std::string snapshot() const override { return state_.snapshot(); }
  bool restore(std::string_view bytes) override {
    try {
      state_.restore(bytes);
      return true;
    } catch (const proto::ProtoError&) {
      return false;
    }
  }

  const MeshState& state() const { return state_; }
  void observe(Observer o) { observer_ = std::move(o); }

 private:
  MeshState state_;
  Observer observer_;
};

}  // namespace corral::service
