// What every Surge fuzzer shares: a reader over the fuzz input, a server
// that captures the handlers a service registers (so an input is decoded
// and dispatched by the very handler the daemon runs, without sockets), a
// bulk handle whose regions the input describes, temp dirs, and the seed
// writer (SURGE_FUZZ_WRITE_SEEDS=DIR makes a fuzzer write its seed corpus
// to DIR and exit; scripts/fuzz.sh --seeds regenerates tests/fuzz/corpus/).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "net/buffer_pool.h"
#include "net/bulk.h"
#include "net/rpc_server.h"

namespace surge::fuzz {

// Consumes the fuzz input front to back; past the end every read yields
// zeros / empty, so a harness never needs to check lengths first.
class ByteReader {
 public:
  ByteReader(const uint8_t* data, size_t size) : p_(data), left_(size) {}
  bool empty() const { return left_ == 0; }
  size_t left() const { return left_; }
  uint8_t u8();
  uint16_t u16();
  uint32_t u32();
  uint64_t u64();
  // Up to n bytes (fewer at the end of the input).
  std::string_view bytes(size_t n);
  std::string_view rest() { return bytes(left_); }

 private:
  const uint8_t* p_;
  size_t left_;
};

// An RpcServer that only records add_raw(): the fuzzers call the recorded
// handlers directly, exactly as the RPC core would after the transport
// decoded a frame.
class CapturingServer final : public net::RpcServer {
 public:
  explicit CapturingServer(net::BufferPool& pool) : pool_(pool) {}
  struct Entry {
    uint16_t service;
    uint16_t method;
    net::RawHandler fn;
    net::HandlerMode mode;
  };
  void add_raw(uint16_t service, uint16_t method, net::RawHandler handler,
               net::HandlerMode mode) override;
  // Lanes only pick worker threads; the fuzzers call handlers directly.
  void route(uint16_t, uint16_t, net::LaneOf) override {}
  Status start() override { return Status::OK(); }
  void stop() override {}
  std::string address() const override { return "fuzz://in-process"; }
  uint16_t port() const override { return 0; }
  net::BufferPool& pool() override { return pool_; }

  // In method-id order.
  const std::vector<Entry>& handlers() const { return handlers_; }

 private:
  net::BufferPool& pool_;
  std::vector<Entry> handlers_;
};

// The regions of one request as the input describes them, with the
// transport's bounds and access checks (what TcpRequestBulk enforces).
// Pulled bytes are a pattern of their position; the peer "disconnects"
// after `pull_budget` pulled bytes, so short payloads are covered too.
class FuzzBulk final : public net::BulkHandle {
 public:
  FuzzBulk(std::vector<net::BulkRegion> regions, uint64_t pull_budget)
      : regions_(std::move(regions)), pull_budget_(pull_budget) {}
  size_t count() const override { return regions_.size(); }
  uint64_t length(size_t r) const override { return r < regions_.size() ? regions_[r].length : 0; }
  net::BulkAccess access(size_t r) const override {
    return r < regions_.size() ? regions_[r].access : net::BulkAccess::kServerPull;
  }
  Status pull(size_t region, uint64_t offset, std::span<std::byte> dst) override;
  Status push(size_t region, uint64_t offset, std::span<const std::byte> src) override;

 private:
  Status check(size_t region, uint64_t offset, uint64_t len, net::BulkAccess want) const;
  std::vector<net::BulkRegion> regions_;
  uint64_t pull_budget_;
};

class FuzzContext final : public net::RpcContext {
 public:
  FuzzContext(net::BulkHandle& bulk, net::BufferPool& pool) : bulk_(bulk), pool_(pool) {}
  net::BulkHandle& bulk() override { return bulk_; }
  const std::string& peer() const override { return peer_; }
  net::BufferPool& pool() override { return pool_; }

 private:
  net::BulkHandle& bulk_;
  net::BufferPool& pool_;
  std::string peer_ = "fuzz://peer";
};

// Reads one request record from the input and runs it through the handler
// it names:  u8 handler index (mod the count), u8 region count (mod 4),
// per region {u8 access (odd: pull), u32 length (mod max_region + 1)},
// u32 pull budget, u16 body length, body bytes. Returns false at the end
// of the input.
bool dispatch_one(ByteReader& in, const CapturingServer& server, net::BufferPool& pool,
                  uint64_t max_region);

// Encodes one such record (the seed writers use it).
std::string encode_record(uint8_t handler_index, const std::vector<net::BulkRegion>& regions,
                          uint32_t pull_budget, std::string_view body);

// A fresh directory under $TMPDIR (or /tmp), removed at process exit.
std::string make_temp_dir(const char* prefix);

// Seeds: called from LLVMFuzzerInitialize. When SURGE_FUZZ_WRITE_SEEDS is
// set, runs `write` with that directory and exits.
using SeedWriter = std::function<void(const std::string& dir)>;
void maybe_write_seeds(const SeedWriter& write);
void write_seed(const std::string& dir, const std::string& name, std::string_view bytes);

// Logging off: a fuzzer logs every refused input otherwise.
void quiet_logs();

}  // namespace surge::fuzz
