// JSON as Corral prints it: one line, and text that is not valid UTF-8 (a
// trace's or a user's bytes) shown as U+FFFD instead of throwing.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace corral {

// For nlohmann::json and nlohmann::ordered_json alike.
template <class Json>
std::string json_text(const Json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace corral
