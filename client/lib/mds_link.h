// MdsLink: the client's connection to the metadata server. Calls are
// retried across a dropped or refused connection for up to retry_for, so a
// restarting MDS is invisible to the mount beyond a pause. A request the MDS
// may have executed before the connection dropped is sent again: creates,
// mknods, mkdirs and symlinks carry an op id the MDS keeps with the new
// inode, so their resend answers as the first did; a resent link, unlink,
// rmdir or rename can still report EEXIST or ENOENT for its own earlier
// success, as on NFS without a reply cache.
#pragma once

#include <chrono>
#include <string>
#include <thread>

#include "common/log.h"
#include "common/status.h"
#include "net/rpc_channel.h"

namespace surge::client {

class MdsLink {
 public:
  MdsLink(std::string address, const net::ChannelOptions& options,
          std::chrono::milliseconds retry_for)
      : address_(std::move(address)), pool_(options), retry_for_(retry_for) {}

  const std::string& address() const { return address_; }

  template <typename M>
  Status call(const typename M::Request& req, typename M::Response* resp) {
    auto deadline = std::chrono::steady_clock::now() + retry_for_;
    auto backoff = std::chrono::milliseconds(50);
    for (int attempt = 0;; ++attempt) {
      Status st;
      auto ch = pool_.get(address_);
      if (ch.ok()) {
        st = (*ch)->template call<M>(req, resp);
        if (st.ok() || !retryable(st.code())) return st;
      } else {
        st = ch.status();
        if (!retryable(st.code())) return st.WithContext("connecting to the MDS at " + address_);
      }
      pool_.drop(address_);
      if (std::chrono::steady_clock::now() + backoff > deadline) {
        return Status::IOError("MDS at " + address_ + " unreachable for " +
                               std::to_string(retry_for_.count()) + " ms: " + st.ToString());
      }
      if (attempt == 0) SLOG_WARN("client: MDS at {}: {}; retrying", address_, st.ToString());
      std::this_thread::sleep_for(backoff);
      backoff = std::min(backoff * 2, std::chrono::milliseconds(500));
    }
  }

 private:
  static bool retryable(Code c) {
    return c == Code::kDisconnected || c == Code::kConnectionRefused || c == Code::kUnavailable ||
           c == Code::kCancelled;
  }

  std::string address_;
  net::ChannelPool pool_;
  std::chrono::milliseconds retry_for_;
};

}  // namespace surge::client
