// CloseQueue (client/lib/close_queue.h): releases are gathered into
// batches of one session, sent in posting order, and never held back by
// a drain, a full batch or the queue's end; the client's sender makes a
// batch one MDS call, or one call per close for an MDS without batches.
// The MDS side of a batch is SessionStoreTest.ABatchOfClosesEndsOneOpenPerIno.
#include "client/lib/close_queue.h"

#include <gtest/gtest.h>

#include <chrono>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "client/lib/mds_link.h"
#include "net/proto/mds_methods.h"
#include "tests/net/net_test_util.h"

namespace surge::client {
namespace {

using namespace std::chrono_literals;

struct Batch {
  uint64_t session;
  std::vector<uint64_t> inos;
  bool operator==(const Batch&) const = default;
};

void PrintTo(const Batch& b, std::ostream* os) {
  *os << "{session " << b.session << ":";
  for (uint64_t i : b.inos) *os << " " << i;
  *os << "}";
}

// Records every send; thread-safe.
struct Recorder {
  std::mutex mu;
  std::vector<Batch> batches;
  CloseQueue::Send sender() {
    return [this](uint64_t session, std::span<const uint64_t> inos) {
      std::lock_guard lk(mu);
      batches.push_back({session, {inos.begin(), inos.end()}});
      return Status::OK();
    };
  }
  std::vector<Batch> seen() {
    std::lock_guard lk(mu);
    return batches;
  }
};

// A window no test waits out: only a drain, a full batch or the end sends.
constexpr CloseQueue::Options kNoWindow{std::chrono::hours(1), 4};

TEST(CloseQueue, ADrainSendsWhatWasPostedAsOneBatchAtOnce) {
  Recorder r;
  CloseQueue q(r.sender(), kNoWindow);
  q.post(7, 10);
  q.post(7, 11);
  q.post(7, 12);
  q.drain();
  EXPECT_EQ(r.seen(), (std::vector<Batch>{{7, {10, 11, 12}}}));
}

TEST(CloseQueue, ADrainForOneInoWaitsOnlyWhenItsReleaseIsQueued) {
  Recorder r;
  CloseQueue q(r.sender(), kNoWindow);
  q.post(7, 10);
  q.post(7, 11);
  q.drain_if_queued(12);
  EXPECT_TRUE(r.seen().empty()) << "no release of inode 12 was queued";
  q.drain_if_queued(11);
  EXPECT_EQ(r.seen(), (std::vector<Batch>{{7, {10, 11}}}));
}

TEST(CloseQueue, AFullBatchGoesWithoutWaitingForTheWindow) {
  Recorder r;
  CloseQueue q(r.sender(), kNoWindow);
  for (uint64_t ino = 1; ino <= 9; ++ino) q.post(7, ino);
  // Two full batches go by themselves; the ninth waits for the drain.
  for (int i = 0; i < 1000 && r.seen().size() < 2; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(r.seen(), (std::vector<Batch>{{7, {1, 2, 3, 4}}, {7, {5, 6, 7, 8}}}));
  q.drain();
  EXPECT_EQ(r.seen().back(), (Batch{7, {9}}));
}

TEST(CloseQueue, ABatchHoldsOneSessionAndTheOrderIsKept) {
  Recorder r;
  CloseQueue q(r.sender(), kNoWindow);
  q.post(1, 10);
  q.post(1, 11);
  q.post(2, 12);
  q.post(1, 13);
  q.drain();
  EXPECT_EQ(r.seen(), (std::vector<Batch>{{1, {10, 11}}, {2, {12}}, {1, {13}}}));
}

TEST(CloseQueue, TheWindowPassingSendsWithoutADrain) {
  Recorder r;
  CloseQueue q(r.sender(), CloseQueue::Options{20ms, 512});
  q.post(7, 10);
  // Liveness, not timing: sent well within the 10 s this allows.
  for (int i = 0; i < 1000 && r.seen().empty(); ++i) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(r.seen(), (std::vector<Batch>{{7, {10}}}));
}

TEST(CloseQueue, TheEndSendsWhatIsStillQueued) {
  Recorder r;
  {
    CloseQueue q(r.sender(), kNoWindow);
    q.post(7, 10);
    q.post(7, 11);
  }
  EXPECT_EQ(r.seen(), (std::vector<Batch>{{7, {10, 11}}}));
}

TEST(CloseQueue, AFailedSendIsNotRetriedAndDoesNotStopTheQueue) {
  std::mutex mu;
  std::vector<uint64_t> sent;
  CloseQueue q(
      [&](uint64_t, std::span<const uint64_t> inos) {
        std::lock_guard lk(mu);
        sent.insert(sent.end(), inos.begin(), inos.end());
        return Status::IOError("MDS unreachable");
      },
      kNoWindow);
  q.post(7, 10);
  q.drain();
  q.post(7, 11);
  q.drain();
  std::lock_guard lk(mu);
  EXPECT_EQ(sent, (std::vector<uint64_t>{10, 11}));
}

// An MDS in this process answering closes, with or without the batched
// method (without it: an MDS from before it).
class CloseServer {
 public:
  explicit CloseServer(bool batches) {
    auto s = net::RpcServer::Create(net::testing::default_server_options());
    if (!s.ok()) {
      ADD_FAILURE() << s.status().ToString();
      return;
    }
    server_ = std::move(*s);
    server_->add<proto::mds::MdsClose>(
        [this](net::RpcContext&, const proto::mds::CloseRequest& req, proto::mds::CloseReply&) {
          std::lock_guard lk(mu_);
          calls_.push_back({req.session_id(), {req.ino()}});
          return Status::OK();
        });
    if (batches) {
      server_->add<proto::mds::MdsCloseMany>([this](net::RpcContext&,
                                                    const proto::mds::CloseManyRequest& req,
                                                    proto::mds::CloseReply&) {
        std::lock_guard lk(mu_);
        calls_.push_back({req.session_id(), {req.inos().begin(), req.inos().end()}});
        return Status::OK();
      });
    }
    Status st = server_->start();
    EXPECT_TRUE(st.ok()) << st.ToString();
  }
  ~CloseServer() {
    if (server_) server_->stop();
  }
  std::string address() const { return server_->address(); }
  std::vector<Batch> calls() {
    std::lock_guard lk(mu_);
    return calls_;
  }

 private:
  std::unique_ptr<net::RpcServer> server_;
  std::mutex mu_;
  std::vector<Batch> calls_;
};

MdsLink link_to(const CloseServer& s) {
  net::ChannelOptions o;
  o.cluster_key = net::testing::kTestKey;
  return MdsLink({s.address()}, o, std::chrono::seconds(10));
}

TEST(MdsCloseSender, SendsABatchAsOneCall) {
  CloseServer mds(true);
  MdsLink link = link_to(mds);
  auto send = mds_close_sender(&link);
  const std::vector<uint64_t> inos{10, 11, 12};
  ASSERT_TRUE(send(7, inos).ok());
  EXPECT_EQ(mds.calls(), (std::vector<Batch>{{7, {10, 11, 12}}}));
}

TEST(MdsCloseSender, ClosesOneByOneForAnMdsWithoutBatches) {
  CloseServer mds(false);
  MdsLink link = link_to(mds);
  auto send = mds_close_sender(&link);
  const std::vector<uint64_t> first{10, 11};
  ASSERT_TRUE(send(7, first).ok());
  const std::vector<uint64_t> second{12, 13};
  ASSERT_TRUE(send(7, second).ok());
  EXPECT_EQ(mds.calls(), (std::vector<Batch>{{7, {10}}, {7, {11}}, {7, {12}}, {7, {13}}}));
}

}  // namespace
}  // namespace surge::client
