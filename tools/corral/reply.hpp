// How a `corral` command turns corrald's replies and its own errors into output and exit codes.
#pragma once

#include <cstdio>
#include <stdexcept>
#include <string>

#include "proto/proto.hpp"
#include "tools/submit/values.hpp"

namespace corral::cli {

// Runs `fn`, turning errors into messages and exit codes (2: bad usage, 1: refused or unreachable).
template <class Fn>
int guarded(const char* cmd, Fn fn) {
  try {
    return fn();
  } catch (const UsageError& e) {
    std::fprintf(stderr, "corral %s: %s\n", cmd, e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "corral %s: %s\n", cmd, e.what());
    return 1;
  }
}

// The reply, or an exception carrying corrald's error text.
template <class T>
T expect(const proto::Message& m) {
  if (auto* e = std::get_if<proto::ErrorRep>(&m)) throw std::runtime_error(e->message);
  if (auto* t = std::get_if<T>(&m)) return *t;
  throw std::runtime_error("unexpected reply '" + std::string(proto::type_name(m)) + "' from corrald");
}

}  // namespace corral::cli
