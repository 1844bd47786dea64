// Reading the simulator's SVG pictures back in tests: every element with
// its attributes and the element it sits in (enough for the plain SVG the
// program writes: no CDATA, no comments, attributes in double quotes).
#pragma once

#include <cstdlib>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace corral_test {

struct Element {
  std::string tag;
  std::map<std::string, std::string> attr;
  int parent = -1;      // index of the enclosing element, -1 for the root
  std::string text;     // the text directly inside (a <title>'s tooltip)
  bool has(const std::string& k) const { return attr.count(k) > 0; }
  std::string get(const std::string& k) const {
    auto it = attr.find(k);
    return it == attr.end() ? "" : it->second;
  }
  double num(const std::string& k) const { return std::strtod(get(k).c_str(), nullptr); }
  // Class lists are space-separated.
  bool is(const std::string& cls) const { return (" " + get("class") + " ").find(" " + cls + " ") != std::string::npos; }
};

inline std::string unescape(std::string s) {
  const std::pair<const char*, const char*> ents[] = {{"&lt;", "<"}, {"&gt;", ">"}, {"&quot;", "\""}, {"&amp;", "&"}};
  for (const auto& [e, c] : ents)
    for (std::size_t p; (p = s.find(e)) != std::string::npos;) s.replace(p, std::string(e).size(), c);
  return s;
}

// The elements in document order; throws std::runtime_error on a tag that
// does not close, a close without its open, or an unterminated tag.
inline std::vector<Element> read_svg(const std::string& svg) {
  std::vector<Element> out;
  std::vector<int> open;
  std::size_t i = 0;
  while ((i = svg.find('<', i)) != std::string::npos) {
    const std::size_t end = svg.find('>', i);
    if (end == std::string::npos) throw std::runtime_error("unterminated tag at " + std::to_string(i));
    std::string tag = svg.substr(i + 1, end - i - 1);
    // Text since the previous tag belongs to the innermost open element.
    if (tag.empty()) throw std::runtime_error("empty tag");
    if (tag[0] == '/') {
      if (open.empty() || out[static_cast<std::size_t>(open.back())].tag != tag.substr(1))
        throw std::runtime_error("unmatched </" + tag.substr(1) + ">");
      open.pop_back();
      i = end + 1;
      continue;
    }
    const bool self_close = tag.back() == '/';
    if (self_close) tag.pop_back();
    Element e;
    std::size_t k = tag.find_first_of(" \n\t");
    e.tag = tag.substr(0, k);
    while (k != std::string::npos && k < tag.size()) {
      const std::size_t eq = tag.find("=\"", k);
      if (eq == std::string::npos) break;
      const std::size_t q = tag.find('"', eq + 2);
      if (q == std::string::npos) throw std::runtime_error("unterminated attribute in <" + e.tag + ">");
      std::string name = tag.substr(k, eq - k);
      name.erase(0, name.find_first_not_of(" \n\t"));
      e.attr[name] = unescape(tag.substr(eq + 2, q - eq - 2));
      k = q + 1;
    }
    e.parent = open.empty() ? -1 : open.back();
    out.push_back(e);
    if (!self_close) {
      open.push_back(static_cast<int>(out.size() - 1));
      const std::size_t next = svg.find('<', end);
      out.back().text = unescape(svg.substr(end + 1, next == std::string::npos ? std::string::npos : next - end - 1));
    }
    i = end + 1;
  }
  if (!open.empty()) throw std::runtime_error("<" + out[static_cast<std::size_t>(open.back())].tag + "> not closed");
  return out;
}

}  // namespace corral_test
