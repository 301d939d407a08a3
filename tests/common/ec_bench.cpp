// ec_bench: ISA-L's own ec_encode_data against RsCodec::Encode on the same
// buffers (K data chunks of 1 MiB, M parity), the check that
// Surge's encode adds nothing to ISA-L's (>= 0.8 of its rate). Bytes are
// data bytes encoded. Built by default, not a ctest test:
//   build/tests/common/ec_bench --benchmark_repetitions=5
#include <benchmark/benchmark.h>
#include <isa-l/erasure_code.h>

#include <cstdlib>
#include <random>
#include <vector>

#include "common/ec/rs_codec.h"

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

void Schemes(benchmark::internal::Benchmark* b) {
  for (auto [k, m] : {std::pair{4, 2}, {8, 3}}) b->Args({k, m, 1 << 20});
}

// Interleaved so load on the machine hits both alike.
BENCHMARK(BM_IsalEncode)->Apply(Schemes);
BENCHMARK(BM_SurgeEncode)->Apply(Schemes);

}  // namespace

BENCHMARK_MAIN();
