#include "backends/triton/warp_groups.h"

#include <algorithm>
#include <cctype>
#include <functional>
#include <map>
#include <charconv>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "core/fsutil.h"

namespace kb::triton {
namespace {

// A non-negative decimal integer, or -1 (empty, not digits, or too large): no exceptions on any text.
int to_int(const std::string& s) {
  int v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  return ec == std::errc() && end == s.data() + s.size() && v >= 0 ? v : -1;
}

// The digits at the start of `s` from `at` as a number (to_int's rules).
int digits_at(const std::string& s, size_t at) {
  size_t e = at;
  while (e < s.size() && isdigit((unsigned char)s[e])) ++e;
  return to_int(s.substr(at, e - at));
}

std::string trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && isspace((unsigned char)s[b])) ++b;
  while (e > b && isspace((unsigned char)s[e - 1])) --e;
  return s.substr(b, e - b);
}

// One PTX statement of the entry's body, comments removed. `label` is set on a line that is an LLVM block
// label ($L__...:) or a jump table (JTI...:); inline assembly's own local labels (waitLoop:) are kept as
// plain text, so their loops stay inside the statement stream.
struct Stmt {
  std::string text, label;
};

// The statements of `entry`'s body; empty when the PTX has no such entry.
std::vector<Stmt> entry_body(const std::string& ptx, const std::string& entry) {
  std::vector<Stmt> out;
  // ".entry NAME(" with any blanks between.
  size_t at = std::string::npos;
  for (size_t p = ptx.find(".entry"); p != std::string::npos && at == std::string::npos; p = ptx.find(".entry", p + 6)) {
    size_t q = p + 6;
    while (q < ptx.size() && isspace((unsigned char)ptx[q])) ++q;
    if (q == p + 6 || ptx.compare(q, entry.size(), entry) != 0) continue;
    q += entry.size();
    while (q < ptx.size() && isspace((unsigned char)ptx[q])) ++q;
    if (q < ptx.size() && ptx[q] == '(') at = p;
  }
  if (at == std::string::npos) return out;
  at = ptx.find(')', at);
  if (at == std::string::npos) return out;
  at = ptx.find('{', at);
  if (at == std::string::npos) return out;
  int depth = 0;
  size_t line_start = at + 1;
  for (size_t i = at; i < ptx.size(); ++i) {
    const char c = ptx[i];
    if (c == '{') ++depth;
    else if (c == '}' && --depth == 0) break;
    if (c != '\n') continue;
    std::string line = ptx.substr(line_start, i - line_start);
    line_start = i + 1;
    if (size_t cm = line.find("//"); cm != std::string::npos) line.resize(cm);
    line = trim(line);
    if (line.empty()) continue;
    Stmt s;
    if (line.back() == ':' && (line.rfind("$L__", 0) == 0 || line.rfind("JTI", 0) == 0))
      s.label = line.substr(0, line.size() - 1);
    s.text = line;
    out.push_back(std::move(s));
  }
  return out;
}

// The opcode of a statement ("setmaxnreg.dec.sync.aligned.u32"), without its predicate.
std::string opcode(const std::string& text) {
  std::istringstream in(text);
  std::string w;
  in >> w;
  if (!w.empty() && w[0] == '@') in >> w;
  while (!w.empty() && w.back() == ';') w.pop_back();
  return w;
}

// The operand list of a statement as words ("%r14", "JTI0_0", "256").
std::vector<std::string> operands(const std::string& text) {
  const std::string op = opcode(text);
  std::string rest = text.substr(text.find(op) + op.size());
  std::vector<std::string> out;
  std::string cur;
  for (char c : rest) {
    if (c == ',' || c == ';' || isspace((unsigned char)c)) {
      if (!cur.empty()) out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (!cur.empty()) out.push_back(cur);
  return out;
}

bool predicated(const std::string& text) { return !text.empty() && text[0] == '@'; }

struct Flow {
  std::vector<Stmt> body;
  std::map<std::string, size_t> label_at;                  // label -> statement index
  std::map<std::string, std::vector<std::string>> tables;  // jump table -> its targets in order

  explicit Flow(std::vector<Stmt> b) : body(std::move(b)) {
    for (size_t i = 0; i < body.size(); ++i)
      if (!body[i].label.empty()) label_at[body[i].label] = i;
    // A jump table: "JTI0_0:" then ".branchtargets $L__BB0_6, ...;" on the next lines, or
    // "$L_brx_0: .branchtargets" on one line; its targets run to the ';'.
    for (size_t i = 0; i < body.size(); ++i) {
      const size_t bt = body[i].text.find(".branchtargets");
      if (bt == std::string::npos) continue;
      std::string name = trim(body[i].text.substr(0, bt));
      if (!name.empty() && name.back() == ':') name.pop_back();
      if (name.empty() && i > 0) name = body[i - 1].label;
      std::vector<std::string> targets;
      std::string rest = body[i].text.substr(bt + 14);
      for (size_t j = i; j < body.size() && j < i + 1024; rest = ++j < body.size() ? body[j].text : "") {
        const bool last = rest.find(';') != std::string::npos;
        for (char& c : rest)
          if (c == ',' || c == ';') c = ' ';
        std::istringstream in(rest);
        for (std::string w; in >> w;)
          if (w.rfind("$L__", 0) == 0) targets.push_back(w);
        if (last) break;
      }
      if (!name.empty()) tables[name] = targets;
    }
  }

  // Where control may go after statement i: (next statements, whether it falls through).
  std::vector<size_t> successors(size_t i) const {
    const std::string op = opcode(body[i].text);
    std::vector<size_t> out;
    auto to = [&](const std::string& l) {
      if (auto it = label_at.find(l); it != label_at.end()) out.push_back(it->second);
    };
    bool falls = true;
    if (op == "bra" || op.rfind("bra.", 0) == 0) {
      const auto ops = operands(body[i].text);
      if (!ops.empty() && ops[0].rfind("$L__", 0) == 0) to(ops[0]);
      falls = predicated(body[i].text) || ops.empty() || ops[0].rfind("$L__", 0) != 0;
    } else if (op.rfind("brx.idx", 0) == 0) {
      const auto ops = operands(body[i].text);
      if (ops.size() >= 2)
        if (auto it = tables.find(ops[1]); it != tables.end())
          for (const auto& t : it->second) to(t);
      falls = predicated(body[i].text);
    } else if (op == "ret" || op == "exit" || op == "trap") {
      falls = predicated(body[i].text);
    }
    if (falls && i + 1 < body.size()) out.push_back(i + 1);
    return out;
  }

  // The setmaxnreg values reachable from `from` without passing `stop`, in the order of the text.
  std::vector<int> maxnreg_reachable(size_t from, size_t stop) const {
    std::set<size_t> seen;
    std::vector<size_t> work = {from};
    while (!work.empty()) {
      const size_t i = work.back();
      work.pop_back();
      if (i == stop || !seen.insert(i).second) continue;
      for (size_t n : successors(i)) work.push_back(n);
    }
    std::vector<int> out;
    for (size_t i : seen)
      if (opcode(body[i].text).rfind("setmaxnreg.", 0) == 0)
        if (const auto ops = operands(body[i].text); !ops.empty() && to_int(ops[0]) >= 0) out.push_back(to_int(ops[0]));
    return out;
  }

  // The first setmaxnreg on the straight path from `from` (fall-through first, unconditional branches
  // followed), before `stop`, a return or 64 statements.
  std::optional<int> first_maxnreg(size_t from, size_t stop) const {
    size_t i = from;
    for (int steps = 0; steps < 64 && i < body.size() && i != stop; ++steps) {
      if (opcode(body[i].text).rfind("setmaxnreg.", 0) == 0)
        if (const auto ops = operands(body[i].text); !ops.empty() && to_int(ops[0]) >= 0) return to_int(ops[0]);
      const auto next = successors(i);
      if (next.empty()) return std::nullopt;
      i = next.back() == i + 1 ? i + 1 : next.front();
    }
    return std::nullopt;
  }
};

// The worker warps' dispatch: the statement that loads a warp's partition state (a byte of shared
// memory), and the block each state value goes to. Recognises a jump table on the state (brx.idx) and a
// chain of equality tests (setp.eq ..., STATE, k; @p bra L).
struct Dispatch {
  size_t load = 0;
  std::map<int, std::string> targets;
};

std::optional<Dispatch> find_dispatch(const Flow& f) {
  for (size_t i = 0; i < f.body.size(); ++i) {
    const std::string& t = f.body[i].text;
    const std::string op = opcode(t);
    if (predicated(t) || (op != "ld.shared.b8" && op != "ld.shared.u8" && op != "ld.shared.s8")) continue;
    const auto load_ops = operands(t);
    if (load_ops.empty() || load_ops[0].empty() || load_ops[0][0] != '%') continue;
    const std::string reg = load_ops[0];
    Dispatch d;
    d.load = i;
    std::map<std::string, int> test;  // predicate register -> the state it tests
    for (size_t j = i + 1; j < f.body.size() && j < i + 40; ++j) {
      const std::string op = opcode(f.body[j].text);
      const auto ops = operands(f.body[j].text);
      if (op.rfind("brx.idx", 0) == 0 && ops.size() >= 2 && ops[0] == reg) {
        if (auto it = f.tables.find(ops[1]); it != f.tables.end())
          for (size_t k = 0; k < it->second.size(); ++k) d.targets[int(k)] = it->second[k];
        break;
      }
      if (op.rfind("setp.eq.", 0) == 0 && ops.size() == 3 && ops[1] == reg && to_int(ops[2]) >= 0) {
        test[ops[0]] = to_int(ops[2]);
      } else if ((op == "bra" || op.rfind("bra.", 0) == 0) && predicated(f.body[j].text) && !ops.empty()) {
        std::string p = f.body[j].text.substr(1, f.body[j].text.find_first_of(" \t") - 1);
        if (auto it = test.find(p); it != test.end()) d.targets[it->second] = ops[0];
      } else if (op == "ret" || (op.rfind("bra", 0) == 0 && !predicated(f.body[j].text))) {
        break;
      }
    }
    if (!d.targets.empty()) return d;
  }
  return std::nullopt;
}

// The label of the block holding statement i.
size_t block_start(const Flow& f, size_t i) {
  while (i > 0 && f.body[i].label.empty()) --i;
  return i;
}

int count_ops(const std::vector<Stmt>& body, const std::function<bool(const std::string&)>& match) {
  int n = 0;
  for (const auto& s : body)
    if (s.label.empty() && match(opcode(s.text))) ++n;
  return n;
}

}  // namespace

std::vector<int> ttgir_partition_warps(const std::string& ttgir, int default_warps) {
  // The module's attribute: "ttg.num-warps" = 4 : i32
  if (size_t a = ttgir.find("\"ttg.num-warps\""); a != std::string::npos) {
    a += 15;
    while (a < ttgir.size() && (isspace((unsigned char)ttgir[a]) || ttgir[a] == '=')) ++a;
    if (const int w = digits_at(ttgir, a); w > 0) default_warps = w;
  }
  std::vector<int> out = {default_warps};
  const size_t ws = ttgir.find("ttg.warp_specialize(");
  if (ws == std::string::npos) return out;
  const size_t next = ttgir.find("ttg.warp_specialize(", ws + 1);
  std::istringstream in(ttgir.substr(ws, next == std::string::npos ? std::string::npos : next - ws));
  // Each worker region's header: "partitionN(%arg...: ...) num_warps(W) {".
  std::map<int, int> parts;
  for (std::string line; std::getline(in, line);) {
    const std::string t = trim(line);
    const size_t w = t.rfind("num_warps(");
    if (t.rfind("partition", 0) != 0 || w == std::string::npos) continue;
    const int index = digits_at(t, 9), warps = digits_at(t, w + 10);
    if (index >= 0 && warps > 0 && t.size() > 9 && t[9 + std::to_string(index).size()] == '(') parts[index] = warps;
  }
  for (const auto& [i, w] : parts) out.push_back(w);
  return out;
}

std::vector<std::optional<int>> ptx_partition_maxnreg(const std::string& ptx, const std::string& entry,
                                                      int partitions) {
  std::vector<std::optional<int>> out(std::max(partitions, 1));
  const Flow f(entry_body(ptx, entry));
  if (f.body.empty()) return out;
  if (partitions <= 1) {  // not specialized: whatever the kernel sets, if anything
    for (const auto& s : f.body)
      if (opcode(s.text).rfind("setmaxnreg.", 0) == 0)
        if (const auto ops = operands(s.text); !ops.empty() && to_int(ops[0]) >= 0) {
          out[0] = to_int(ops[0]);
          break;
        }
    return out;
  }
  const auto d = find_dispatch(f);
  if (!d) return out;
  const size_t header = block_start(f, d->load);
  // The default warps: everything reachable from the entry without entering the workers' loop. The first
  // value there is the kernel's own (set at the entry, restored at the end); the default partition runs
  // with the first value that differs from it, or with it when none does.
  const std::vector<int> def = f.maxnreg_reachable(0, header);
  if (!def.empty()) {
    out[0] = def.front();
    for (int v : def)
      if (v != def.front()) {
        out[0] = v;
        break;
      }
  }
  for (int p = 1; p < partitions; ++p) {
    auto it = d->targets.find(p - 1);
    if (it == d->targets.end()) continue;
    auto at = f.label_at.find(it->second);
    if (at != f.label_at.end()) out[p] = f.first_maxnreg(at->second, header);
  }
  return out;
}

WarpGroups read_warp_groups(const std::string& ttgir, const std::string& ptx, const std::string& entry,
                            int default_warps) {
  WarpGroups w;
  w.warps = ttgir_partition_warps(ttgir, default_warps);
  w.maxnreg.assign(w.warps.size(), std::nullopt);
  if (ptx.empty()) return w;
  w.maxnreg = ptx_partition_maxnreg(ptx, entry, int(w.warps.size()));
  const auto body = entry_body(ptx, entry);
  auto starts = [](const std::string& p) { return [p](const std::string& op) { return op.rfind(p, 0) == 0; }; };
  w.mbarriers = count_ops(body, starts("mbarrier.init"));
  w.tma_loads = count_ops(body, [](const std::string& op) {
    return op.rfind("cp.async.bulk.tensor.", 0) == 0 && op.find(".shared::", 0) < op.find(".global");
  });
  w.tma_stores = count_ops(body, [](const std::string& op) {
    return op.rfind("cp.async.bulk.tensor.", 0) == 0 && op.find(".global") < op.find(".shared::");
  });
  w.wgmma = count_ops(body, starts("wgmma.mma_async"));
  w.tcgen05_mma = count_ops(body, starts("tcgen05.mma"));
  w.tcgen05_ops = count_ops(body, starts("tcgen05."));
  return w;
}

std::map<std::string, double> warp_group_metrics(const WarpGroups& w, bool have_ptx) {
  std::map<std::string, double> m;
  m["ws_partitions"] = double(w.warps.size());
  for (size_t i = 0; i < w.warps.size(); ++i) {
    m[fmt::format("ws_p{}_warps", i)] = w.warps[i];
    if (i < w.maxnreg.size() && w.maxnreg[i]) m[fmt::format("ws_p{}_maxnreg", i)] = *w.maxnreg[i];
  }
  if (!have_ptx) return m;
  m["mbarriers"] = w.mbarriers;
  m["tma_loads"] = w.tma_loads;
  m["tma_stores"] = w.tma_stores;
  m["wgmma"] = w.wgmma;
  m["tcgen05_mma"] = w.tcgen05_mma;
  m["tcgen05_ops"] = w.tcgen05_ops;
  return m;
}

std::map<std::string, double> compiled_warp_group_metrics(const std::string& binary_path, const std::string& entry,
                                                          int num_warps) {
  const std::string dir = binary_path.substr(0, binary_path.rfind('/') + 1);
  const std::string ttgir = file_exists(dir + "kernel.ttgir") ? read_file(dir + "kernel.ttgir") : "";
  const std::string ptx = file_exists(dir + "kernel.ptx") ? read_file(dir + "kernel.ptx") : "";
  return warp_group_metrics(read_warp_groups(ttgir, ptx, entry, num_warps), !ptx.empty());
}

}  // namespace kb::triton
