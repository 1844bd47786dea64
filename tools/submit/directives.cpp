#include "tools/submit/directives.hpp"

#include <algorithm>
#include <array>
#include <exception>
#include <sstream>

#include "proto/spec_check.hpp"
#include "tools/submit/array_values.hpp"
#include "tools/submit/values.hpp"

namespace corral::cli {
namespace {

using Values = std::vector<std::string>;

// One option a directive may hold: its spelling, how many values follow it, what it sets.
struct Option {
  std::string_view name;
  int values;
  void (*apply)(Directives&, const Values&);
};

void set_name(Directives& d, const Values& v) {
  if (v[0].empty()) throw UsageError("-N: the job name is empty");
  d.spec.name = v[0];
}

// Every option a directive may hold, in help order (each the command line's option of the same
// name). -cwd is Grid Engine's "run where submitted": every job does.
constexpr std::array kOptions = {
    Option{"-l", 1, [](Directives& d, const Values& v) { d.have_ncpus |= apply_resources(v[0], d.spec); }},
    Option{"-q", 1, [](Directives& d, const Values& v) { d.spec.queue = v[0]; }},
    Option{"-P", 1, [](Directives& d, const Values& v) { apply_project(d.spec, v[0]); }},
    Option{"-N", 1, set_name},
    Option{"-o", 1, [](Directives& d, const Values& v) { d.spec.stdout_path = v[0]; }},
    Option{"-e", 1, [](Directives& d, const Values& v) { d.spec.stderr_path = v[0]; }},
    Option{"-j", 1, [](Directives& d, const Values& v) { apply_join(d.spec, v[0]); }},
    Option{"-R", 1, [](Directives& d, const Values& v) { d.spec.reserve = yes_no("-R", v[0]); }},
    Option{"-pe", 2, [](Directives& d, const Values& v) { apply_pe(v[0], v[1], d.spec); }},
    Option{"-now", 1, [](Directives& d, const Values& v) { d.spec.immediate = yes_no("-now", v[0]); }},
    Option{"-cwd", 0, [](Directives&, const Values&) {}},
    Option{"-W", 1, [](Directives& d, const Values& v) { apply_w(d.spec, v[0]); }},
    Option{"-J", 1, [](Directives& d, const Values& v) { apply_array(d.spec, "-J", v[0]); }},
    Option{"-t", 1, [](Directives& d, const Values& v) { apply_array(d.spec, "-t", v[0]); }},
    Option{"-tc", 1, [](Directives& d, const Values& v) { apply_task_limit(d.spec, v[0]); }},
    Option{"-hold_jid", 1, [](Directives& d, const Values& v) { apply_hold_jid(d.spec, v[0]); }},
    Option{"--preempt", 1, [](Directives& d, const Values& v) { d.spec.preempt = preempt_choice("--preempt", v[0]); }},
    Option{"-c", 0, [](Directives& d, const Values&) { d.spec.checkpointable = true; }},
    Option{"--checkpointable", 0, [](Directives& d, const Values&) { d.spec.checkpointable = true; }},
};

constexpr std::array<std::string_view, kOptions.size()> option_names() {
  std::array<std::string_view, kOptions.size()> out{};
  for (std::size_t i = 0; i < kOptions.size(); ++i) out[i] = kOptions[i].name;
  return out;
}
constexpr auto kOptionNames = option_names();

std::string known_list() {
  std::string s;
  for (std::string_view n : kOptionNames) s += (s.empty() ? "" : " ") + std::string(n);
  return s;
}

const Option* find(std::string_view name) {
  for (const Option& o : kOptions)
    if (o.name == name) return &o;
  return nullptr;
}

// The words after the prefix when `line` is a directive line; the prefix found in `prefix`.
bool directive_words(std::string_view line, std::string_view& prefix, std::vector<std::string>& words) {
  for (std::string_view p : kDirectivePrefixes) {
    if (line.substr(0, p.size()) != p) continue;
    if (line.size() > p.size() && line[p.size()] != ' ' && line[p.size()] != '\t') continue;
    prefix = p;
    std::istringstream ws{std::string(line.substr(p.size()))};
    for (std::string w; ws >> w;) words.push_back(w);
    return true;
  }
  return false;
}

// Applies one directive line's words. Throws UsageError.
void apply_words(Directives& d, const std::vector<std::string>& words) {
  for (std::size_t i = 0; i < words.size(); ++i) {
    const std::string& w = words[i];
    if (w == "--wrap" || w == "--socket" || w.rfind("--wrap=", 0) == 0 || w.rfind("--socket=", 0) == 0 || w == "-h" ||
        w == "--help")
      throw UsageError(w.substr(0, w.find('=')) + " belongs on the command line");
    if (w.size() < 2 || w[0] != '-') throw UsageError("unexpected word '" + w + "' (a directive holds options only)");
    Values values;
    const Option* o = find(w);
    if (!o && w.rfind("--", 0) == 0 && w.find('=') != std::string::npos) {  // --preempt=suspend
      o = find(std::string_view(w).substr(0, w.find('=')));
      if (o && o->values == 1) values.push_back(w.substr(w.find('=') + 1));
      else o = nullptr;
    }
    if (!o && w[1] != '-') {  // -qexpress, -q=express: a one-letter option's value attached
      o = find(std::string_view(w).substr(0, 2));
      if (o && o->values == 1) values.push_back(w.substr(w[2] == '=' ? 3 : 2));
      else o = nullptr;
    }
    if (!o) throw UsageError("unknown option '" + w + "' (a directive may hold " + known_list() + ")");
    for (int k = static_cast<int>(values.size()); k < o->values; ++k) {
      if (i + 1 >= words.size())
        throw UsageError(std::string(o->name) + (o->values == 2 ? " needs two values" : " needs a value"));
      values.push_back(words[++i]);
    }
    o->apply(d, values);
  }
}

}  // namespace

std::span<const std::string_view> directive_options() { return kOptionNames; }

DirectiveResult parse_directives(std::string_view script, std::string_view file) {
  DirectiveResult r;
  std::size_t number = 0;
  while (!script.empty()) {
    const std::size_t nl = script.find('\n');
    std::string_view line = script.substr(0, nl);
    script = nl == std::string_view::npos ? std::string_view() : script.substr(nl + 1);
    ++number;
    const std::size_t a = line.find_first_not_of(" \t\r");
    if (a == std::string_view::npos) continue;
    line = line.substr(a);
    if (line[0] != '#') break;  // the first command: directives end
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t')) line.remove_suffix(1);
    std::string_view prefix;
    std::vector<std::string> words;
    if (!directive_words(line, prefix, words)) continue;  // a comment
    ++r.directives.lines;
    try {
      apply_words(r.directives, words);
    } catch (const std::exception& e) {
      r.error = std::string(file) + ":" + std::to_string(number) + ": '" + proto::printable(line) + "': " + e.what();
      return r;
    }
  }
  return r;
}

}  // namespace corral::cli
