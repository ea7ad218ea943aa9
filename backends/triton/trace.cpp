// Reading tritonparse traces: events, compilations, launches, de-duplication and the choice of one
// compilation. The event format is tritonparse's structured_logging.py (0.1 to 0.6): one JSON object per
// line with `event_type`; a compilation's fields are under `payload` (metadata, python_source,
// file_content), a launch's at the top level (grid, compilation_metadata, extracted_args).
#include "backends/triton/trace.h"

#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <zlib.h>

#include "backends/triton/pysource.h"
#include "core/error.h"
#include "core/fsutil.h"

namespace kb::triton {
namespace {

using json = nlohmann::ordered_json;

// tritonparse's gzip mode writes one gzip member per event: inflate member after member. A cut-off last
// member keeps what was inflated before it and says so.
std::string gunzip(const std::string& path, const std::string& data, std::vector<std::string>& warnings) {
  std::string out;
  z_stream zs{};
  if (inflateInit2(&zs, 16 + MAX_WBITS) != Z_OK) throw InputError(fmt::format("{}: cannot start gzip inflate", path));
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  zs.avail_in = static_cast<uInt>(data.size());
  char buf[1 << 16];
  while (true) {
    zs.next_out = reinterpret_cast<Bytef*>(buf);
    zs.avail_out = sizeof buf;
    const int rc = inflate(&zs, Z_NO_FLUSH);
    out.append(buf, sizeof buf - zs.avail_out);
    if (rc == Z_STREAM_END) {
      if (zs.avail_in == 0) break;
      inflateReset(&zs);  // the next member
      continue;
    }
    if (rc == Z_OK) continue;
    if (rc == Z_BUF_ERROR && zs.avail_in == 0) {
      warnings.push_back(fmt::format("{}: the gzip data ends inside a member (a truncated trace): kept the {} bytes "
                                     "before it", path, out.size()));
      break;
    }
    inflateEnd(&zs);
    if (out.empty()) throw InputError(fmt::format("{}: not a valid gzip stream ({})", path, zs.msg ? zs.msg : "corrupt"));
    warnings.push_back(fmt::format("{}: corrupt gzip data after {} bytes ({}): kept what came before", path, out.size(),
                                   zs.msg ? zs.msg : "corrupt"));
    return out;
  }
  inflateEnd(&zs);
  return out;
}

std::string text_of(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_null()) return "None";
  return v.dump();
}

int int_or(const json& o, const char* key, int dflt) {
  auto it = o.find(key);
  return it != o.end() && it->is_number_integer() ? it->get<int>() : dflt;
}

std::string str_or(const json& o, const char* key) {
  auto it = o.find(key);
  return it != o.end() && it->is_string() ? it->get<std::string>() : "";
}

std::string target_text(const json& md) {
  auto it = md.find("target");
  if (it == md.end() || !it->is_object()) return "";
  const std::string backend = str_or(*it, "backend");
  const json& arch = (*it)["arch"];
  if (arch.is_number_integer()) return fmt::format("{} sm_{}", backend, arch.get<int>());
  return fmt::format("{} {}", backend, text_of(arch));
}

// The parameter names of `def NAME(...)` in a Python source.
std::vector<std::string> python_params(const std::string& src, const std::string& fn) {
  std::vector<std::string> out;
  for (const auto& p : python_signature(src, fn)) out.push_back(p.name);
  return out;
}

// "(5,)" (Triton 3.3+: by index), "5", or a name (3.0-3.2 constants by name).
std::string constant_name(const std::string& key, const std::vector<std::string>& params) {
  std::string k = key;
  if (k.size() > 2 && k.front() == '(' && k.back() == ')') k = k.substr(1, k.size() - 2);
  if (!k.empty() && k.back() == ',') k.pop_back();
  if (!k.empty() && k.find_first_not_of("0123456789") == std::string::npos) {
    const size_t i = std::stoul(k);
    return i < params.size() ? params[i] : "#" + k;
  }
  return k;
}

TraceCompilation parse_compilation(const json& ev, size_t line) {
  auto pit = ev.find("payload");
  if (pit == ev.end() || !pit->is_object()) throw std::runtime_error("a compilation event without a payload object");
  const json& p = *pit;
  auto mit = p.find("metadata");
  if (mit == p.end() || !mit->is_object()) throw std::runtime_error("a compilation event without payload.metadata");
  const json& md = *mit;
  TraceCompilation c;
  c.line = line;
  c.kernel = str_or(md, "name");
  if (c.kernel.empty()) throw std::runtime_error("a compilation event without metadata.name");
  c.hash = str_or(md, "hash");
  c.target = target_text(md);
  c.num_warps = int_or(md, "num_warps", 4);
  c.num_stages = int_or(md, "num_stages", 3);
  if (auto ps = p.find("python_source"); ps != p.end() && ps->is_object()) {
    c.python_source = str_or(*ps, "code");
    c.full_file = ps->contains("function_start_line");
  }
  c.params = python_params(c.python_source, c.kernel);
  if (auto sc = md.find("src_constants"); sc != md.end() && sc->is_object())
    for (auto it = sc->begin(); it != sc->end(); ++it) c.constants.emplace_back(constant_name(it.key(), c.params), it.value().dump());
  // The compile options a user may have set, where the compile did not take the release's default.
  static const std::vector<std::pair<const char*, json>> defaults = {
      {"num_ctas", 1}, {"maxnreg", nullptr}, {"enable_fp_fusion", true}, {"launch_cooperative_grid", false},
      {"launch_pdl", false}, {"waves_per_eu", 0}, {"matrix_instr_nonkdim", 0}, {"kpack", 1}};
  for (const auto& [k, dflt] : defaults)
    if (auto o = md.find(k); o != md.end() && *o != dflt) c.options.emplace_back(k, o->dump());
  if (auto fc = p.find("file_content"); fc != p.end() && fc->is_object())
    for (auto it = fc->begin(); it != fc->end(); ++it) {
      const std::string& key = it.key();
      const size_t dot = key.rfind('.');
      if (dot == std::string::npos || !it.value().is_string()) continue;
      const std::string ext = key.substr(dot + 1);
      if (ext == "ttir" || ext == "ttgir" || ext == "llir" || ext == "ptx" || ext == "amdgcn")
        c.stages[ext] = it.value().get<std::string>();
    }
  if (auto s = c.stages.find("ttir"); s != c.stages.end()) c.ttir = s->second;
  c.metadata_json = md.dump();
  c.triton_version = str_or(md, "triton_version");
  return c;
}

std::string triton_dtype(const std::string& torch) {
  static const std::map<std::string, std::string> m = {
      {"torch.float16", "fp16"}, {"torch.bfloat16", "bf16"}, {"torch.float32", "fp32"}, {"torch.float64", "fp64"},
      {"torch.int8", "i8"},      {"torch.int16", "i16"},     {"torch.int32", "i32"},   {"torch.int64", "i64"},
      {"torch.uint8", "u8"},     {"torch.bool", "i1"},       {"torch.float8_e4m3fn", "fp8e4nv"},
      {"torch.float8_e5m2", "fp8e5"}};
  auto it = m.find(torch);
  return it == m.end() ? torch : it->second;
}

std::vector<int64_t> ints(const json& v) {
  std::vector<int64_t> out;
  if (v.is_array())
    for (const auto& x : v)
      if (x.is_number_integer()) out.push_back(x.get<int64_t>());
  return out;
}

struct RawLaunch {
  size_t line;
  std::string name, hash, key;
  TraceLaunch launch;
};

RawLaunch parse_launch(const json& ev, size_t line) {
  RawLaunch r{line, str_or(ev, "name"), "", "", {}};
  if (auto cm = ev.find("compilation_metadata"); cm != ev.end() && cm->is_object()) {
    r.hash = str_or(*cm, "hash");
    if (r.name.empty()) r.name = str_or(*cm, "name");
  }
  r.launch.line = line;
  const json& g = ev.contains("grid") ? ev["grid"] : json();
  const std::vector<int64_t> grid = ints(g);
  if (grid.empty() || grid.size() > 3) throw std::runtime_error("a launch event without a grid of 1 to 3 integers");
  for (size_t i = 0; i < grid.size(); ++i) r.launch.grid[i] = grid[i];
  r.key = fmt::format("{}", fmt::join(r.launch.grid, ","));
  auto ea = ev.find("extracted_args");
  if (ea == ev.end() || !ea->is_object()) throw std::runtime_error("a launch event without extracted_args");
  for (auto it = ea->begin(); it != ea->end(); ++it) {
    TraceArg a;
    a.name = it.key();
    const json& v = it.value();
    a.kind = v.is_object() ? str_or(v, "type") : "";
    if (a.kind == "tensor") {
      a.shape = ints(v.value("shape", json()));
      a.stride = ints(v.value("stride", json()));
      a.dtype = triton_dtype(str_or(v, "dtype"));
    } else if (v.is_object() && v.contains("value")) {
      a.value = text_of(v["value"]);
    }
    r.key += fmt::format("|{}:{}:{}:{}:{}:{}", a.name, a.kind, fmt::join(a.shape, "x"), fmt::join(a.stride, "x"), a.dtype,
                         a.value);
    r.launch.args.push_back(std::move(a));
  }
  return r;
}

// Attach each launch to its compilation (by hash; by name where the launch has no hash and one
// compilation has the name), keeping one entry per distinct grid and arguments.
void attach_launches(Trace& t, const std::vector<RawLaunch>& raw) {
  std::vector<std::map<std::string, size_t>> seen(t.compilations.size());
  for (const auto& r : raw) {
    std::optional<size_t> hit;
    size_t by_name = 0;
    for (size_t i = 0; i < t.compilations.size(); ++i) {
      const auto& c = t.compilations[i];
      if (!r.hash.empty() && c.hash == r.hash) hit = i;
      if (r.hash.empty() && c.kernel == r.name && by_name++ == 0) hit = i;
    }
    if (!hit || by_name > 1) {
      ++t.unmatched_launches;
      t.warnings.push_back(fmt::format("{}:{}: a launch of {} matches no compilation in the trace{}", t.path, r.line,
                                       r.name.empty() ? "?" : r.name, r.hash.empty() ? "" : " (hash " + r.hash.substr(0, 12) + ")"));
      continue;
    }
    auto& c = t.compilations[*hit];
    ++c.launch_events;
    auto [it, fresh] = seen[*hit].emplace(r.key, c.launches.size());
    if (fresh)
      c.launches.push_back(r.launch);
    else
      ++c.launches[it->second].count;
  }
}

}  // namespace

Trace read_trace(const std::string& path) {
  Trace t;
  t.path = path;
  std::string data = read_file(path);
  if (data.size() >= 2 && static_cast<unsigned char>(data[0]) == 0x1f && static_cast<unsigned char>(data[1]) == 0x8b)
    data = gunzip(path, data, t.warnings);
  else if (data.size() >= 4 && data.compare(0, 4, "\x28\xb5\x2f\xfd") == 0)
    throw InputError(fmt::format("{}: a zstd-compressed trace: decompress it first (zstd -d)", path));
  if (data.find_first_not_of(" \t\r\n") == std::string::npos)
    throw InputError(fmt::format("{}: empty trace: no events (tritonparse writes one JSON event per line)", path));
  std::vector<RawLaunch> launches;
  std::map<std::string, size_t> per_kernel;
  size_t line = 0;
  for (size_t pos = 0; pos < data.size();) {
    size_t end = data.find('\n', pos);
    if (end == std::string::npos) end = data.size();
    const std::string text = data.substr(pos, end - pos);
    pos = end + 1;
    ++line;
    if (text.find_first_not_of(" \t\r") == std::string::npos) continue;
    const json ev = json::parse(text, nullptr, false);
    auto skip = [&](const std::string& why) { t.warnings.push_back(fmt::format("{}:{}: skipped: {}", path, line, why)); };
    if (ev.is_discarded()) {
      skip(fmt::format("not valid JSON (a truncated or malformed line of {} bytes)", text.size()));
      continue;
    }
    if (!ev.is_object() || !ev.contains("event_type")) {
      skip("not a tritonparse event (no event_type)");
      continue;
    }
    const std::string type = str_or(ev, "event_type");
    try {
      if (type == "compilation") {
        TraceCompilation c = parse_compilation(ev, line);
        c.index = per_kernel[c.kernel]++;
        t.compilations.push_back(std::move(c));
      } else if (type == "launch") {
        launches.push_back(parse_launch(ev, line));
        ++t.launch_events;
      }
    } catch (const std::exception& e) {
      skip(e.what());
    }
  }
  if (t.compilations.empty())
    throw InputError(fmt::format("{}: no compilation event in {} line(s){} (kbisect imports a kernel from its "
                                 "compilation: record the trace with tritonparse.structured_logging.init)", path, line,
                                 t.launch_events ? fmt::format(", only {} launch event(s)", t.launch_events) : ""));
  attach_launches(t, launches);
  return t;
}

const TraceCompilation& choose_compilation(const Trace& t, const std::string& kernel, std::optional<size_t> index) {
  std::vector<std::string> names;
  for (const auto& c : t.compilations)
    if (std::find(names.begin(), names.end(), c.kernel) == names.end()) names.push_back(c.kernel);
  std::string name = kernel;
  if (name.empty()) {
    if (names.size() > 1)
      throw InputError(fmt::format("{}: the trace has {} kernels ({}): choose one with --kernel", t.path, names.size(),
                                   fmt::join(names, ", ")));
    name = names.front();
  } else if (std::find(names.begin(), names.end(), name) == names.end()) {
    throw InputError(fmt::format("{}: --kernel {}: no compilation of that kernel in the trace (it has: {})", t.path, name,
                                 fmt::join(names, ", ")));
  }
  std::vector<const TraceCompilation*> cs;
  for (const auto& c : t.compilations)
    if (c.kernel == name) cs.push_back(&c);
  if (index) {
    if (*index >= cs.size())
      throw InputError(fmt::format("{}: --index {}: kernel {} has {} compilation(s), indexes 0 to {}", t.path, *index, name,
                                   cs.size(), cs.size() - 1));
    return *cs[*index];
  }
  if (cs.size() > 1)
    throw InputError(fmt::format("{}: kernel {} was compiled {} times (see --list): choose one with --index 0 to {}",
                                 t.path, name, cs.size(), cs.size() - 1));
  return *cs.front();
}

}  // namespace kb::triton
