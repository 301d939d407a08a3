// MdsLink: the client's connection to the metadata service: one MDS, or
// several serving one file system from one etcd cluster
// ("tcp://a:7100,tcp://b:7100"). Calls go to the MDS that answered last;
// on a dropped or refused connection the call moves to the next address at
// once, and after every address failed it waits (50 ms doubling to 500 ms)
// and goes round again, for up to retry_for in all. So a restarting MDS,
// or a dead one with another still serving, is invisible to the mount
// beyond a pause.
//
// A request the MDS may have executed before the connection dropped is sent
// again, to whichever MDS answers: creates, mknods, mkdirs and symlinks
// carry an op id the MDS keeps with the new inode, and links, unlinks,
// rmdirs and renames one it keeps as a done-op record for ten minutes, in
// the same batch as the change; so every MDS answers a resend as the first
// did (mds/namespace/namespace.h, op_done).
#pragma once

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "common/log.h"
#include "common/status.h"
#include "net/address_list.h"
#include "net/rpc_channel.h"

namespace surge::client {

class MdsLink {
 public:
  // Splits a comma-separated list; InvalidArgument when an entry is empty.
  static Result<std::vector<std::string>> ParseAddresses(const std::string& list);

  MdsLink(std::vector<std::string> addresses, const net::ChannelOptions& options,
          std::chrono::milliseconds retry_for)
      : addresses_(std::move(addresses)), pool_(options), retry_for_(retry_for) {}

  // The MDS calls go to now.
  const std::string& address() const { return addresses_[current_.load() % addresses_.size()]; }
  const std::vector<std::string>& addresses() const { return addresses_; }

  template <typename M>
  Status call(const typename M::Request& req, typename M::Response* resp) {
    const auto deadline = std::chrono::steady_clock::now() + retry_for_;
    auto backoff = std::chrono::milliseconds(50);
    size_t index = current_.load();
    size_t failed_in_round = 0;
    bool first_round = true;  // warn in the first round only, not every 500 ms
    std::string errors;       // one per address of the round that just failed
    bool answered = false;    // the last failure was an answer (Unavailable), not a lost link
    for (;;) {
      const std::string& addr = addresses_[index % addresses_.size()];
      Status st;
      auto ch = pool_.get(addr);
      if (ch.ok()) {
        st = (*ch)->template call<M>(req, resp);
        if (st.ok() || !retryable(st.code())) {
          current_.store(index % addresses_.size());
          return st;
        }
      } else {
        st = ch.status();
        if (!retryable(st.code())) return st.WithContext("connecting to the MDS at " + addr);
      }
      // An MDS that answered Unavailable (a data server it needs is down,
      // an election) is reachable: its connection stays.
      answered = ch.ok() && st.code() == Code::kUnavailable;
      if (!answered) pool_.drop(addr);
      errors += (errors.empty() ? "" : "; ") + addr + ": " + st.ToString();
      if (addresses_.size() > 1 && first_round) {
        SLOG_WARN("client: MDS at {}: {}; trying {}", addr, st.ToString(),
                  addresses_[(index + 1) % addresses_.size()]);
      }
      ++index;
      if (++failed_in_round < addresses_.size()) continue;  // the next MDS, at once
      if (std::chrono::steady_clock::now() + backoff > deadline) {
        const std::string who = addresses_.size() > 1 ? "every MDS" : "the MDS";
        return Status::IOError(
            who + (answered ? " answered that it cannot do this now, for " : " unreachable for ") +
            std::to_string(retry_for_.count()) + " ms: " + errors);
      }
      if (addresses_.size() == 1 && first_round) {
        SLOG_WARN("client: MDS at {}: {}; retrying", addr, st.ToString());
      }
      std::this_thread::sleep_for(backoff);
      backoff = std::min(backoff * 2, std::chrono::milliseconds(500));
      failed_in_round = 0;
      first_round = false;
      errors.clear();
    }
  }

 private:
  static bool retryable(Code c) {
    return c == Code::kDisconnected || c == Code::kConnectionRefused || c == Code::kUnavailable ||
           c == Code::kCancelled;
  }

  std::vector<std::string> addresses_;  // never empty
  std::atomic<size_t> current_{0};      // index of the MDS that answered last
  net::ChannelPool pool_;
  std::chrono::milliseconds retry_for_;
};

inline Result<std::vector<std::string>> MdsLink::ParseAddresses(const std::string& list) {
  return net::parse_address_list(list, "MDS address");
}

}  // namespace surge::client
