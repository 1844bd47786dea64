// The local socket's stream: bytes fed in pieces of the sizes the input's first byte picks, each
// whole frame decoded as corrald decodes a request. Refusals are ProtoError, nothing else.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>

#include "proto/proto.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::size_t piece = std::size_t{data[0]} + 1;
  const char* p = reinterpret_cast<const char*>(data + 1);
  std::size_t left = size - 1;
  corral::proto::FrameReader reader;
  try {
    while (left > 0) {
      const std::size_t n = std::min(piece, left);
      reader.feed(p, n);
      p += n;
      left -= n;
      for (std::string frame; reader.next(frame);) {
        try {
          (void)corral::proto::decode(frame, std::size_t{1} << 16);
        } catch (const corral::proto::ProtoError&) {
        }
      }
    }
  } catch (const corral::proto::ProtoError&) {  // a frame over the limit: the connection closes
  }
  return 0;
}
