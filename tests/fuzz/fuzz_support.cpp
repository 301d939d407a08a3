// Shared fuzzer plumbing; see fuzz_support.h.
#include "tests/fuzz/fuzz_support.h"

#include <spdlog/spdlog.h>
#include <stdlib.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>

namespace surge::fuzz {

uint8_t ByteReader::u8() {
  if (left_ == 0) return 0;
  --left_;
  return *p_++;
}
uint16_t ByteReader::u16() { return static_cast<uint16_t>(u8() | (uint16_t{u8()} << 8)); }
uint32_t ByteReader::u32() { return u16() | (uint32_t{u16()} << 16); }
uint64_t ByteReader::u64() { return u32() | (uint64_t{u32()} << 32); }
std::string_view ByteReader::bytes(size_t n) {
  n = std::min(n, left_);
  std::string_view out(reinterpret_cast<const char*>(p_), n);
  p_ += n;
  left_ -= n;
  return out;
}

void CapturingServer::add_raw(uint16_t service, uint16_t method, net::RawHandler handler,
                              net::HandlerMode mode) {
  handlers_.push_back(Entry{service, method, std::move(handler), mode});
  std::sort(handlers_.begin(), handlers_.end(), [](const Entry& a, const Entry& b) {
    return a.service != b.service ? a.service < b.service : a.method < b.method;
  });
}

Status FuzzBulk::check(size_t region, uint64_t offset, uint64_t len, net::BulkAccess want) const {
  if (region >= regions_.size()) return Status::InvalidArgument("fuzz bulk: no region " + std::to_string(region));
  if (regions_[region].access != want) return Status::InvalidArgument("fuzz bulk: wrong access");
  if (offset > regions_[region].length || len > regions_[region].length - offset) {
    return Status::OutOfRange("fuzz bulk: past the region");
  }
  return Status::OK();
}

Status FuzzBulk::pull(size_t region, uint64_t offset, std::span<std::byte> dst) {
  SURGE_RETURN_IF_ERROR(check(region, offset, dst.size(), net::BulkAccess::kServerPull));
  if (dst.size() > pull_budget_) {
    pull_budget_ = 0;
    return Status::Disconnected("fuzz peer closed mid-payload");
  }
  pull_budget_ -= dst.size();
  for (size_t i = 0; i < dst.size(); ++i) dst[i] = std::byte(static_cast<uint8_t>((offset + i) * 131));
  return Status::OK();
}

Status FuzzBulk::push(size_t region, uint64_t offset, std::span<const std::byte> src) {
  SURGE_RETURN_IF_ERROR(check(region, offset, src.size(), net::BulkAccess::kServerPush));
  // Touch every byte, so the sanitizer sees a handler push memory it
  // does not own or never initialized.
  volatile uint8_t sum = 0;
  for (std::byte b : src) sum = static_cast<uint8_t>(sum + std::to_integer<uint8_t>(b));
  (void)sum;
  return Status::OK();
}

bool dispatch_one(ByteReader& in, const CapturingServer& server, net::BufferPool& pool,
                  uint64_t max_region) {
  if (in.empty() || server.handlers().empty()) return false;
  const auto& entry = server.handlers()[in.u8() % server.handlers().size()];
  std::vector<net::BulkRegion> regions(in.u8() % 4);
  for (auto& r : regions) {
    r.access = (in.u8() & 1) ? net::BulkAccess::kServerPull : net::BulkAccess::kServerPush;
    r.length = in.u32() % (max_region + 1);
  }
  const uint32_t budget = in.u32();
  const std::string body(in.bytes(in.u16()));
  FuzzBulk bulk(std::move(regions), budget);
  FuzzContext ctx(bulk, pool);
  std::string response;
  // A handler's error is an answer like any other: only crashes, leaks and
  // hangs are findings. (The RPC core turns a throw into Internal; a
  // handler that throws is a bug all the same, so it is not caught here.)
  (void)entry.fn(ctx, body, response);
  return true;
}

std::string encode_record(uint8_t handler_index, const std::vector<net::BulkRegion>& regions,
                          uint32_t pull_budget, std::string_view body) {
  std::string out;
  auto put = [&out](uint64_t v, int n) {
    for (int i = 0; i < n; ++i) out.push_back(static_cast<char>(v >> (8 * i)));
  };
  put(handler_index, 1);
  put(regions.size(), 1);
  for (const auto& r : regions) {
    put(r.access == net::BulkAccess::kServerPull ? 1 : 2, 1);
    put(r.length, 4);
  }
  put(pull_budget, 4);
  put(body.size(), 2);
  out.append(body);
  return out;
}

namespace {
std::mutex temp_mu;
std::vector<std::string>* temp_dirs = nullptr;
void remove_temp_dirs() {
  std::lock_guard lk(temp_mu);
  if (temp_dirs == nullptr) return;
  for (const auto& d : *temp_dirs) {
    std::error_code ec;
    std::filesystem::remove_all(d, ec);
  }
}
}  // namespace

std::string make_temp_dir(const char* prefix) {
  const char* base = getenv("TMPDIR");
  std::string tmpl = std::string(base != nullptr && *base != 0 ? base : "/tmp") + "/" + prefix + "-XXXXXX";
  if (mkdtemp(tmpl.data()) == nullptr) {
    std::perror(("mkdtemp " + tmpl).c_str());
    std::abort();
  }
  std::lock_guard lk(temp_mu);
  if (temp_dirs == nullptr) {
    temp_dirs = new std::vector<std::string>;
    std::atexit(remove_temp_dirs);
  }
  temp_dirs->push_back(tmpl);
  return tmpl;
}

void maybe_write_seeds(const SeedWriter& write) {
  const char* dir = getenv("SURGE_FUZZ_WRITE_SEEDS");
  if (dir == nullptr || *dir == 0) return;
  std::filesystem::create_directories(dir);
  write(dir);
  std::exit(0);
}

void write_seed(const std::string& dir, const std::string& name, std::string_view bytes) {
  std::ofstream f(dir + "/" + name, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!f) {
    std::fprintf(stderr, "cannot write seed %s/%s\n", dir.c_str(), name.c_str());
    std::exit(1);
  }
}

void quiet_logs() { spdlog::set_level(spdlog::level::off); }

}  // namespace surge::fuzz
