// A tiny PNG reader for the rendering tests: 8-bit RGB or RGBA, not
// interlaced (what rsvg-convert writes), decoded with zlib into pixels.
#pragma once

#include <zlib.h>

#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

namespace corral_test {

struct Image {
  std::uint32_t width = 0, height = 0;
  std::vector<std::uint8_t> rgba;  // 4 bytes a pixel, rows top to bottom
};

inline std::uint32_t be32(const std::string& s, std::size_t p) {
  return (std::uint32_t(std::uint8_t(s[p])) << 24) | (std::uint32_t(std::uint8_t(s[p + 1])) << 16) |
         (std::uint32_t(std::uint8_t(s[p + 2])) << 8) | std::uint32_t(std::uint8_t(s[p + 3]));
}

inline Image read_png(const std::string& png) {
  if (png.size() < 8 || png.compare(0, 8, "\x89PNG\r\n\x1a\n") != 0) throw std::runtime_error("not a PNG");
  Image img;
  int channels = 0;
  std::string idat;
  for (std::size_t p = 8; p + 8 <= png.size();) {
    const std::uint32_t len = be32(png, p);
    const std::string type = png.substr(p + 4, 4);
    if (p + 12 + len > png.size()) throw std::runtime_error("truncated PNG chunk " + type);
    if (type == "IHDR") {
      img.width = be32(png, p + 8);
      img.height = be32(png, p + 12);
      const int depth = std::uint8_t(png[p + 16]), colour = std::uint8_t(png[p + 17]), lace = std::uint8_t(png[p + 20]);
      if (depth != 8 || (colour != 2 && colour != 6) || lace != 0)
        throw std::runtime_error("PNG format not read here (depth " + std::to_string(depth) + ", colour type " +
                                 std::to_string(colour) + ")");
      channels = colour == 6 ? 4 : 3;
    } else if (type == "IDAT") {
      idat += png.substr(p + 8, len);
    }
    p += 12 + len;
  }
  if (channels == 0) throw std::runtime_error("PNG without IHDR");
  const std::size_t stride = std::size_t(img.width) * channels;
  std::vector<std::uint8_t> raw((stride + 1) * img.height);
  uLongf n = raw.size();
  if (uncompress(raw.data(), &n, reinterpret_cast<const Bytef*>(idat.data()), idat.size()) != Z_OK || n != raw.size())
    throw std::runtime_error("PNG data does not inflate to its size");
  std::vector<std::uint8_t> prev(stride, 0), cur(stride);
  img.rgba.reserve(std::size_t(img.width) * img.height * 4);
  for (std::uint32_t y = 0; y < img.height; ++y) {
    const std::uint8_t f = raw[y * (stride + 1)];
    const std::uint8_t* in = &raw[y * (stride + 1) + 1];
    for (std::size_t x = 0; x < stride; ++x) {
      const int a = x >= std::size_t(channels) ? cur[x - channels] : 0, b = prev[x],
                c = x >= std::size_t(channels) ? prev[x - channels] : 0;
      int pred = 0;
      switch (f) {
        case 0: pred = 0; break;
        case 1: pred = a; break;
        case 2: pred = b; break;
        case 3: pred = (a + b) / 2; break;
        case 4: {
          const int pa = std::abs(b - c), pb = std::abs(a - c), pc = std::abs(a + b - 2 * c);
          pred = pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
          break;
        }
        default: throw std::runtime_error("bad PNG filter " + std::to_string(f));
      }
      cur[x] = std::uint8_t(in[x] + pred);
    }
    for (std::uint32_t x = 0; x < img.width; ++x) {
      for (int k = 0; k < 3; ++k) img.rgba.push_back(cur[x * channels + k]);
      img.rgba.push_back(channels == 4 ? cur[x * channels + 3] : 255);
    }
    prev.swap(cur);
  }
  return img;
}

}  // namespace corral_test
