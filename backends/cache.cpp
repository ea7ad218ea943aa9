#include "backends/cache.h"

#include <unistd.h>

#include <filesystem>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "backends/triton/triton_compile.h"
#include "core/error.h"
#include "core/fsutil.h"
#include "core/hash.h"

namespace kb {

using json = nlohmann::json;
namespace fs = std::filesystem;

// A cache entry's record. The dtype is written by its canonical name through nlohmann's enum mapping; it
// is read back through parse_dtype, which rejects a name it does not know (the enum mapping would read
// one as f32). Artifact's fields are written by hand rather than with NLOHMANN_DEFINE_TYPE_*: the
// binary path is recorded as "binary", cache_hit is not recorded, params keep their value types, and
// cache_key and log may be missing from older records.
NLOHMANN_JSON_SERIALIZE_ENUM(DType, {{DType::f32, "f32"}, {DType::f16, "f16"}, {DType::bf16, "bf16"}})

void to_json(json& j, const Artifact& a) {
  j = json{{"kernel", a.kernel},
           {"backend", a.backend},
           {"params", params_to_json(a.params)},
           {"dtype", a.dtype},
           {"toolchain", a.toolchain},
           {"toolchain_identity", a.toolchain_identity},
           {"target", a.target},
           {"binary", a.binary_path},
           {"entry", a.entry},
           {"code_hash", a.code_hash},
           {"code_bytes", a.code_bytes},
           {"compile_s", a.compile_s},
           {"cache_key", a.cache_key},
           {"metrics", a.metrics},
           {"log", a.log}};
}

void from_json(const json& j, Artifact& a) {
  j.at("kernel").get_to(a.kernel);
  j.at("backend").get_to(a.backend);
  a.params = params_from_json(j.at("params"));
  a.dtype = parse_dtype(j.at("dtype"));
  j.at("toolchain").get_to(a.toolchain);
  j.at("toolchain_identity").get_to(a.toolchain_identity);
  j.at("target").get_to(a.target);
  j.at("binary").get_to(a.binary_path);
  j.at("entry").get_to(a.entry);
  j.at("code_hash").get_to(a.code_hash);
  j.at("code_bytes").get_to(a.code_bytes);
  j.at("compile_s").get_to(a.compile_s);
  a.cache_key = j.value("cache_key", "");
  j.at("metrics").get_to(a.metrics);
  a.log = j.value("log", "");
}

std::string artifact_to_json(const Artifact& a) { return json(a).dump(2); }

Artifact artifact_from_json(const std::string& text) { return json::parse(text).get<Artifact>(); }

std::string CompileCache::default_cache_dir_for_compile() { return default_cache_dir() + "/compile"; }

CompileCache::CompileCache(std::string dir) : dir_(std::move(dir)) {}

std::string CompileCache::key(const CompileRequest& req) const {
  if (!req.kernel || !req.toolchain) throw Error("CompileCache::key: incomplete request");
  if (req.toolchain->identity.empty()) throw Error("CompileCache::key: toolchain identity not resolved");
  Hasher h;
  h.add("kbisect-compile-v1").add(req.kernel->backend).add(req.kernel->name);
  h.add(read_file(kernel_source_path(req.kernel_dir, req.kernel->source)));
  // A source outside the kernel directory (a user's kernel file) is named by its file name, so that the same
  // files elsewhere (a copy of the tree on a GPU machine) give the same key.
  for (const auto& s : req.kernel->extra_sources)
    h.add(fs::path(s).is_absolute() ? fs::path(s).filename().string() : s)
        .add(read_file(kernel_source_path(req.kernel_dir, s)));
  h.add(req.params.str()).add(to_string(req.dtype));
  // A user's Triton kernel is specialized on its shape's arguments, as the JIT does (docs/triton.md, Fidelity).
  if (const std::string jit = triton::jit_specialization_key(req); !jit.empty()) h.add(jit);
  h.add(req.toolchain->identity).add(req.toolchain->target);
  return h.hex();
}

Artifact CompileCache::compile(Backend& backend, CompileRequest req) {
  std::string k = key(req);
  std::string final_dir = dir_ + "/" + k.substr(0, 2) + "/" + k;
  std::string meta = final_dir + "/artifact.json";
  if (file_exists(meta)) {
    try {
      Artifact a = artifact_from_json(read_file(meta));
      // An entry is relocatable: a cache directory copied elsewhere (a bundle for a GPU machine, a moved
      // cache) records the binary where it was built; it is the entry's own file of that name.
      if (a.binary_path.rfind(final_dir + "/", 0) != 0)
        a.binary_path = final_dir + "/" + fs::path(a.binary_path).filename().string();
      if (file_exists(a.binary_path)) {
        a.cache_hit = true;
        a.toolchain = req.toolchain->name;  // the same identity may be known under another name
        return a;
      }
    } catch (const std::exception&) {
      // A damaged entry is rebuilt below.
    }
  }
  // No usable entry: clear whatever half-written or damaged directory is in the way of the rename.
  remove_tree(final_dir);
  make_dirs(dir_ + "/" + k.substr(0, 2));
  std::string work = fmt::format("{}.tmp.{}.{}", final_dir, getpid(), std::rand());
  remove_tree(work);
  make_dirs(work);
  req.out_dir = work;
  Artifact a;
  try {
    a = backend.compile(req);
  } catch (...) {
    remove_tree(work);
    throw;
  }
  a.cache_key = k;
  // Paths inside the artifact point into the final directory.
  auto rebase = [&](std::string& p) {
    if (p.rfind(work, 0) == 0) p = final_dir + p.substr(work.size());
  };
  rebase(a.binary_path);
  write_file_atomic(work + "/artifact.json", artifact_to_json(a));
  std::error_code ec;
  fs::rename(work, final_dir, ec);
  if (ec) {
    // Another process finished the same key first: use ours from its final place if it exists.
    remove_tree(work);
    if (!file_exists(meta)) throw EnvError(fmt::format("{}: cannot store compiled artifact: {}", final_dir, ec.message()));
    Artifact other = artifact_from_json(read_file(meta));
    other.cache_hit = false;
    other.compile_s = a.compile_s;
    other.toolchain = req.toolchain->name;
    return other;
  }
  a.cache_hit = false;
  return a;
}

}  // namespace kb
