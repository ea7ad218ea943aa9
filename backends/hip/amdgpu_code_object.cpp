#include "backends/hip/amdgpu_code_object.h"

#include <algorithm>

#include <utility>
#include <vector>

#include <fmt/format.h>
#include <llvm/BinaryFormat/ELF.h>
#include <llvm/BinaryFormat/MsgPackDocument.h>
#include <llvm/BinaryFormat/MsgPackReader.h>

#include "backends/kernel.h"
#include "core/error.h"

namespace kb {

namespace {

constexpr uint32_t kNtAmdgpuMetadata = 32;  // llvm::ELF::NT_AMDGPU_METADATA

// An integer node's value; msgpack stores small non-negative numbers as UInt and others as Int.
std::optional<int64_t> as_int(const llvm::msgpack::DocNode& n) {
  switch (n.getKind()) {
    case llvm::msgpack::Type::UInt: return int64_t(n.getUInt());
    case llvm::msgpack::Type::Int: return n.getInt();
    default: return std::nullopt;
  }
}

// Whether every map key in the first msgpack object of `blob` is a scalar. LLVM's Document orders map
// keys with a comparison that has no case for array, map or extension keys (undefined behaviour, a
// crash in practice), so such a note must be refused before it is read into a Document.
bool map_keys_are_scalars(llvm::StringRef blob) {
  using llvm::msgpack::Type;
  struct Open {
    uint64_t left;  // items still to read (a map's keys and values both count)
    bool map;
  };
  llvm::msgpack::Reader reader(blob);
  std::vector<Open> stack;
  do {
    llvm::msgpack::Object obj;
    auto got = reader.read(obj);
    if (!got) {
      llvm::consumeError(got.takeError());
      return true;  // truncated: readFromBlob refuses it
    }
    if (!*got) return true;
    if (!stack.empty()) {
      Open& top = stack.back();
      const bool is_key = top.map && top.left % 2 == 0;
      if (is_key && (obj.Kind == Type::Array || obj.Kind == Type::Map || obj.Kind == Type::Extension)) return false;
      --top.left;
    }
    if (obj.Kind == Type::Array || obj.Kind == Type::Map)
      stack.push_back({uint64_t(obj.Length) * (obj.Kind == Type::Map ? 2 : 1), obj.Kind == Type::Map});
    while (!stack.empty() && stack.back().left == 0) stack.pop_back();
  } while (!stack.empty());
  return true;
}

}  // namespace

const AmdgpuKernelInfo* AmdgpuCodeObject::find(const std::string& kernel_name) const {
  for (const auto& k : kernels)
    if (k.name == kernel_name) return &k;
  return nullptr;
}

// The integer fields of a kernel's metadata map, by key (a missing key reads as 0).
const std::pair<const char*, int64_t AmdgpuKernelInfo::*> kIntegerFields[] = {
    {".vgpr_count", &AmdgpuKernelInfo::vgpr_count},
    {".agpr_count", &AmdgpuKernelInfo::agpr_count},
    {".sgpr_count", &AmdgpuKernelInfo::sgpr_count},
    {".vgpr_spill_count", &AmdgpuKernelInfo::vgpr_spill_count},
    {".sgpr_spill_count", &AmdgpuKernelInfo::sgpr_spill_count},
    {".group_segment_fixed_size", &AmdgpuKernelInfo::group_segment_bytes},
    {".private_segment_fixed_size", &AmdgpuKernelInfo::private_segment_bytes},
    {".kernarg_segment_size", &AmdgpuKernelInfo::kernarg_segment_bytes},
    {".max_flat_workgroup_size", &AmdgpuKernelInfo::max_flat_workgroup_size},
    {".wavefront_size", &AmdgpuKernelInfo::wavefront_size},
};

AmdgpuCodeObject read_amdgpu_code_object(const ElfFile& elf) {
  using namespace llvm;
  if (elf.machine() != ELF::EM_AMDGPU)
    throw InputError(fmt::format("{}: not an AMDGPU code object (e_machine {})", elf.name(), elf.machine()));
  const ElfNote* note = nullptr;
  for (const auto& n : elf.notes())
    if (n.owner == "AMDGPU" && n.type == kNtAmdgpuMetadata) note = &n;
  if (!note) throw InputError(fmt::format("{}: no AMDGPU metadata note (NT_AMDGPU_METADATA)", elf.name()));

  msgpack::Document doc;
  if (!map_keys_are_scalars(StringRef(note->desc.data(), note->desc.size())))
    throw InputError(fmt::format("{}: the AMDGPU metadata note has a map key that is not a scalar", elf.name()));
  if (!doc.readFromBlob(StringRef(note->desc.data(), note->desc.size()), /*Multi=*/false))
    throw InputError(fmt::format("{}: the AMDGPU metadata note is not valid msgpack", elf.name()));
  if (doc.getRoot().getKind() != msgpack::Type::Map)
    throw InputError(fmt::format("{}: the AMDGPU metadata root is not a map", elf.name()));
  auto& root = doc.getRoot().getMap();

  AmdgpuCodeObject out;
  if (auto it = root.find("amdhsa.target"); it != root.end() && it->second.getKind() == msgpack::Type::String)
    out.target = it->second.getString().str();
  if (auto it = root.find("amdhsa.version"); it != root.end() && it->second.getKind() == msgpack::Type::Array)
    for (auto& v : it->second.getArray())
      if (auto i = as_int(v)) out.version.push_back(*i);
  auto kit = root.find("amdhsa.kernels");
  if (kit == root.end() || kit->second.getKind() != msgpack::Type::Array)
    throw InputError(fmt::format("{}: AMDGPU metadata has no 'amdhsa.kernels' list", elf.name()));

  for (auto& kn : kit->second.getArray()) {
    if (kn.getKind() != msgpack::Type::Map) continue;
    auto& km = kn.getMap();
    AmdgpuKernelInfo k;
    auto str = [&](const char* key) -> std::string {
      auto it = km.find(key);
      return it != km.end() && it->second.getKind() == msgpack::Type::String ? it->second.getString().str() : "";
    };
    auto num = [&](const char* key) -> int64_t {
      auto it = km.find(key);
      if (it == km.end()) return 0;
      auto v = as_int(it->second);
      if (!v) throw InputError(fmt::format("{}: kernel metadata field '{}' is not an integer", elf.name(), key));
      return *v;
    };
    k.name = str(".name");
    k.symbol = str(".symbol");
    for (const auto& [key, field] : kIntegerFields) k.*field = num(key);
    out.kernels.push_back(std::move(k));
  }
  return out;
}

std::optional<AmdgpuArch> amdgpu_arch(const std::string& target) {
  // Strip target features ("gfx90a:xnack-") before matching.
  std::string gfx = target.substr(0, target.find(':'));
  if (gfx == "gfx90a" || gfx == "gfx940" || gfx == "gfx941" || gfx == "gfx942") {
    AmdgpuArch a;  // CDNA2 and CDNA3 share these limits per CU
    a.name = gfx;
    return a;
  }
  return std::nullopt;
}

AmdgpuOccupancy amdgpu_occupancy(const AmdgpuKernelInfo& k, int threads, const AmdgpuArch& arch) {
  AmdgpuOccupancy o;
  const int max_waves = arch.max_waves_per_simd;
  // Registers: the unified VGPR file is allocated in granules per wave.
  int64_t vgprs = std::max<int64_t>(k.vgpr_count, 1);
  int64_t vgpr_alloc = ceil_div(vgprs, arch.vgpr_granule) * arch.vgpr_granule;
  o.vgpr_limit = int(std::min<int64_t>(max_waves, arch.vgprs_per_lane / vgpr_alloc));
  // SGPRs on GFX9 (the AMDGPU backend's table; 800 SGPRs per SIMD in uneven granules).
  o.sgpr_limit = k.sgpr_count <= 80 ? 10 : k.sgpr_count <= 88 ? 9 : k.sgpr_count <= 100 ? 8 : 7;
  o.sgpr_limit = std::min(o.sgpr_limit, max_waves);
  const int per_simd = std::min({max_waves, o.vgpr_limit, o.sgpr_limit});

  // Whole workgroups must fit on one CU: its waves across the SIMDs, its LDS in the CU's LDS.
  const int waves_per_group = int(ceil_div(std::max(threads, 1), arch.wave_size));
  const int groups_by_waves = per_simd * arch.simds_per_cu / waves_per_group;
  const int max_groups = waves_per_group == 1 ? max_waves * arch.simds_per_cu : arch.max_workgroups_per_cu;
  if (k.group_segment_bytes > 0) {
    int64_t lds_alloc = ceil_div(k.group_segment_bytes, arch.lds_granule) * arch.lds_granule;
    o.lds_workgroups = int(arch.lds_bytes_per_cu / lds_alloc);
  } else {
    o.lds_workgroups = max_groups;
  }
  o.workgroups_per_cu = std::min({groups_by_waves, o.lds_workgroups, max_groups});
  o.waves_per_simd =
      std::min<double>(per_simd, double(o.workgroups_per_cu) * waves_per_group / double(arch.simds_per_cu));

  if (o.workgroups_per_cu == o.lds_workgroups && o.lds_workgroups < groups_by_waves) o.limiter = "lds";
  else if (o.workgroups_per_cu == max_groups && max_groups < groups_by_waves) o.limiter = "workgroups";
  else if (per_simd == o.vgpr_limit && o.vgpr_limit < max_waves) o.limiter = "vgpr";
  else if (per_simd == o.sgpr_limit && o.sgpr_limit < max_waves) o.limiter = "sgpr";
  else o.limiter = "waves";
  return o;
}

}  // namespace kb
