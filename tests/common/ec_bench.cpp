// ec_bench: ISA-L's own ec_encode_data against RsCodec::Encode on the same
// buffers (K data chunks of 1 MiB, M parity) and against the client's
// write-path encode (ec::encode_rows over a caller's buffer), the issue's
// check that Surge's encode adds nothing to ISA-L's (>= 0.8 of its rate),
// and the same for rebuilding one lost data chunk. Bytes are data bytes encoded
// (encode) or rebuilt (decode). Built by default, not a ctest test:
//   build/tests/common/ec_bench --benchmark_repetitions=5
#include <benchmark/benchmark.h>
#include <isa-l/erasure_code.h>

#include <algorithm>
#include <cstdlib>
#include <random>
#include <vector>

#include "common/ec/row_encode.h"

namespace {

struct Buffers {
  std::vector<std::vector<uint8_t>> chunks;
  std::vector<const uint8_t*> data;
  std::vector<uint8_t*> parity;
  Buffers(int k, int m, size_t len) {
    std::mt19937 rng(1);
    for (int i = 0; i < k + m; ++i) {
      std::vector<uint8_t> c(len);
      for (auto& b : c) b = static_cast<uint8_t>(rng());
      chunks.push_back(std::move(c));
    }
    for (int i = 0; i < k; ++i) data.push_back(chunks[i].data());
    for (int j = 0; j < m; ++j) parity.push_back(chunks[k + j].data());
  }
};

void BM_IsalEncode(benchmark::State& state) {
  const int k = static_cast<int>(state.range(0)), m = static_cast<int>(state.range(1));
  const size_t len = static_cast<size_t>(state.range(2));
  Buffers b(k, m, len);
  std::vector<uint8_t> matrix((k + m) * k), tbls(32 * k * m);
  gf_gen_cauchy1_matrix(matrix.data(), k + m, k);
  ec_init_tables(k, m, matrix.data() + k * k, tbls.data());
  auto** src = const_cast<unsigned char**>(b.data.data());
  for (auto _ : state) {
    ec_encode_data(static_cast<int>(len), k, m, tbls.data(), src, b.parity.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * k * len);
}

void BM_SurgeEncode(benchmark::State& state) {
  const uint32_t k = static_cast<uint32_t>(state.range(0)), m = static_cast<uint32_t>(state.range(1));
  const size_t len = static_cast<size_t>(state.range(2));
  Buffers b(static_cast<int>(k), static_cast<int>(m), len);
  auto codec = surge::ec::RsCodec::Create(k, m);
  if (!codec.ok()) {
    state.SkipWithError(codec.status().ToString().c_str());
    return;
  }
  for (auto _ : state) {
    if (!codec->Encode(b.data, b.parity, len).ok()) std::abort();
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * k * len);
}

// The write path's encode (ec::encode_rows, what a client's full-group
// write runs): one file range of `rows` whole groups in the caller's
// buffer, K pointers per row into it, parity into buffers kept between runs.
// Compared with BM_IsalEncode over as many data bytes: the issue's
// ">= 0.8 of ISA-L's own rate" for the write path.
void BM_WritePathEncode(benchmark::State& state) {
  const uint32_t k = static_cast<uint32_t>(state.range(0)),
                 m = static_cast<uint32_t>(state.range(1));
  const size_t len = static_cast<size_t>(state.range(2));
  const size_t rows = 4, unit = len / rows;  // a 1 MiB window of rows per chunk
  std::vector<std::byte> file(k * len);
  std::mt19937 rng(1);
  for (auto& b : file) b = static_cast<std::byte>(rng());
  auto codec = surge::ec::RsCodec::Create(k, m);
  if (!codec.ok()) {
    state.SkipWithError(codec.status().ToString().c_str());
    return;
  }
  // Row r is file bytes [r * K * unit, (r + 1) * K * unit): unit i of it
  // is data position i.
  std::vector<surge::ec::RowSources> sources(rows);
  for (size_t r = 0; r < rows; ++r) {
    sources[r].offset = r * unit;
    sources[r].length = unit;
    for (uint32_t i = 0; i < k; ++i) sources[r].data.push_back(file.data() + (r * k + i) * unit);
  }
  // Parity buffers kept from run to run, as the client keeps them
  // (client/lib/parity_buffers.h).
  std::vector<std::vector<std::byte>> parity(m, std::vector<std::byte>(len));
  std::vector<std::byte*> out;
  for (auto& p : parity) out.push_back(p.data());
  for (auto _ : state) {
    if (!surge::ec::encode_rows(*codec, sources, len, out).ok()) std::abort();
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * k * len);
}

// A degraded read's rebuild: data chunk 1 from the other K - 1 data and
// parity 0. ISA-L's ceiling is ec_encode_data with the decode row already
// computed; the codec inverts the survivors' matrix on every call.
void BM_IsalDecodeOne(benchmark::State& state) {
  const int k = static_cast<int>(state.range(0)), m = static_cast<int>(state.range(1));
  const size_t len = static_cast<size_t>(state.range(2));
  Buffers b(k, m, len);
  auto codec = surge::ec::RsCodec::Create(static_cast<uint32_t>(k), static_cast<uint32_t>(m));
  if (!codec.ok() || !codec->Encode(b.data, b.parity, len).ok()) std::abort();
  std::vector<uint8_t> matrix((k + m) * k), sub(k * k), inv(k * k), row(k), tbls(32 * k);
  gf_gen_cauchy1_matrix(matrix.data(), k + m, k);
  std::vector<unsigned char*> survivors;
  for (int i = 0, r = 0; i < k + m && r < k; ++i) {
    if (i == 1) continue;
    std::copy_n(&matrix[i * k], k, &sub[r * k]);
    survivors.push_back(b.chunks[i].data());
    ++r;
  }
  if (gf_invert_matrix(sub.data(), inv.data(), k) != 0) std::abort();
  std::copy_n(&inv[1 * k], k, row.data());
  ec_init_tables(k, 1, row.data(), tbls.data());
  std::vector<uint8_t> out(len);
  unsigned char* outp[1] = {out.data()};
  for (auto _ : state) {
    ec_encode_data(static_cast<int>(len), k, 1, tbls.data(), survivors.data(), outp);
    benchmark::ClobberMemory();
  }
  if (out != b.chunks[1]) std::abort();
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * len);
}

void BM_SurgeReconstructOne(benchmark::State& state) {
  const uint32_t k = static_cast<uint32_t>(state.range(0)), m = static_cast<uint32_t>(state.range(1));
  const size_t len = static_cast<size_t>(state.range(2));
  Buffers b(static_cast<int>(k), static_cast<int>(m), len);
  auto codec = surge::ec::RsCodec::Create(k, m);
  if (!codec.ok() || !codec->Encode(b.data, b.parity, len).ok()) std::abort();
  const std::vector<uint8_t> lost = b.chunks[1];
  std::vector<uint8_t*> chunks;
  for (auto& c : b.chunks) chunks.push_back(c.data());
  surge::ec::ChunkSet present, want;
  for (uint32_t i = 0; i < k + m; ++i) present.set(i);
  present.reset(1);
  want.set(1);
  for (auto _ : state) {
    if (!codec->Reconstruct(chunks, present, want, len).ok()) std::abort();
    benchmark::ClobberMemory();
  }
  if (b.chunks[1] != lost) std::abort();
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * len);
}

void Schemes(benchmark::internal::Benchmark* b) {
  for (auto [k, m] : {std::pair{4, 2}, {8, 3}}) b->Args({k, m, 1 << 20});
}

// Interleaved so load on the machine hits both alike.
BENCHMARK(BM_IsalEncode)->Apply(Schemes);
BENCHMARK(BM_SurgeEncode)->Apply(Schemes);
BENCHMARK(BM_WritePathEncode)->Apply(Schemes);
BENCHMARK(BM_IsalDecodeOne)->Apply(Schemes);
BENCHMARK(BM_SurgeReconstructOne)->Apply(Schemes);

}  // namespace

BENCHMARK_MAIN();
