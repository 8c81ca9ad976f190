// Fuzz targets over kiln's text parsers: the graph IR and SymInt expressions. Whatever parses must
// print to a text that parses back to the same print.
#include <map>
#include <stdexcept>
#include <string>

#include "core/ir/symint.h"
#include "core/ir/text.h"
#include "core/ir/verifier.h"
#include "core/support/error.h"
#include "fuzz/fuzz_targets.h"

namespace kiln::fuzz {

int ir_text(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::string name;
  Graph graph;
  try {
    graph = parse_graph(text, &name);
  } catch (const Error&) {
    return 0;
  }
  verify_graph(graph);  // a list of problems, never a throw
  const std::string printed = print_graph(graph, name);
  std::string reprinted;
  try {
    std::string name_again;
    const Graph again = parse_graph(printed, &name_again);
    reprinted = print_graph(again, name_again);
  } catch (const Error& e) {
    throw std::logic_error("fuzz ir_text: the printed graph does not parse: " + std::string(e.what()) +
                           "\n" + printed);
  }
  if (reprinted != printed)
    throw std::logic_error("fuzz ir_text: print, parse, print changed the text:\n" + printed + "\n--\n" +
                           reprinted);
  return 0;
}

// The input: an expression, then optionally "\n" and the symbols' values as name=value lines.
int symint(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  const size_t newline = input.find('\n');
  const std::string text = input.substr(0, newline);
  std::map<std::string, int64_t> hints;
  if (newline != std::string::npos) {
    size_t at = newline + 1;
    while (at < input.size()) {
      size_t end = input.find('\n', at);
      if (end == std::string::npos) end = input.size();
      const std::string line = input.substr(at, end - at);
      const size_t eq = line.find('=');
      if (eq != std::string::npos) {
        try {
          hints[line.substr(0, eq)] = std::stoll(line.substr(eq + 1));
        } catch (const std::exception&) {  // not a number: the line is ignored
        }
      }
      at = end + 1;
    }
  }
  SymInt value;
  try {
    value = parse_symint(text, hints);
  } catch (const Error&) {
    return 0;
  }
  const std::string printed = value.str();
  SymInt again;
  try {
    again = parse_symint(printed, hints);
  } catch (const Error& e) {
    throw std::logic_error("fuzz symint: '" + printed + "', printed from '" + text +
                           "', does not parse: " + e.what());
  }
  if (again.str() != printed)
    throw std::logic_error("fuzz symint: '" + text + "' prints as '" + printed + "', which prints as '" +
                           again.str() + "'");
  try {
    if (value.hint() != again.hint())
      throw std::logic_error("fuzz symint: '" + text + "' and its print '" + printed +
                             "' evaluate differently");
  } catch (const Error&) {  // a division by zero at these values is a kiln::Error
  }
  return 0;
}

}  // namespace kiln::fuzz
