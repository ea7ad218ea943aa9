// A toolchain is a named compiler spec: backend, kind (compile path), compiler path, flags, target.
// Its identity hashes the compiler binary, its --version output, kind, flags and target, so two
// different builds of "clang" are never confused.
#pragma once
#include <map>
#include <string>
#include <vector>

namespace kb {

struct Toolchain {
  std::string name;      // "clang-19", "nvcc-sm90a", user-chosen in YAML
  std::string backend;   // "cpu" | "cuda" | "hip"
  std::string kind;      // cpu: "gcc" | "clang"; cuda: "nvcc" | "nvrtc" | "clang-cuda"; hip: "hipcc" | "clang-hip" | "hiprtc"
  std::string compiler;  // path or program name; empty for in-process kinds (nvrtc, hiprtc)
  std::vector<std::string> flags;  // extra flags, appended after the backend's own
  std::string target;    // cpu: "" (flags carry -march); cuda: "sm_90a"; hip: "gfx90a"
  std::map<std::string, std::string> tools;  // helper programs by role, e.g. {"ptxas": "/usr/local/cuda/bin/ptxas"}
  std::map<std::string, std::string> env;    // environment for the compiler process
  std::string origin;    // "preset" or the YAML file it came from
  std::string description;
  // A Triton toolchain compiled elsewhere (`kbisect prebuild`): the record its identity comes from. Its
  // compiler is not on this machine; its builds come from the compile cache the record came with.
  std::string prebuilt;

  // Filled by resolve_identity(); empty until then.
  std::string identity;      // sha256 hex
  std::string version_text;  // first line of the compiler's version output
};

// Parses a toolchain YAML file: either one mapping or `toolchains: [ ... ]`. Fields:
// name, backend, kind, compiler, flags (list or string), target, tools (map), env (map), description.
// `{dir}` in compiler/tools is replaced by the file's directory, and each `{key}` in `vars` likewise.
// Throws InputError naming file:line and field.
std::vector<Toolchain> load_toolchain_file(const std::string& path,
                                           const std::map<std::string, std::string>& vars = {});
// Same, from YAML text (origin names it in errors).
std::vector<Toolchain> parse_toolchains(const std::string& yaml_text, const std::string& origin,
                                        const std::map<std::string, std::string>& vars = {});

// Toolchain presets for compilers found on this machine (all backends that are built in).
std::vector<Toolchain> preset_toolchains();

// Finds a toolchain by preset name, or loads it from a file when `name_or_file` is a path to a
// .yaml/.yml file (which must hold exactly one toolchain, or a `name` selected with FILE:NAME).
// Throws InputError (unknown name, listing the known ones) or EnvError (compiler missing).
Toolchain find_toolchain(const std::string& name_or_file);

// Computes tc.identity and tc.version_text (the backend decides what goes in; see Backend).
// Cached per process by (kind, compiler, flags, target).
void resolve_identity(Toolchain& tc);

}  // namespace kb
