// Test service handlers. Bulk handlers stream through one pool buffer at a
// time (the way a data server would), so a 64 MiB region needs no 64 MiB
// allocation.
#include "tests/net/test_service.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include "common/crc32c.h"
#include "net/proto/test_methods.h"

namespace surge::net::testing {

namespace pt = surge::proto::test;

void fill_pattern(std::span<std::byte> out, uint32_t seed, uint64_t pos) {
  for (size_t i = 0; i < out.size(); ++i) {
    uint64_t x = pos + i;
    out[i] = std::byte(static_cast<uint8_t>((x * 131) ^ (x >> 11) ^ (seed * 29)));
  }
}

namespace {

Status echo(const pt::EchoRequest& req, pt::EchoReply& resp, bool may_sleep) {
  if (may_sleep && req.sleep_ms() > 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(req.sleep_ms()));
  }
  if (req.fail_code() != 0) {
    return Status(static_cast<Code>(req.fail_code()), req.fail_message());
  }
  resp.set_payload(req.payload());
  return Status::OK();
}

Result<PoolBuffer> chunk_buffer(RpcContext& ctx) {
  return ctx.pool().acquire(ctx.pool().max_buffer_size(), std::chrono::seconds(10));
}

}  // namespace

void register_test_service(RpcServer& server, HandlerMode data_mode) {
  server.add<pt::TestEcho>([](RpcContext&, const pt::EchoRequest& req, pt::EchoReply& resp) {
    return echo(req, resp, true);
  });
  server.add<pt::TestEchoInline>(
      [](RpcContext&, const pt::EchoRequest& req, pt::EchoReply& resp) {
        return echo(req, resp, false);
      },
      HandlerMode::kInline);

  server.add<pt::TestBulkEcho>([](RpcContext& ctx, const pt::BulkRequest&, pt::BulkReply& resp) {
    BulkHandle& bulk = ctx.bulk();
    if (bulk.count() != 2 || bulk.length(0) != bulk.length(1)) {
      return Status::InvalidArgument("bulk echo wants two regions of equal length");
    }
    SURGE_ASSIGN_OR_RETURN(PoolBuffer buf, chunk_buffer(ctx));
    uint32_t crc = 0;
    for (uint64_t off = 0; off < bulk.length(0);) {
      size_t n = static_cast<size_t>(std::min<uint64_t>(buf.capacity(), bulk.length(0) - off));
      std::span<std::byte> chunk(buf.data(), n);
      SURGE_RETURN_IF_ERROR(bulk.pull(0, off, chunk));
      crc = crc32c(chunk.data(), n, crc);
      SURGE_RETURN_IF_ERROR(bulk.push(1, off, chunk));
      off += n;
    }
    resp.set_crc32c(crc);
    resp.set_length(bulk.length(0));
    return Status::OK();
  });

  server.add<pt::TestBulkSink>(
      [](RpcContext& ctx, const pt::BulkRequest& req, pt::BulkReply& resp) {
        BulkHandle& bulk = ctx.bulk();
        if (bulk.count() < 1) return Status::InvalidArgument("bulk sink wants a region");
        uint64_t end = req.length() == 0 ? bulk.length(0) : req.offset() + req.length();
        SURGE_ASSIGN_OR_RETURN(PoolBuffer buf, chunk_buffer(ctx));
        uint32_t crc = 0;
        for (uint64_t off = req.offset(); off < end;) {
          size_t n = static_cast<size_t>(std::min<uint64_t>(buf.capacity(), end - off));
          SURGE_RETURN_IF_ERROR(bulk.pull(0, off, {buf.data(), n}));
          if (!req.skip_checksum()) crc = crc32c(buf.data(), n, crc);
          off += n;
        }
        resp.set_crc32c(crc);
        resp.set_length(end - req.offset());
        return Status::OK();
      },
      data_mode);

  server.add<pt::TestBulkSource>(
      [](RpcContext& ctx, const pt::BulkRequest& req, pt::BulkReply& resp) {
        BulkHandle& bulk = ctx.bulk();
        if (bulk.count() < 1) return Status::InvalidArgument("bulk source wants a region");
        if (req.sleep_ms() > 0) std::this_thread::sleep_for(std::chrono::milliseconds(req.sleep_ms()));
        uint64_t len = req.length() == 0 ? bulk.length(0) - std::min(req.offset(), bulk.length(0))
                                         : req.length();
        SURGE_ASSIGN_OR_RETURN(PoolBuffer buf, chunk_buffer(ctx));
        uint32_t crc = 0;
        for (uint64_t done = 0; done < len;) {
          size_t n = static_cast<size_t>(std::min<uint64_t>(buf.capacity(), len - done));
          std::span<std::byte> chunk(buf.data(), n);
          if (!req.skip_checksum()) {
            fill_pattern(chunk, req.seed(), done);
            crc = crc32c(chunk.data(), n, crc);
          }
          // The last chunk hands its buffer over, as surge-ods's reads do.
          if (done + n == len) {
            SURGE_RETURN_IF_ERROR(bulk.push_owned(0, req.offset() + done, std::move(buf), n));
          } else {
            SURGE_RETURN_IF_ERROR(bulk.push(0, req.offset() + done, chunk));
          }
          done += n;
        }
        resp.set_crc32c(crc);
        resp.set_length(len);
        return Status::OK();
      },
      data_mode);
}

}  // namespace surge::net::testing
