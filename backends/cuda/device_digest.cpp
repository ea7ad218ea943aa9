#include "backends/cuda/device_digest.h"

#include <fmt/format.h>

#include "backends/cuda/cuda_driver.h"
#include "backends/cuda/nvrtc_cubin.h"
#include "core/error.h"

namespace kb::cuda {

namespace {

// At most this many projections per direction (the check asks for 2).
constexpr int kMaxVectors = 8;
constexpr int kThreads = 256;
constexpr int kRowsPerChunk = 128;  // rows one block of the column kernel sums before its atomic adds

// rows:  one block per row i; threads stride over j; per-vector block reductions in shared memory.
// cols:  one thread per column j and chunk of rows; fp64 atomic adds of each chunk's sums (sm_60+).
// cells: one thread per requested element.
const char* const kSource = R"CUDA(
#define KB_MAXV 8
#define KB_THREADS 256
extern "C" __global__ void kb_digest_rows(const float* C, long long M, long long N, const double* X, int R,
                                          double* rows, unsigned long long* bad, unsigned long long* first) {
  __shared__ double part[KB_MAXV][KB_THREADS];
  const long long i = blockIdx.x;
  double acc[KB_MAXV];
  for (int r = 0; r < KB_MAXV; ++r) acc[r] = 0.0;
  unsigned long long nb = 0, f = ~0ull;
  const float* row = C + i * N;
  for (long long j = threadIdx.x; j < N; j += blockDim.x) {
    const float c = row[j];
    if (!isfinite(c)) {
      ++nb;
      const unsigned long long at = (unsigned long long)(i * N + j);
      if (at < f) f = at;
    }
    for (int r = 0; r < R; ++r) acc[r] += (double)c * X[(long long)r * N + j];
  }
  for (int r = 0; r < R; ++r) part[r][threadIdx.x] = acc[r];
  __syncthreads();
  for (int h = blockDim.x / 2; h > 0; h /= 2) {
    if (threadIdx.x < h)
      for (int r = 0; r < R; ++r) part[r][threadIdx.x] += part[r][threadIdx.x + h];
    __syncthreads();
  }
  if (threadIdx.x == 0)
    for (int r = 0; r < R; ++r) rows[(long long)r * M + i] = part[r][0];
  if (nb) {
    atomicAdd(bad, nb);
    atomicMin(first, f);
  }
}

extern "C" __global__ void kb_digest_cols(const float* C, long long M, long long N, const double* Y, int Q,
                                          double* cols, int rows_per_chunk) {
  const long long j = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= N) return;
  const long long i0 = (long long)blockIdx.y * rows_per_chunk;
  const long long i1 = i0 + rows_per_chunk < M ? i0 + rows_per_chunk : M;
  double acc[KB_MAXV];
  for (int q = 0; q < KB_MAXV; ++q) acc[q] = 0.0;
  for (long long i = i0; i < i1; ++i) {
    const double c = (double)C[i * N + j];
    for (int q = 0; q < Q; ++q) acc[q] += Y[(long long)q * M + i] * c;
  }
  for (int q = 0; q < Q; ++q) atomicAdd(&cols[(long long)q * N + j], acc[q]);
}

extern "C" __global__ void kb_digest_cells(const float* C, const long long* at, int n, float* out) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k < n) out[k] = C[at[k]];
}
)CUDA";

// Device buffers of one digest, freed on every path.
struct Buffers {
  std::vector<CUdeviceptr> all;
  CUdeviceptr get(size_t bytes) {
    CUdeviceptr p = 0;
    KB_CU(driver().cuMemAlloc(&p, std::max<size_t>(bytes, 8)));
    all.push_back(p);
    return p;
  }
  ~Buffers() {
    for (CUdeviceptr p : all) driver().cuMemFree(p);
  }
};

std::vector<double> flatten(const std::vector<std::vector<double>>& v) {
  std::vector<double> out;
  for (const auto& x : v) out.insert(out.end(), x.begin(), x.end());
  return out;
}

void launch(CUfunction f, unsigned gx, unsigned gy, CUstream stream, std::vector<void*> args) {
  KB_CU(driver().cuLaunchKernel(f, gx, gy, 1, kThreads, 1, 1, 0, stream, args.data(), nullptr));
}

}  // namespace

const std::string& digest_source() {
  static const std::string s = kSource;
  return s;
}

const std::string& digest_cubin(int sm) { return helper_cubin(kSource, "kb_digest.cu", sm, "digest kernels"); }

DeviceDigest::DeviceDigest(int sm, CUstream stream) : stream_(stream) {
  auto& d = driver();
  KB_CU(d.cuModuleLoadData(&module_, digest_cubin(sm).data()));
  KB_CU(d.cuModuleGetFunction(&rows_, module_, "kb_digest_rows"));
  KB_CU(d.cuModuleGetFunction(&cols_, module_, "kb_digest_cols"));
  KB_CU(d.cuModuleGetFunction(&cells_, module_, "kb_digest_cells"));
}

DeviceDigest::~DeviceDigest() {
  if (module_) driver().cuModuleUnload(module_);
}

ResultDigest DeviceDigest::compute(CUdeviceptr dC, const Shape& s, const DigestRequest& req, const std::string& device) {
  int R = int(req.row_vectors.size()), Q = int(req.col_vectors.size());
  if (R > kMaxVectors || Q > kMaxVectors)
    throw Error(fmt::format("device digest: at most {} projections per direction ({} and {} asked)", kMaxVectors, R, Q));
  check_digest_request(s, req);
  std::vector<long long> at;
  for (const auto& [i, j] : req.cells) at.push_back(i * s.N + j);
  auto& d = driver();
  KB_CU(d.cuStreamSynchronize(stream_));  // the kernel's last run has finished writing C
  Buffers b;
  const std::vector<double> X = flatten(req.row_vectors), Y = flatten(req.col_vectors);
  CUdeviceptr dX = b.get(X.size() * 8), dY = b.get(Y.size() * 8), dAt = b.get(at.size() * 8);
  CUdeviceptr dRows = b.get(size_t(R * s.M) * 8), dCols = b.get(size_t(Q * s.N) * 8), dCells = b.get(at.size() * 4);
  CUdeviceptr dBad = b.get(8), dFirst = b.get(8);
  if (!X.empty()) KB_CU(d.cuMemcpyHtoD(dX, X.data(), X.size() * 8));
  if (!Y.empty()) KB_CU(d.cuMemcpyHtoD(dY, Y.data(), Y.size() * 8));
  if (!at.empty()) KB_CU(d.cuMemcpyHtoD(dAt, at.data(), at.size() * 8));
  KB_CU(d.cuMemsetD8Async(dCols, 0, size_t(Q * s.N) * 8, stream_));
  KB_CU(d.cuMemsetD8Async(dBad, 0, 8, stream_));
  KB_CU(d.cuMemsetD8Async(dFirst, 0xff, 8, stream_));
  long long M = s.M, N = s.N;
  int chunk = kRowsPerChunk, n = int(at.size());
  launch(rows_, unsigned(s.M), 1, stream_, {&dC, &M, &N, &dX, &R, &dRows, &dBad, &dFirst});
  if (Q > 0)
    launch(cols_, unsigned((s.N + kThreads - 1) / kThreads), unsigned((s.M + chunk - 1) / chunk), stream_,
           {&dC, &M, &N, &dY, &Q, &dCols, &chunk});
  if (n > 0) launch(cells_, unsigned((n + kThreads - 1) / kThreads), 1, stream_, {&dC, &dAt, &n, &dCells});
  KB_CU(d.cuStreamSynchronize(stream_));
  ResultDigest out;
  out.where = device;
  std::vector<double> rows(size_t(R * s.M)), cols(size_t(Q * s.N));
  if (!rows.empty()) KB_CU(d.cuMemcpyDtoH(rows.data(), dRows, rows.size() * 8));
  if (!cols.empty()) KB_CU(d.cuMemcpyDtoH(cols.data(), dCols, cols.size() * 8));
  for (int r = 0; r < R; ++r) out.rows.emplace_back(rows.begin() + r * s.M, rows.begin() + (r + 1) * s.M);
  for (int q = 0; q < Q; ++q) out.cols.emplace_back(cols.begin() + q * s.N, cols.begin() + (q + 1) * s.N);
  out.cells.resize(at.size());
  if (n > 0) KB_CU(d.cuMemcpyDtoH(out.cells.data(), dCells, out.cells.size() * 4));
  unsigned long long bad = 0, first = 0;
  KB_CU(d.cuMemcpyDtoH(&bad, dBad, 8));
  KB_CU(d.cuMemcpyDtoH(&first, dFirst, 8));
  out.non_finite = int64_t(bad);
  if (bad) {
    out.first_non_finite = int64_t(first);
    KB_CU(d.cuMemcpyDtoH(&out.first_non_finite_value, dC + first * 4, 4));
  }
  return out;
}

}  // namespace kb::cuda
