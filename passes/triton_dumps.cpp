#include "passes/triton_dumps.h"

#include <map>

#include "core/text.h"

namespace kb {
namespace {

struct Before {
  std::string pass, op, text;
};

// Drops every ` loc(...)` (balanced parentheses, quoted strings skipped) and the `#loc` alias lines.
std::string strip_locations(const std::string& text) {
  std::string out;
  for (const auto& l : lines_of(text)) {
    if (l.rfind("#loc", 0) == 0) continue;
    std::string kept;
    for (size_t i = 0; i < l.size();) {
      if (l.compare(i, 5, " loc(") == 0) {
        int depth = 0;
        bool quoted = false;
        size_t j = i + 4;
        for (; j < l.size(); ++j) {
          if (l[j] == '"' && l[j - 1] != '\\') quoted = !quoted;
          if (quoted) continue;
          if (l[j] == '(') ++depth;
          else if (l[j] == ')' && --depth == 0) break;
        }
        i = j + 1;
        continue;
      }
      kept += l[i++];
    }
    out += kept + "\n";
  }
  return out;
}

}  // namespace

std::vector<IrDump> split_triton_dumps(const std::string& log) {
  const std::string mlir_head = "// -----// IR Dump Before ";
  std::vector<Before> befores;
  std::string llvm;  // the LLVM dumps, headers without their "; " for split_ir_dumps
  enum { none, mlir, llvm_dump } in = none;
  for (const auto& line : lines_of(log)) {
    if (line.rfind(mlir_head, 0) == 0) {
      std::string rest = line.substr(mlir_head.size());
      Before b;
      const size_t op = rest.find(" ('");
      b.pass = op == std::string::npos ? rest : rest.substr(0, op);
      if (op != std::string::npos) {
        const size_t end = rest.find('\'', op + 3);
        b.op = rest.substr(op + 3, end == std::string::npos ? std::string::npos : end - op - 3);
      }
      befores.push_back(std::move(b));
      in = mlir;
      continue;
    }
    if (line.rfind("; *** IR Dump", 0) == 0 || line.rfind("*** IR Dump", 0) == 0) {
      llvm += (line[0] == ';' ? line.substr(2) : line) + "\n";
      in = llvm_dump;
      continue;
    }
    if (line.rfind("// -----//", 0) == 0) {  // the pipeliner's internal dumps and other markers: not a pass
      in = none;
      continue;
    }
    if (in == mlir) befores.back().text += line + "\n";
    else if (in == llvm_dump) llvm += line + "\n";
  }
  std::vector<IrDump> out;
  std::map<std::pair<std::string, std::string>, int> seen;
  for (size_t i = 0; i + 1 < befores.size(); ++i) {
    IrDump d;
    d.pass = befores[i].pass;
    d.unit = "mlir " + befores[i].op;
    d.occurrence = seen[{d.pass, d.unit}]++;
    d.text = strip_locations(befores[i + 1].text);
    out.push_back(std::move(d));
  }
  for (auto& d : split_ir_dumps(llvm)) out.push_back(std::move(d));
  return out;
}

}  // namespace kb
