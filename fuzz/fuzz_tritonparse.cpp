// tritonparse traces (kbisect import-trace): the NDJSON reader, plain or gzip (one member per event), the
// choice of a compilation, and what import writes from it, read back by the triton_kernel: reader (an
// import must write a file that loads, or refuse with an error). The first byte picks the form: 0 the rest
// is the trace as written, 1 the rest is a .ndjson.gz file's bytes, 2 the rest is gzip-compressed here
// first (so the inflate path sees valid members around fuzzed events).
#include <unistd.h>
#include <zlib.h>

#include <filesystem>

#include "backends/triton/trace.h"
#include "backends/triton/user_kernel.h"
#include "core/fsutil.h"
#include "fuzz/fuzz_input.h"

namespace {

std::string gzip(const std::string& in) {
  z_stream zs{};
  deflateInit2(&zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY);
  std::string out(deflateBound(&zs, uLong(in.size())) + 64, '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  zs.avail_in = uInt(in.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = uInt(out.size());
  deflate(&zs, Z_FINISH);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

const std::string& scratch() {
  static const std::string dir = kb::temp_dir("kb-fuzz-trace");
  return dir;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string body = kb::fuzz::as_text(data + 1, size - 1);
  const int form = data[0] % 3;
  const std::string path = scratch() + (form == 0 ? "/t.ndjson" : "/t.ndjson.gz");
  kb::write_file_atomic(path, form == 2 ? gzip(body) : body);
  kb::fuzz::refused_or_read([&] {
    const kb::triton::Trace t = kb::triton::read_trace(path);
    for (const auto& c : t.compilations) {
      const std::string out = scratch() + "/out";
      std::filesystem::remove_all(out);
      const kb::triton::ImportedKernel k = kb::triton::write_kernel_files(t, c, out);
      (void)kb::triton::parse_user_kernel(k.yaml_path);
    }
  });
  return 0;
}
