// RsCodec over ISA-L: encode with the precomputed parity tables, rebuild by
// inverting the K x K submatrix of the present rows (gf_invert_matrix) and
// encoding the survivors with the rows of the wanted chunks.
#include "common/ec/rs_codec.h"

#include <isa-l/erasure_code.h>

#include <algorithm>
#include <climits>

namespace surge::ec {

namespace {

// ISA-L's lengths are int; a chunk is far smaller, this is a guard.
constexpr size_t kMaxLen = static_cast<size_t>(INT_MAX);

// ISA-L takes unsigned char** for its sources and never writes them.
unsigned char** sources(std::span<const uint8_t* const> data) {
  return const_cast<unsigned char**>(reinterpret_cast<const unsigned char* const*>(data.data()));
}

}  // namespace

std::string describe(ChunkSet set, uint32_t chunks) {
  std::string out;
  for (uint32_t i = 0; i < chunks; ++i) {
    if (!set.test(i)) continue;
    if (!out.empty()) out += ',';
    out += std::to_string(i);
  }
  return out.empty() ? "none" : out;
}

Result<RsCodec> RsCodec::Create(uint32_t k, uint32_t m) {
  if (k < 1 || m < 1 || k + m > kMaxChunks) {
    return Status::InvalidArgument("ec " + std::to_string(k) + "+" + std::to_string(m) +
                                   ": needs K >= 1, M >= 1 and K + M <= " +
                                   std::to_string(kMaxChunks));
  }
  return RsCodec(k, m);
}

RsCodec::RsCodec(uint32_t k, uint32_t m) : k_(k), m_(m), matrix_((k + m) * k) {
  gf_gen_cauchy1_matrix(matrix_.data(), static_cast<int>(k + m), static_cast<int>(k));
  parity_tbls_.resize(32 * k * m);
  ec_init_tables(static_cast<int>(k), static_cast<int>(m), matrix_.data() + k * k,
                 parity_tbls_.data());
}

std::string RsCodec::name() const { return std::to_string(k_) + "+" + std::to_string(m_); }

Status RsCodec::CheckLength(size_t len, const char* op) const {
  if (len > kMaxLen) {
    return Status::InvalidArgument("ec " + name() + " " + op + ": length " + std::to_string(len) +
                                   " exceeds " + std::to_string(kMaxLen));
  }
  return Status::OK();
}

Status RsCodec::Encode(std::span<const uint8_t* const> data, std::span<uint8_t* const> parity,
                       size_t len) const {
  if (data.size() != k_ || parity.size() != m_) {
    return Status::InvalidArgument("ec " + name() + " encode: given " +
                                   std::to_string(data.size()) + " data and " +
                                   std::to_string(parity.size()) + " parity chunks");
  }
  for (uint32_t i = 0; i < k_ + m_; ++i) {
    if ((i < k_ ? static_cast<const void*>(data[i]) : parity[i - k_]) == nullptr) {
      return Status::InvalidArgument("ec " + name() + " encode: chunk " + std::to_string(i) +
                                     " has no buffer");
    }
  }
  SURGE_RETURN_IF_ERROR(CheckLength(len, "encode"));
  if (len == 0) return Status::OK();
  ec_encode_data(static_cast<int>(len), static_cast<int>(k_), static_cast<int>(m_),
                 const_cast<unsigned char*>(parity_tbls_.data()), sources(data),
                 const_cast<unsigned char**>(parity.data()));
  return Status::OK();
}

Status RsCodec::UpdateParity(uint32_t index, const uint8_t* delta,
                             std::span<uint8_t* const> parity, size_t len) const {
  if (index >= k_ || parity.size() != m_) {
    return Status::InvalidArgument("ec " + name() + " parity update: data chunk " +
                                   std::to_string(index) + " with " +
                                   std::to_string(parity.size()) + " parity chunks");
  }
  SURGE_RETURN_IF_ERROR(CheckLength(len, "parity update"));
  if (len == 0) return Status::OK();
  ec_encode_data_update(static_cast<int>(len), static_cast<int>(k_), static_cast<int>(m_),
                        static_cast<int>(index), const_cast<unsigned char*>(parity_tbls_.data()),
                        const_cast<unsigned char*>(delta),
                        const_cast<unsigned char**>(parity.data()));
  return Status::OK();
}

Status RsCodec::UpdateOneParity(uint32_t index, uint32_t j, const uint8_t* delta, uint8_t* parity,
                                size_t len) const {
  if (index >= k_ || j >= m_) {
    return Status::InvalidArgument("ec " + name() + " parity update: data chunk " +
                                   std::to_string(index) + " into parity " + std::to_string(j));
  }
  SURGE_RETURN_IF_ERROR(CheckLength(len, "parity update"));
  if (len == 0) return Status::OK();
  // ec_init_tables lays the tables out row by row, 32 bytes per
  // coefficient: row j's are its own K x 32 bytes.
  unsigned char* out[1] = {parity};
  ec_encode_data_update(static_cast<int>(len), static_cast<int>(k_), 1, static_cast<int>(index),
                        const_cast<unsigned char*>(parity_tbls_.data()) + size_t{32} * k_ * j,
                        const_cast<unsigned char*>(delta), out);
  return Status::OK();
}

Status RsCodec::Reconstruct(std::span<uint8_t* const> chunks, ChunkSet present, ChunkSet want,
                            size_t len) const {
  const uint32_t n = k_ + m_;
  if (chunks.size() != n) {
    return Status::InvalidArgument("ec " + name() + " reconstruct: given " +
                                   std::to_string(chunks.size()) + " chunks, not " +
                                   std::to_string(n));
  }
  ChunkSet beyond;
  for (uint32_t i = n; i < kMaxChunks; ++i) beyond.set(i);
  if ((present & beyond).any() || (want & beyond).any() || (present & want).any()) {
    return Status::InvalidArgument("ec " + name() + " reconstruct: present {" +
                                   describe(present, kMaxChunks) + "} and wanted {" +
                                   describe(want, kMaxChunks) +
                                   "} must be disjoint chunks below " + std::to_string(n));
  }
  if (present.count() < k_) {
    return Status::Unavailable("ec " + name() + ": cannot rebuild chunks {" + describe(want, n) +
                               "}: only chunks {" + describe(present, n) + "} of " +
                               std::to_string(n) + " present, " + std::to_string(k_) +
                               " needed");
  }
  for (uint32_t i = 0; i < n; ++i) {
    if ((present.test(i) || want.test(i)) && chunks[i] == nullptr) {
      return Status::InvalidArgument("ec " + name() + " reconstruct: chunk " + std::to_string(i) +
                                     " has no buffer");
    }
  }
  SURGE_RETURN_IF_ERROR(CheckLength(len, "reconstruct"));
  if (want.none() || len == 0) return Status::OK();

  // The first K present chunks and their rows of the generator.
  std::vector<uint8_t*> survivors;
  std::vector<uint8_t> sub(k_ * k_);
  for (uint32_t i = 0; i < n && survivors.size() < k_; ++i) {
    if (!present.test(i)) continue;
    std::copy_n(&matrix_[i * k_], k_, &sub[survivors.size() * k_]);
    survivors.push_back(chunks[i]);
  }
  // inv maps the survivors back to the data: data = inv * survivors.
  std::vector<uint8_t> inv(k_ * k_);
  if (gf_invert_matrix(sub.data(), inv.data(), static_cast<int>(k_)) != 0) {
    // Cannot happen with a Cauchy generator; a failure here is a bug.
    return Status::Internal("ec " + name() + ": survivor matrix of chunks {" +
                            describe(present, n) + "} is singular");
  }
  // Row of a wanted chunk over the survivors: its generator row times inv
  // (a data chunk's generator row is a unit vector, so that is a row of inv).
  std::vector<uint8_t> rows;
  std::vector<uint8_t*> outputs;
  for (uint32_t w = 0; w < n; ++w) {
    if (!want.test(w)) continue;
    for (uint32_t j = 0; j < k_; ++j) {
      uint8_t c = 0;
      for (uint32_t i = 0; i < k_; ++i) c ^= gf_mul(matrix_[w * k_ + i], inv[i * k_ + j]);
      rows.push_back(c);
    }
    outputs.push_back(chunks[w]);
  }
  const int nwant = static_cast<int>(outputs.size());
  std::vector<uint8_t> tbls(32 * k_ * outputs.size());
  ec_init_tables(static_cast<int>(k_), nwant, rows.data(), tbls.data());
  ec_encode_data(static_cast<int>(len), static_cast<int>(k_), nwant, tbls.data(),
                 survivors.data(), outputs.data());
  return Status::OK();
}

}  // namespace surge::ec
