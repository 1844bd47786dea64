// The directives at the top of a job script, as qsub reads them: Corral's own "#CORRAL"
// lines, PBS's "#PBS" lines and Grid Engine's "#$" lines, each holding submit options. They
// are read up to the first line that is neither blank nor a comment (the "#!" line is one).
// One grammar for the three prefixes; the values go through the command line's own parsers
// (values.hpp). Pure: text in, options or an error out, no I/O (a fuzz target reads it).
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "proto/proto.hpp"

namespace corral::cli {

// The prefixes a directive line starts with (then a blank).
inline constexpr std::string_view kDirectivePrefixes[] = {"#CORRAL", "#PBS", "#$"};

// What a script's directives ask for.
struct Directives {
  proto::JobSpec spec;       // only the options' fields; no script, cwd or environment
  bool have_ncpus = false;   // a -l ...ncpus=... among them (-pe names the cpu count too)
  std::size_t lines = 0;     // directive lines read
};

struct DirectiveResult {
  Directives directives;
  // "" when every directive was understood; else "FILE:LINE: 'TEXT': why" for the first one
  // that was not.
  std::string error;
  bool ok() const { return error.empty(); }
};

// The directives of `script` (named `file` in errors). Never throws on any text.
DirectiveResult parse_directives(std::string_view script, std::string_view file);

// The options a directive may hold ("-l", "-pe", "--preempt", ...), for help and errors.
std::span<const std::string_view> directive_options();

}  // namespace corral::cli
