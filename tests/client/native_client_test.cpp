// libsurge used directly (no FUSE): striping at every boundary, holes, the
// exact short read at end of file, a writer's own data visible past the MDS
// size before it is reported, the zero-copy registered buffers, layouts, and
// the C API.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

#include "common/crc32c.h"
#include "surge/surge.h"
#include "tests/client/local_cluster.h"

namespace surge::test {
namespace {

constexpr uint32_t kStripe = kSmallStripe;

class Native : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto c = LocalCluster::Start(small_stripes());
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    cluster_ = c->release();
  }
  static void TearDownTestSuite() {
    delete cluster_;
    cluster_ = nullptr;
  }
  void SetUp() override {
    ASSERT_NE(cluster_, nullptr);
    auto c = cluster_->connect();
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    client_ = std::move(*c);
  }
  // The file's bytes as one read of up to `max` bytes returns them.
  Result<std::string> read_back(const std::string& path, size_t max) {
    SURGE_ASSIGN_OR_RETURN(FileRef g, client_->open(path, O_RDONLY));
    std::string back(max, 'Z');
    SURGE_ASSIGN_OR_RETURN(size_t n, client_->pread(*g, back.data(), back.size(), 0));
    back.resize(n);
    SURGE_RETURN_IF_ERROR(client_->close(g));
    return back;
  }
  static LocalCluster* cluster_;
  std::unique_ptr<Client> client_;
};
LocalCluster* Native::cluster_ = nullptr;

TEST_F(Native, LayoutComesFromTheDirectoryDefault) {
  auto f = client_->open("/layout", O_RDWR | O_CREAT, 0644);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  auto l = client_->get_layout((*f)->ino(), Caller{});
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  EXPECT_EQ(l->stripe_size, kStripe);
  EXPECT_EQ(l->stripe_count, 3u);
  // The MDS's shipped default_replicas (2): a chain of two per slot.
  EXPECT_EQ(l->replicas, 2u);
  EXPECT_EQ(l->chains.size(), 3u);
  EXPECT_TRUE(l->targets.empty());
  EXPECT_TRUE(client_->close(*f).ok());
}

TEST_F(Native, EveryBoundaryRoundTrips) {
  const uint64_t S = kStripe, R = 3 * S;
  for (uint64_t off : {uint64_t{0}, uint64_t{1}, S - 1, S, R - 1, R + 5}) {
    for (uint64_t len : {uint64_t{1}, S - 1, S, S + 1, R, R + 1, 2 * R + 3, uint64_t{3} << 20}) {
      std::string name = "/b_" + std::to_string(off) + "_" + std::to_string(len);
      auto f = client_->open(name, O_RDWR | O_CREAT | O_TRUNC, 0644);
      ASSERT_TRUE(f.ok()) << f.status().ToString();
      std::string data = random_bytes(len, off * 31 + len);
      auto w = client_->pwrite(**f, data.data(), len, off);
      ASSERT_TRUE(w.ok()) << name << ": " << w.status().ToString();
      std::string back(len + 100, 'Z');
      auto r = client_->pread(**f, back.data(), back.size(), off);
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      ASSERT_EQ(*r, len) << name << ": short read must stop exactly at end of file";
      EXPECT_EQ(crc32c(back.data(), len), crc32c(data.data(), len)) << name;
      // The head before off is a hole.
      if (off > 0) {
        std::string head(off, 'Z');
        ASSERT_EQ(*client_->pread(**f, head.data(), off, 0), off);
        EXPECT_EQ(head, std::string(off, '\0')) << name;
      }
      ASSERT_TRUE(client_->close(*f).ok());
      auto st = client_->stat(name);
      ASSERT_TRUE(st.ok());
      EXPECT_EQ(st->size, off + len) << name << ": size reported on close";
    }
  }
}

TEST_F(Native, OpenByInodeReportsTheAttributesItFound) {
  auto f = client_->open("/open-attr", O_RDWR | O_CREAT, 0640);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  std::string data = random_bytes(70000, 41);
  ASSERT_TRUE(client_->pwrite(**f, data.data(), data.size(), 0).ok());
  const Ino ino = (*f)->ino();
  ASSERT_TRUE(client_->close(*f).ok());
  Attr a;
  auto g = client_->open(ino, O_RDONLY, Caller{}, &a);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(a.ino, ino);
  EXPECT_EQ(a.size, data.size());
  EXPECT_EQ(a.mode & 07777, 0640u);
  ASSERT_TRUE(client_->close(*g).ok());
}

TEST_F(Native, OwnWritesVisiblePastTheMdsSizeBeforeReport) {
  auto f = client_->open("/own", O_RDWR | O_CREAT, 0644);
  ASSERT_TRUE(f.ok());
  std::string data = random_bytes(200000, 4);
  ASSERT_TRUE(client_->pwrite(**f, data.data(), data.size(), 0).ok());
  // Not flushed: this client still reads all of it.
  std::string back(data.size(), '\0');
  auto r = client_->pread(**f, back.data(), back.size(), 0);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, data.size());
  EXPECT_TRUE(back == data);
  ASSERT_TRUE(client_->flush(**f).ok());
  // Another client sees the size after the flush.
  auto other = cluster_->connect();
  ASSERT_TRUE(other.ok());
  EXPECT_EQ((*other)->stat("/own")->size, data.size());
  ASSERT_TRUE(client_->close(*f).ok());
}

TEST_F(Native, OverlappingWritesBehindLandInProgramOrder) {
  // Write behind keeps several writes in flight; overlapping ones must
  // still land in the order they were made.
  auto f = client_->open("/overlap", O_RDWR | O_CREAT, 0644);
  ASSERT_TRUE(f.ok());
  std::string expect(400000, '\0');
  for (int i = 0; i < 60; ++i) {
    std::string d = random_bytes(100000 + i * 37, 1000 + i);
    uint64_t off = static_cast<uint64_t>(i % 7) * 30011;
    ASSERT_TRUE(client_->pwrite(**f, d.data(), d.size(), off).ok());
    memcpy(&expect[off], d.data(), d.size());
  }
  uint64_t end = 6 * 30011 + 100000 + 59 * 37;
  expect.resize(std::max<uint64_t>(end, 0));
  ASSERT_TRUE(client_->close(*f).ok());
  auto read = read_back("/overlap", expect.size() + 10);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  std::string& back = *read;
  EXPECT_EQ(back.size(), client_->stat("/overlap")->size);
  expect.resize(back.size());
  EXPECT_TRUE(back == expect);
}

TEST_F(Native, WritersOfOneFileSendSideBySideAndKeepEachOthersOrder) {
  // Threads writing one file send their writes side by side (the FUSE
  // workers of one stream do). Each thread's overlapping writes land in its
  // own order, and a write made after the threads are joined lands over
  // every one of theirs, even those still being sent when it was issued.
  auto f = client_->open("/side-by-side", O_RDWR | O_CREAT, 0644);
  ASSERT_TRUE(f.ok());
  constexpr int kThreads = 4;
  constexpr uint64_t kRegion = 1 << 20;
  std::string expect(kThreads * kRegion, '\0');
  std::vector<std::thread> ts;
  std::atomic<int> failures{0};
  for (int t = 0; t < kThreads; ++t) {
    ts.emplace_back([&, t] {
      for (int i = 0; i < 40; ++i) {
        std::string d = random_bytes(150000 + i * 53, 7000 + t * 100 + i);
        uint64_t off = t * kRegion + static_cast<uint64_t>(i % 6) * 131071;
        if (!client_->pwrite(**f, d.data(), d.size(), off).ok()) ++failures;
        memcpy(&expect[off], d.data(), d.size());  // regions are disjoint
      }
    });
  }
  for (auto& t : ts) t.join();
  ASSERT_EQ(failures.load(), 0);
  std::string last = random_bytes(kThreads * kRegion - 2 * 99991, 99);
  ASSERT_TRUE(client_->pwrite(**f, last.data(), last.size(), 99991).ok());
  memcpy(&expect[99991], last.data(), last.size());
  // The file ends where the last byte anyone wrote is (the final write's end here).
  expect.resize(99991 + last.size());
  ASSERT_TRUE(client_->close(*f).ok());
  auto back = read_back("/side-by-side", expect.size() + 10);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_EQ(back->size(), expect.size());
  EXPECT_TRUE(*back == expect);
}

TEST_F(Native, RegisteredBufferZeroCopyPath) {
  auto buf = client_->register_buffer(1 << 20);
  ASSERT_TRUE(buf.ok()) << buf.status().ToString();
  std::string data = random_bytes(1 << 20, 8);
  memcpy((*buf)->data(), data.data(), data.size());
  auto f = client_->open("/zc", O_RDWR | O_CREAT, 0644);
  ASSERT_TRUE(f.ok());
  ASSERT_TRUE(client_->pwrite(**f, (*buf)->data(), data.size(), 12345).ok());
  memset((*buf)->data(), 0, data.size());
  auto r = client_->pread(**f, (*buf)->data(), data.size(), 12345);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(memcmp((*buf)->data(), data.data(), data.size()), 0);
  ASSERT_TRUE(client_->close(*f).ok());
}

TEST_F(Native, PwriteFromHandsOverBuffersAndKeepsProgramOrder) {
  // Overlapping writes from handed-over buffers, each acknowledged before
  // its bytes travel, still land in program order.
  auto f = client_->open("/from", O_RDWR | O_CREAT, 0644);
  ASSERT_TRUE(f.ok());
  std::string expect;
  for (int i = 0; i < 40; ++i) {
    std::string d = random_bytes(70000 + i * 101, 500 + i);
    uint64_t off = static_cast<uint64_t>(i % 5) * 41017 + 7;
    auto buf = client_->register_buffer(d.size() + 100);
    ASSERT_TRUE(buf.ok()) << buf.status().ToString();
    std::byte* at = (*buf)->data() + 80;  // like a FUSE header before the data
    memcpy(at, d.data(), d.size());
    int accepted = 0;
    auto n = client_->pwrite_from(**f, std::move(*buf), at, d.size(), off, [&] { ++accepted; });
    ASSERT_TRUE(n.ok()) << n.status().ToString();
    EXPECT_EQ(*n, d.size());
    EXPECT_EQ(accepted, 1);
    if (expect.size() < off + d.size()) expect.resize(off + d.size());
    memcpy(&expect[off], d.data(), d.size());
  }
  ASSERT_TRUE(client_->close(*f).ok());
  auto back = read_back("/from", expect.size() + 10);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_TRUE(*back == expect);
}

TEST_F(Native, PwriteFromRefusesDataOutsideTheBufferWithoutAccepting) {
  auto f = client_->open("/from-bad", O_RDWR | O_CREAT, 0644);
  ASSERT_TRUE(f.ok());
  auto buf = client_->register_buffer(4096);
  ASSERT_TRUE(buf.ok());
  std::byte* past = (*buf)->data() + 4000;
  int accepted = 0;
  auto n = client_->pwrite_from(**f, std::move(*buf), past, 200, 0, [&] { ++accepted; });
  EXPECT_EQ(n.status().code(), Code::kInvalidArgument);
  EXPECT_EQ(accepted, 0);
  ASSERT_TRUE(client_->close(*f).ok());
}

TEST_F(Native, PwriteFromWithoutACallbackWrites) {
  // A caller with nobody to acknowledge passes an empty on_accepted.
  auto f = client_->open("/from-plain", O_RDWR | O_CREAT, 0644);
  ASSERT_TRUE(f.ok());
  std::string d = random_bytes(300000, 77);
  auto buf = client_->register_buffer(d.size());
  ASSERT_TRUE(buf.ok());
  memcpy((*buf)->data(), d.data(), d.size());
  std::byte* at = (*buf)->data();
  auto n = client_->pwrite_from(**f, std::move(*buf), at, d.size(), 0, {});
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  std::string back(d.size(), 'Z');
  auto r = client_->pread(**f, back.data(), back.size(), 0);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(back == d);
  ASSERT_TRUE(client_->close(*f).ok());
}

TEST_F(Native, SequentialReadsThroughReadAheadAreExact) {
  // Odd-sized sequential reads run through the read-ahead windows; a jump
  // back and a read past the end must still be exact.
  std::string data = random_bytes((10 << 20) + 12345, 31);
  auto f = client_->open("/ra", O_RDWR | O_CREAT, 0644);
  ASSERT_TRUE(f.ok());
  ASSERT_TRUE(client_->pwrite(**f, data.data(), data.size(), 0).ok());
  ASSERT_TRUE(client_->close(*f).ok());
  auto g = client_->open("/ra", O_RDONLY);
  ASSERT_TRUE(g.ok());
  std::string back(data.size(), 'Z');
  const size_t chunk = 100003;
  for (size_t off = 0; off < data.size(); off += chunk) {
    auto r = client_->pread(**g, &back[off], std::min(chunk, data.size() - off), off);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ASSERT_EQ(*r, std::min(chunk, data.size() - off));
  }
  EXPECT_TRUE(back == data);
  std::string again(3 * chunk, 'Z');
  auto r = client_->pread(**g, again.data(), again.size(), 777);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(again, data.substr(777, again.size()));
  auto tail = client_->pread(**g, again.data(), again.size(), data.size() - 10);
  ASSERT_TRUE(tail.ok());
  EXPECT_EQ(*tail, 10u);
  ASSERT_TRUE(client_->close(*g).ok());
}

// pread_to's pieces, joined; how many times the sink ran is in *calls.
Result<std::string> read_pieces(Client& c, File& f, size_t len, uint64_t off, int* calls) {
  std::string out;
  *calls = 0;
  SURGE_ASSIGN_OR_RETURN(size_t n, c.pread_to(f, len, off, [&](std::span<const iovec> pieces) {
    ++*calls;
    for (const iovec& p : pieces) out.append(static_cast<const char*>(p.iov_base), p.iov_len);
  }));
  if (n != out.size()) {
    return Status::Internal("pread_to returned " + std::to_string(n) + " but handed over " +
                            std::to_string(out.size()) + " bytes");
  }
  return out;
}

TEST_F(Native, PreadToHandsOverExactlyWhatPreadReads) {
  // With read ahead (pieces of windows, crossing window boundaries, plus
  // what it reads beyond them) and without (one pool buffer): the bytes of
  // each odd-sized sequential read, a jump back, a read across the end and
  // one past it, each handed over in a single call of the sink.
  std::string data = random_bytes((6 << 20) + 4321, 33);
  auto f = client_->open("/pread-to", O_RDWR | O_CREAT, 0644);
  ASSERT_TRUE(f.ok());
  ASSERT_TRUE(client_->pwrite(**f, data.data(), data.size(), 0).ok());
  ASSERT_TRUE(client_->close(*f).ok());
  for (size_t ra : {size_t{4} << 20, size_t{0}}) {
    auto g = client_->open("/pread-to", O_RDONLY);
    ASSERT_TRUE(g.ok());
    client_->set_read_ahead(**g, ra);
    const size_t chunk = (1 << 20) + 4099;
    int calls = 0;
    for (size_t off = 0; off < data.size(); off += chunk) {
      auto got = read_pieces(*client_, **g, chunk, off, &calls);
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      EXPECT_EQ(calls, 1);
      ASSERT_TRUE(*got == data.substr(off, chunk)) << "read ahead " << ra << " at " << off;
    }
    auto back = read_pieces(*client_, **g, 5000, 12345, &calls);
    ASSERT_TRUE(back.ok());
    EXPECT_TRUE(*back == data.substr(12345, 5000)) << "read ahead " << ra << ", a jump back";
    auto tail = read_pieces(*client_, **g, 100, data.size() - 10, &calls);
    ASSERT_TRUE(tail.ok());
    EXPECT_TRUE(*tail == data.substr(data.size() - 10)) << "read ahead " << ra;
    auto past = read_pieces(*client_, **g, 100, data.size() + 1, &calls);
    ASSERT_TRUE(past.ok());
    EXPECT_TRUE(past->empty());
    EXPECT_EQ(calls, 1) << "at end of file the sink runs once, with no pieces";
    ASSERT_TRUE(client_->close(*g).ok());
  }
}

TEST_F(Native, OwnWriteAheadOfASequentialReaderIsSeen) {
  // Windows fetched before a write of this client must not be served after it.
  std::string data = random_bytes(6 << 20, 32);
  auto f = client_->open("/ra-write", O_RDWR | O_CREAT, 0644);
  ASSERT_TRUE(f.ok());
  ASSERT_TRUE(client_->pwrite(**f, data.data(), data.size(), 0).ok());
  std::string got(1 << 20, 'Z');
  ASSERT_TRUE(client_->pread(**f, got.data(), got.size(), 0).ok());        // sequential:
  ASSERT_TRUE(client_->pread(**f, got.data(), got.size(), 1 << 20).ok());  // windows ahead
  std::string patch = random_bytes(300000, 33);
  ASSERT_TRUE(client_->pwrite(**f, patch.data(), patch.size(), (3 << 20) + 5).ok());
  memcpy(&data[(3 << 20) + 5], patch.data(), patch.size());
  std::string rest(4 << 20, 'Z');
  auto r = client_->pread(**f, rest.data(), rest.size(), 2 << 20);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(rest == data.substr(2 << 20, rest.size()));
  ASSERT_TRUE(client_->close(*f).ok());
}

TEST_F(Native, ReadAheadOfOneOpenFileDropsOnAnotherHandlesWrite) {
  // Read ahead off for the client, on for one open file (as surge-fuse
  // does for its direct opens): that file reads ahead, and a write through
  // a second handle of the same inode must still be seen by its next read.
  ClientOptions o = cluster_->client_options();
  o.read_ahead_bytes = 0;
  auto c = Client::Connect(o);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  std::string data = random_bytes(6 << 20, 34);
  auto w = (*c)->open("/ra-one", O_RDWR | O_CREAT, 0644);
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE((*c)->pwrite(**w, data.data(), data.size(), 0).ok());
  auto r = (*c)->open("/ra-one", O_RDONLY);
  ASSERT_TRUE(r.ok());
  (*c)->set_read_ahead(**r, 4 << 20);
  std::string got(1 << 20, 'Z');
  ASSERT_TRUE((*c)->pread(**r, got.data(), got.size(), 0).ok());        // sequential:
  ASSERT_TRUE((*c)->pread(**r, got.data(), got.size(), 1 << 20).ok());  // windows ahead
  std::string patch = random_bytes(200000, 35);
  ASSERT_TRUE((*c)->pwrite(**w, patch.data(), patch.size(), (3 << 20) + 7).ok());
  memcpy(&data[(3 << 20) + 7], patch.data(), patch.size());
  std::string rest(4 << 20, 'Z');
  auto n = (*c)->pread(**r, rest.data(), rest.size(), 2 << 20);
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_TRUE(rest == data.substr(2 << 20, rest.size()));
  ASSERT_TRUE((*c)->close(*r).ok());
  ASSERT_TRUE((*c)->close(*w).ok());
}

TEST_F(Native, ReadersOfOneFileThroughTwoHandlesEachReadTheirStreamExactly) {
  // Read ahead is kept per open file: two threads streaming different
  // halves of one file through their own handles, in odd-sized reads,
  // each get exactly their bytes.
  std::string data = random_bytes(12 << 20, 38);
  auto f = client_->open("/two-streams", O_RDWR | O_CREAT, 0644);
  ASSERT_TRUE(f.ok());
  ASSERT_TRUE(client_->pwrite(**f, data.data(), data.size(), 0).ok());
  ASSERT_TRUE(client_->close(*f).ok());
  const size_t half = data.size() / 2;
  std::vector<std::string> got(2, std::string(half, 'Z'));
  std::vector<std::string> errors(2);
  auto stream = [&](int i) {
    auto h = client_->open("/two-streams", O_RDONLY);
    if (!h.ok()) {
      errors[i] = h.status().ToString();
      return;
    }
    const size_t chunk = 77777;
    for (size_t off = 0; off < half; off += chunk) {
      size_t len = std::min(chunk, half - off);
      auto r = client_->pread(**h, &got[i][off], len, i * half + off);
      if (!r.ok() || *r != len) {
        errors[i] = r.ok() ? "short read at " + std::to_string(off) : r.status().ToString();
        return;
      }
    }
    (void)client_->close(*h);
  };
  std::thread a(stream, 0), b(stream, 1);
  a.join();
  b.join();
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[1], "");
  EXPECT_TRUE(got[0] == data.substr(0, half));
  EXPECT_TRUE(got[1] == data.substr(half));
}

TEST_F(Native, OpensAndClosesOfOtherHandlesNeverUndoATruncate) {
  // surge-fuse's release is asynchronous, so the last close of one handle
  // can run while the same inode is opened again, and its size report
  // while another handle truncates. Neither may grow the file back: the
  // new handle must share the state the client keeps for the inode (else
  // a truncate through it leaves a stale end of data there), and a report
  // taken before the truncate must reach the MDS before it. Another thread
  // opens, reads (so windows are fetched ahead, which makes an open slow)
  // and closes the inode all the time.
  auto f = client_->open("/open-close-race", O_RDWR | O_CREAT, 0644);
  ASSERT_TRUE(f.ok());
  const Ino ino = (*f)->ino();
  ASSERT_TRUE(client_->close(*f).ok());
  std::atomic<bool> stop{false};
  std::thread churn([&] {
    std::string buf(64 << 10, '\0');
    while (!stop.load()) {
      auto g = client_->open(ino, O_RDONLY, Caller{}, nullptr);
      if (!g.ok()) continue;
      (void)client_->pread(**g, buf.data(), buf.size(), 0);
      (void)client_->pread(**g, buf.data(), buf.size(), buf.size());
      (void)client_->close(*g);
    }
  });
  std::string data = random_bytes(4 << 20, 37);
  const uint64_t cut = 2 << 20;
  for (int i = 0; i < 200; ++i) {
    auto h = client_->open(ino, O_RDWR, Caller{}, nullptr);
    ASSERT_TRUE(h.ok()) << h.status().ToString();
    ASSERT_TRUE(client_->pwrite(**h, data.data(), data.size(), 0).ok());
    SetAttr sa;
    sa.mask = kSetSize;
    sa.size = cut;
    ASSERT_TRUE(client_->setattr(ino, sa, Caller{}).ok());
    ASSERT_TRUE(client_->close(*h).ok());
    auto a = client_->getattr(ino, Caller{});
    ASSERT_TRUE(a.ok());
    if (a->size != cut) {
      stop = true;
      churn.join();
      FAIL() << "round " << i << ": size " << a->size << " after a truncate to " << cut;
    }
  }
  stop = true;
  churn.join();
}

TEST_F(Native, NamespaceThroughThePathApi) {
  ASSERT_TRUE(client_->mkdir("/ns", 0755).ok());
  ASSERT_TRUE(client_->mkdir("/ns/sub", 0755).ok());
  EXPECT_EQ(client_->mkdir("/ns/sub", 0755).code(), Code::kAlreadyExists);
  auto f = client_->open("/ns/sub/file", O_WRONLY | O_CREAT | O_EXCL, 0600);
  ASSERT_TRUE(f.ok());
  ASSERT_TRUE(client_->close(*f).ok());
  ASSERT_TRUE(client_->rename("/ns/sub/file", "/ns/renamed").ok());
  ASSERT_TRUE(client_->link("/ns/renamed", "/ns/hard").ok());
  ASSERT_TRUE(client_->symlink("renamed", "/ns/soft").ok());
  auto list = client_->list("/ns");
  ASSERT_TRUE(list.ok());
  std::vector<std::string> names;
  for (auto& e : *list) names.push_back(e.name);
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"hard", "renamed", "soft", "sub"}));
  EXPECT_EQ(client_->stat("/ns/hard")->nlink, 2u);
  ASSERT_TRUE(client_->truncate("/ns/renamed", 1000).ok());
  EXPECT_EQ(client_->stat("/ns/hard")->size, 1000u);
  EXPECT_EQ(client_->rmdir("/ns").code(), Code::kNotEmpty);
  EXPECT_EQ(client_->stat("/ns/missing").status().code(), Code::kNotFound);
  auto fs = client_->statfs();
  ASSERT_TRUE(fs.ok());
  EXPECT_GT(fs->total_bytes, 0u);
}

TEST_F(Native, CApi) {
  surge_options_t o{};
  std::string addr = cluster_->mds_address();
  o.mds_address = addr.c_str();
  o.cluster_key_file = cluster_->key_file().c_str();
  surge_t* fs = nullptr;
  ASSERT_EQ(surge_connect(&o, &fs), 0);
  ASSERT_EQ(surge_mkdir(fs, "/capi", 0755), 0);
  EXPECT_EQ(surge_mkdir(fs, "/capi", 0755), -EEXIST);
  surge_file_t* f = nullptr;
  ASSERT_EQ(surge_open(fs, "/capi/f", O_RDWR | O_CREAT, 0644, &f), 0);
  std::string data = random_bytes(300000, 12);
  EXPECT_EQ(surge_pwrite(fs, f, data.data(), data.size(), 0), static_cast<ssize_t>(data.size()));
  EXPECT_EQ(surge_fsync(fs, f), 0);
  std::string back(data.size() + 10, '\0');
  EXPECT_EQ(surge_pread(fs, f, back.data(), back.size(), 0), static_cast<ssize_t>(data.size()));
  EXPECT_EQ(memcmp(back.data(), data.data(), data.size()), 0);
  EXPECT_EQ(surge_close(fs, f), 0);
  struct stat st;
  ASSERT_EQ(surge_stat(fs, "/capi/f", &st), 0);
  EXPECT_EQ(st.st_size, static_cast<off_t>(data.size()));
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(surge_stat(fs, "/capi/nope", &st), -ENOENT);
  EXPECT_EQ(surge_setxattr(fs, "/capi/f", "user.k", "v", 1, 0), 0);
  char v[8];
  EXPECT_EQ(surge_getxattr(fs, "/capi/f", "user.k", v, sizeof(v)), 1);
  int count = 0;
  EXPECT_EQ(surge_readdir(
                fs, "/capi",
                [](const char*, const struct stat*, void* arg) {
                  ++*static_cast<int*>(arg);
                  return 0;
                },
                &count),
            0);
  EXPECT_EQ(count, 1);
  EXPECT_EQ(surge_unlink(fs, "/capi/f"), 0);
  EXPECT_EQ(surge_rmdir(fs, "/capi"), 0);
  surge_disconnect(fs);
}

}  // namespace
}  // namespace surge::test
