// CORRAL_MSGPACK_MAP(fields...): msgpack-c's MSGPACK_DEFINE_MAP (a struct encoded as a map of
// its field names), with its decoding member made a template like the other two. msgpack-c
// defines that one as a plain member, so every file that includes a message's header compiled
// the decoders of every field of every message in it (about 2 s a file at -O0); as a template
// it is compiled only where a message is decoded.
#pragma once

#include <msgpack.hpp>

namespace corral::proto::detail {
template <class T, class>
struct dependent {
  using type = T;
};
}  // namespace corral::proto::detail

#define CORRAL_MSGPACK_MAP(...)                                                                   \
  template <typename Packer>                                                                      \
  void msgpack_pack(Packer& msgpack_pk) const {                                                   \
    msgpack::type::make_define_map MSGPACK_DEFINE_MAP_IMPL(__VA_ARGS__).msgpack_pack(msgpack_pk); \
  }                                                                                               \
  template <typename D = void>                                                                    \
  void msgpack_unpack(typename ::corral::proto::detail::dependent<msgpack::object, D>::type const& msgpack_o) { \
    msgpack::type::make_define_map MSGPACK_DEFINE_MAP_IMPL(__VA_ARGS__).msgpack_unpack(msgpack_o); \
  }                                                                                               \
  template <typename MSGPACK_OBJECT>                                                              \
  void msgpack_object(MSGPACK_OBJECT* msgpack_o, msgpack::zone& msgpack_z) const {                \
    msgpack::type::make_define_map MSGPACK_DEFINE_MAP_IMPL(__VA_ARGS__).msgpack_object(msgpack_o, msgpack_z); \
  }
