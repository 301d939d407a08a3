// Malformed and hostile input against an RpcServer over RDMA, from a raw
// rdma_cm peer: the RDMA counterpart of tests/net/bad_input_test.cpp (which
// speaks raw TCP). Runs inside the Soft-RoCE VM (guest_suite.sh); without a
// device every test FAILS.
//
// The raw peer (RawPeer below) is plain rdma_cm + verbs with no Surge code
// on its send path, so it can break every layer: the connect private data
// (Hello), the message header every SEND carries (magic, type, length), the
// authentication (no Proof, a wrong key), the frames (magic, version,
// lengths, descriptor counts, types), and bulk descriptors (a wrong rkey, an
// address outside its registered memory, an offset past the region).
//
// Every case must end with a refused connect, an error reply or a closed
// connection; the server must log the peer address with the reason; and a
// well-behaved RpcChannel to the same server keeps getting answers the
// whole time (a background thread calls echo and must see no failure).
//
// Address: SURGE_RDMA_HOST (default 10.99.0.1, the VM's first address).
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <infiniband/verbs.h>
#include <netdb.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <sys/mman.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "common/crc32c.h"
#include "common/log.h"
#include "net/auth.h"
#include "net/frame.h"
#include "net/proto/test_methods.h"
#include "tests/net/hostile_peer_test.h"
#include "tests/net/net_test_util.h"

namespace surge::net::testing {
namespace {

namespace pt = surge::proto::test;
using namespace std::chrono_literals;
using std::chrono::milliseconds;

std::string host() {
  const char* h = std::getenv("SURGE_RDMA_HOST");
  return h != nullptr ? h : "10.99.0.1";
}

// The RDMA transport's wire (net/rdma/rdma_connection.cpp), written out
// here on purpose: the raw peer must not share code with what it attacks.
constexpr uint32_t kMsgMagic = 0x4d445253;    // "SRDM", every SEND
constexpr uint32_t kHelloMagic = 0x48445253;  // "SRDH", connect private data
constexpr size_t kMsgHeaderSize = 16;
constexpr uint8_t kTypeData = 1;
constexpr uint8_t kTypeCtrl = 2;
constexpr uint32_t kSlot = 8192;  // our message buffers
constexpr uint32_t kRecvs = 40;   // posted receives (we advertise 32 data)
constexpr uint32_t kSends = 16;
constexpr size_t kBulkSize = 1 << 20;  // registered, for bulk descriptors

struct Frame {
  FrameHeader h;
  std::string body;
};

std::string frame_bytes(const FrameHeader& h, std::string_view body = {},
                        std::span<const std::byte> extra = {}) {
  std::string out(kFrameHeaderSize, '\0');
  encode_header(h, reinterpret_cast<std::byte*>(out.data()));
  out.append(body);
  out.append(reinterpret_cast<const char*>(extra.data()), extra.size());
  return out;
}

std::string hello(uint32_t magic, uint32_t recvs, uint32_t bufsize, const Nonce& nonce) {
  std::string pd(16 + kNonceSize, '\0');
  auto* p = reinterpret_cast<std::byte*>(pd.data());
  put_u32(p, magic);
  put_u32(p + 4, recvs);
  put_u32(p + 8, bufsize);
  put_u32(p + 12, 0);
  std::memcpy(p + 16, nonce.data(), kNonceSize);
  return pd;
}

// One raw RC connection made with rdma_cm. Single-threaded: every wait
// polls the CQ and the rdma_cm channel itself.
class RawPeer {
 public:
  RawPeer() : nonce_(make_nonce()) {}
  ~RawPeer() { destroy(); }
  RawPeer(const RawPeer&) = delete;
  RawPeer& operator=(const RawPeer&) = delete;

  // How the server names us in its log.
  const std::string& peer() const { return peer_; }
  const Nonce& nonce() const { return nonce_; }
  const std::string& server_private_data() const { return server_pd_; }
  std::byte* bulk() const { return mem_ + kRecvs * kSlot + kSends * kSlot; }
  uint32_t rkey() const { return mr_->rkey; }

  // Connects with `private_data` as the Hello. Refused (ConnectionRefused)
  // when the server rejects it.
  Status connect(uint16_t port, const std::string& private_data) {
    ch_ = rdma_create_event_channel();
    if (ch_ == nullptr) return Status::Unavailable("raw peer: no rdma_cm (no RDMA device?)");
    fcntl(ch_->fd, F_SETFL, fcntl(ch_->fd, F_GETFL) | O_NONBLOCK);
    if (rdma_create_id(ch_, &id_, nullptr, RDMA_PS_TCP) != 0) {
      return Status::FromErrno(errno, "raw peer: rdma_create_id");
    }
    addrinfo hints{};
    hints.ai_flags = AI_NUMERICSERV | AI_NUMERICHOST;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* ai = nullptr;
    if (getaddrinfo(host().c_str(), std::to_string(port).c_str(), &hints, &ai) != 0) {
      return Status::InvalidArgument("raw peer: bad host " + host());
    }
    int rc = rdma_resolve_addr(id_, nullptr, ai->ai_addr, 2000);
    freeaddrinfo(ai);
    if (rc != 0) return Status::FromErrno(errno, "raw peer: rdma_resolve_addr");
    SURGE_RETURN_IF_ERROR(expect_event(RDMA_CM_EVENT_ADDR_RESOLVED));
    if (rdma_resolve_route(id_, 2000) != 0) {
      return Status::FromErrno(errno, "raw peer: rdma_resolve_route");
    }
    SURGE_RETURN_IF_ERROR(expect_event(RDMA_CM_EVENT_ROUTE_RESOLVED));
    SURGE_RETURN_IF_ERROR(setup_verbs());
    rdma_conn_param cp{};
    cp.private_data = private_data.data();
    cp.private_data_len = static_cast<uint8_t>(private_data.size());
    cp.responder_resources = 16;  // the server READs from us
    cp.initiator_depth = 16;
    cp.retry_count = 7;
    cp.rnr_retry_count = 7;
    if (rdma_connect(id_, &cp) != 0) return Status::FromErrno(errno, "raw peer: rdma_connect");
    peer_ = "rdma://" + host() + ":" + std::to_string(ntohs(rdma_get_src_port(id_)));
    SURGE_ASSIGN_OR_RETURN(rdma_cm_event_type t, next_event(10s));
    if (t == RDMA_CM_EVENT_REJECTED) {
      return Status(Code::kConnectionRefused, "raw peer: rejected");
    }
    if (t != RDMA_CM_EVENT_ESTABLISHED) {
      return Status::IOError(std::string("raw peer: connect ended with ") + rdma_event_str(t));
    }
    return Status::OK();
  }

  // Posts one SEND of exactly these bytes and waits for it to complete.
  Status send_raw(std::string_view bytes) {
    if (bytes.size() > kSlot) return Status::InvalidArgument("raw peer: message over a slot");
    std::byte* b = mem_ + kRecvs * kSlot + (next_send_++ % kSends) * kSlot;
    std::memcpy(b, bytes.data(), bytes.size());
    ibv_sge sge{reinterpret_cast<uintptr_t>(b), static_cast<uint32_t>(bytes.size()), mr_->lkey};
    ibv_send_wr wr{};
    ibv_send_wr* bad = nullptr;
    wr.wr_id = 1;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_SEND;
    wr.send_flags = IBV_SEND_SIGNALED;
    if (ibv_post_send(qp_, &wr, &bad) != 0) return Status::FromErrno(errno, "raw peer: post_send");
    ++sends_outstanding_;
    auto deadline = std::chrono::steady_clock::now() + 10s;
    while (sends_outstanding_ > 0) {
      if (!poll_once()) return Status::Disconnected("raw peer: send failed: " + send_error_);
      if (std::chrono::steady_clock::now() > deadline) return Status::TimedOut("raw peer: send");
    }
    return send_error_.empty() ? Status::OK() : Status::Disconnected(send_error_);
  }

  // A message with a well-formed header around `payload` (credits we owe
  // go back in it).
  Status send_msg(std::string_view payload, uint8_t type = kTypeData) {
    std::string m(kMsgHeaderSize, '\0');
    auto* p = reinterpret_cast<std::byte*>(m.data());
    put_u32(p, kMsgMagic);
    p[4] = std::byte{type};
    p[5] = std::byte{0};
    put_u16(p + 6, static_cast<uint16_t>(owed_ctrl_));
    put_u32(p + 8, owed_data_);
    put_u32(p + 12, static_cast<uint32_t>(payload.size()));
    owed_ctrl_ = owed_data_ = 0;
    m.append(payload);
    return send_raw(m);
  }
  Status send_frame(const FrameHeader& h, std::string_view body = {},
                    std::span<const std::byte> extra = {}) {
    return send_msg(frame_bytes(h, body, extra));
  }

  // The next data message's frame; credit-only messages are consumed.
  Result<Frame> read_frame(milliseconds timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (frames_.empty()) {
      if (!poll_once() && frames_.empty()) {
        return Status::Disconnected("raw peer: connection closed");
      }
      if (std::chrono::steady_clock::now() > deadline) return Status::TimedOut("raw peer: read");
      std::this_thread::sleep_for(200us);
    }
    Frame f = std::move(frames_.front());
    frames_.erase(frames_.begin());
    return f;
  }

  // True when the server closes the connection within timeout.
  bool wait_closed(milliseconds timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      if (!poll_once()) return true;
      std::this_thread::sleep_for(500us);
    }
    return false;
  }

  // The client half of the handshake (after connect), with any key.
  Status handshake(const std::string& key) {
    if (server_pd_.size() < 16 + kNonceSize) return Status::ProtocolError("no challenge");
    Nonce ns;
    std::memcpy(ns.data(), server_pd_.data() + 16, kNonceSize);
    Proof p = client_proof(key, ns, nonce_);
    FrameHeader h;
    h.type = FrameType::kProof;
    h.body_length = kProofSize;
    // A refusing server closes right after its GoAway, which can beat the
    // ACK of our proof: a failed send still reads what came back.
    Status sent = send_frame(h, {reinterpret_cast<const char*>(p.data()), p.size()});
    Result<Frame> got = read_frame(10s);
    if (!got.ok()) return sent.ok() ? got.status() : sent;
    const Frame& w = *got;
    if (w.h.type == FrameType::kGoAway) return Status(static_cast<Code>(w.h.status), w.body);
    if (w.h.type != FrameType::kWelcome) return Status::ProtocolError("no welcome");
    return Status::OK();
  }

 private:
  Status setup_verbs() {
    pd_ = ibv_alloc_pd(id_->verbs);
    if (pd_ == nullptr) return Status::FromErrno(errno, "raw peer: ibv_alloc_pd");
    cq_ = ibv_create_cq(id_->verbs, 128, nullptr, nullptr, 0);
    if (cq_ == nullptr) return Status::FromErrno(errno, "raw peer: ibv_create_cq");
    mem_len_ = (kRecvs + kSends) * kSlot + kBulkSize;
    void* m = mmap(nullptr, mem_len_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return Status::FromErrno(errno, "raw peer: mmap");
    mem_ = static_cast<std::byte*>(m);
    mr_ = ibv_reg_mr(pd_, mem_, mem_len_,
                     IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE);
    if (mr_ == nullptr) return Status::FromErrno(errno, "raw peer: ibv_reg_mr");
    ibv_qp_init_attr qa{};
    qa.send_cq = cq_;
    qa.recv_cq = cq_;
    qa.qp_type = IBV_QPT_RC;
    qa.cap.max_send_wr = 64;
    qa.cap.max_recv_wr = kRecvs;
    qa.cap.max_send_sge = 1;
    qa.cap.max_recv_sge = 1;
    if (rdma_create_qp(id_, pd_, &qa) != 0) return Status::FromErrno(errno, "raw peer: create_qp");
    qp_ = id_->qp;
    for (uint32_t i = 0; i < kRecvs; ++i) SURGE_RETURN_IF_ERROR(post_recv(i));
    return Status::OK();
  }

  Status post_recv(uint32_t slot) {
    ibv_sge sge{reinterpret_cast<uintptr_t>(mem_ + slot * kSlot), kSlot, mr_->lkey};
    ibv_recv_wr wr{};
    ibv_recv_wr* bad = nullptr;
    wr.wr_id = (1ull << 32) | slot;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    if (ibv_post_recv(qp_, &wr, &bad) != 0) return Status::FromErrno(errno, "raw peer: post_recv");
    return Status::OK();
  }

  Result<rdma_cm_event_type> next_event(milliseconds timeout) {
    pollfd p{ch_->fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(timeout.count())) <= 0) {
      return Status::TimedOut("raw peer: no rdma_cm event");
    }
    rdma_cm_event* ev = nullptr;
    if (rdma_get_cm_event(ch_, &ev) != 0) return Status::FromErrno(errno, "raw peer: get_cm_event");
    rdma_cm_event_type t = ev->event;
    if (t == RDMA_CM_EVENT_ESTABLISHED && ev->param.conn.private_data != nullptr) {
      server_pd_.assign(static_cast<const char*>(ev->param.conn.private_data),
                        ev->param.conn.private_data_len);
    }
    rdma_ack_cm_event(ev);
    return t;
  }

  Status expect_event(rdma_cm_event_type want) {
    SURGE_ASSIGN_OR_RETURN(rdma_cm_event_type t, next_event(10s));
    if (t != want) {
      return Status::IOError(std::string("raw peer: got ") + rdma_event_str(t) + ", want " +
                             rdma_event_str(want));
    }
    return Status::OK();
  }

  // Drains the CQ and the rdma_cm channel once. False once the connection
  // is gone (disconnect event, or a failed work request).
  bool poll_once() {
    // The disconnect event first, then the CQ: what the server sent before
    // it disconnected (a GoAway) is already there and still gets read, and
    // so is a completion that comes in after the disconnect was seen.
    pollfd p{ch_->fd, POLLIN, 0};
    if (!closed_ && ::poll(&p, 1, 0) > 0) {
      rdma_cm_event* ev = nullptr;
      if (rdma_get_cm_event(ch_, &ev) == 0) {
        if (ev->event == RDMA_CM_EVENT_DISCONNECTED) closed_ = true;
        rdma_ack_cm_event(ev);
      }
    }
    ibv_wc wcs[16];
    int n;
    while ((n = ibv_poll_cq(cq_, 16, wcs)) > 0) {
      for (int i = 0; i < n; ++i) {
        const ibv_wc& wc = wcs[i];
        bool recv = (wc.wr_id >> 32) != 0;
        if (!recv) --sends_outstanding_;
        if (wc.status != IBV_WC_SUCCESS) {
          if (!recv) send_error_ = ibv_wc_status_str(wc.status);
          closed_ = true;
          continue;
        }
        if (recv) on_recv(static_cast<uint32_t>(wc.wr_id & 0xffffffffu), wc.byte_len);
      }
    }
    return !closed_;
  }

  void on_recv(uint32_t slot, uint32_t len) {
    const std::byte* p = mem_ + slot * kSlot;
    if (len >= kMsgHeaderSize && get_u32(p) == kMsgMagic) {
      uint8_t type = std::to_integer<uint8_t>(p[4]);
      uint32_t n = std::min<uint32_t>(get_u32(p + 12), len - kMsgHeaderSize);
      if (type == kTypeCtrl) {
        ++owed_ctrl_;
      } else {
        ++owed_data_;
        auto h = decode_header({p + kMsgHeaderSize, n});
        if (h.ok() && n >= kFrameHeaderSize + h->body_length) {
          frames_.push_back(
              {*h, std::string(reinterpret_cast<const char*>(p + kMsgHeaderSize + kFrameHeaderSize),
                               h->body_length)});
        }
      }
    }
    (void)post_recv(slot);
  }

  void destroy() {
    if (id_ != nullptr && qp_ != nullptr) rdma_disconnect(id_);
    if (qp_ != nullptr) rdma_destroy_qp(id_);
    if (mr_ != nullptr) ibv_dereg_mr(mr_);
    if (cq_ != nullptr) ibv_destroy_cq(cq_);
    if (pd_ != nullptr) ibv_dealloc_pd(pd_);
    if (id_ != nullptr) rdma_destroy_id(id_);
    if (ch_ != nullptr) rdma_destroy_event_channel(ch_);
    if (mem_ != nullptr) munmap(mem_, mem_len_);
    qp_ = nullptr;
    mr_ = nullptr;
    cq_ = nullptr;
    pd_ = nullptr;
    id_ = nullptr;
    ch_ = nullptr;
    mem_ = nullptr;
  }

  Nonce nonce_;
  std::string peer_ = "rdma://?";
  std::string server_pd_;
  rdma_event_channel* ch_ = nullptr;
  rdma_cm_id* id_ = nullptr;
  ibv_pd* pd_ = nullptr;
  ibv_cq* cq_ = nullptr;
  ibv_qp* qp_ = nullptr;
  ibv_mr* mr_ = nullptr;
  std::byte* mem_ = nullptr;
  size_t mem_len_ = 0;
  uint32_t next_send_ = 0;
  int sends_outstanding_ = 0;
  std::string send_error_;
  bool closed_ = false;
  uint32_t owed_data_ = 0;
  uint32_t owed_ctrl_ = 0;
  std::vector<Frame> frames_;
};

class RdmaBadInputTest : public HostilePeerTest {
 protected:
  void SetUp() override {
    HostilePeerTiming t;
    t.handshake_timeout = milliseconds(1000);
    t.good_call_timeout = milliseconds(20000);
    t.good_call_pause = milliseconds(5);
    t.settle_polls = 1500;
    t.log_polls = 500;
    start("rdma://" + host() + ":0", t);
  }

  // A raw peer that connected with a proper Hello (and, if asked,
  // authenticated with the right key).
  std::unique_ptr<RawPeer> raw(bool authenticated = true) {
    auto c = std::make_unique<RawPeer>();
    Status st = c->connect(server_->port(), hello(kHelloMagic, 32, kSlot, c->nonce()));
    EXPECT_TRUE(st.ok()) << st.ToString();
    if (st.ok() && authenticated) {
      st = c->handshake(kTestKey);
      EXPECT_TRUE(st.ok()) << st.ToString();
    }
    return c;
  }

  // A bulk request whose handler pulls `len` bytes at `offset` of one
  // region described by `d`.
  static std::string sink_request(const BulkDescriptor& d, uint64_t offset, uint64_t len,
                                  uint64_t id) {
    pt::BulkRequest req;
    req.set_offset(offset);
    req.set_length(len);
    std::string body;
    detail::serialize_message(req, body);
    FrameHeader h = request(pt::TestBulkSink::kMethod, id);
    h.body_length = static_cast<uint32_t>(body.size());
    h.descriptor_count = 1;
    std::byte desc[kBulkDescriptorSize];
    encode_descriptor(d, desc);
    return frame_bytes(h, body, desc);
  }

  static constexpr milliseconds kCloseWait{10000};
};

// ------------------------------------------------ connect private data

// rdma_cm pads connect private data to its fixed size with zeros, so a
// short Hello reads as one advertising buffers of 0 bytes.
TEST_F(RdmaBadInputTest, TruncatedHelloIsRejected) {
  RawPeer c;
  Status st = c.connect(server_->port(), hello(kHelloMagic, 32, kSlot, c.nonce()).substr(0, 8));
  EXPECT_EQ(st.code(), Code::kConnectionRefused) << st.ToString();
  EXPECT_TRUE(logged(c.peer(), "receive buffers of 0 bytes"));
}

TEST_F(RdmaBadInputTest, HelloWithBadMagicIsRejected) {
  RawPeer c;
  Status st = c.connect(server_->port(), hello(0x12345678, 32, kSlot, c.nonce()));
  EXPECT_EQ(st.code(), Code::kConnectionRefused) << st.ToString();
  EXPECT_TRUE(logged(c.peer(), "bad magic"));
}

TEST_F(RdmaBadInputTest, HelloWithAbsurdReceiveBuffersIsRejected) {
  RawPeer a;
  Status st = a.connect(server_->port(), hello(kHelloMagic, 0, kSlot, a.nonce()));
  EXPECT_EQ(st.code(), Code::kConnectionRefused) << st.ToString();
  EXPECT_TRUE(logged(a.peer(), "advertised 0 receive buffers"));
  RawPeer b;
  st = b.connect(server_->port(), hello(kHelloMagic, 32, 1u << 30, b.nonce()));
  EXPECT_EQ(st.code(), Code::kConnectionRefused) << st.ToString();
  EXPECT_TRUE(logged(b.peer(), "receive buffers of 1073741824 bytes"));
}

// ------------------------------------------------------ authentication

TEST_F(RdmaBadInputTest, RequestInsteadOfAProofIsRefusedAndClosed) {
  auto c = raw(false);
  (void)c->send_frame(request());  // may fail: the close can beat the ACK
  auto f = c->read_frame(kCloseWait);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->h.type, FrameType::kGoAway);
  EXPECT_EQ(static_cast<Code>(f->h.status), Code::kAuthFailed);
  EXPECT_TRUE(c->wait_closed(kCloseWait));
  EXPECT_TRUE(logged(c->peer(), "failed the cluster key check"));
}

TEST_F(RdmaBadInputTest, WrongKeyGetsAuthFailedAndIsClosed) {
  auto c = raw(false);
  Status st = c->handshake("wrong key");
  EXPECT_EQ(st.code(), Code::kAuthFailed) << st.ToString();
  EXPECT_TRUE(c->wait_closed(kCloseWait));
  EXPECT_TRUE(logged(c->peer(), "failed the cluster key check"));
}

TEST_F(RdmaBadInputTest, SilentPeerIsDisconnectedAfterTheHandshakeTimeout) {
  auto c = raw(false);
  EXPECT_TRUE(c->wait_closed(kCloseWait));
  EXPECT_TRUE(logged(c->peer(), "did not finish the handshake"));
}

// ------------------------------------------------------ message headers

TEST_F(RdmaBadInputTest, MessageWithBadMagicClosesTheConnection) {
  auto c = raw();
  std::string m(kMsgHeaderSize + 8, 'x');
  (void)c->send_raw(m);  // may fail: the close can beat the ACK
  EXPECT_TRUE(c->wait_closed(kCloseWait));
  EXPECT_TRUE(logged(c->peer(), "malformed message header"));
}

TEST_F(RdmaBadInputTest, MessageShorterThanItsHeaderSaysClosesTheConnection) {
  auto c = raw();
  std::string m(kMsgHeaderSize + 10, '\0');
  auto* p = reinterpret_cast<std::byte*>(m.data());
  put_u32(p, kMsgMagic);
  p[4] = std::byte{kTypeData};
  put_u32(p + 12, 5000);  // 10 bytes follow
  (void)c->send_raw(m);   // may fail: the close can beat the ACK
  EXPECT_TRUE(c->wait_closed(kCloseWait));
  EXPECT_TRUE(logged(c->peer(), "malformed message header"));
}

TEST_F(RdmaBadInputTest, TinyMessageClosesTheConnection) {
  auto c = raw();
  (void)c->send_raw("SRDM");  // may fail: the close can beat the ACK
  EXPECT_TRUE(c->wait_closed(kCloseWait));
  EXPECT_TRUE(logged(c->peer(), "malformed message header"));
}

TEST_F(RdmaBadInputTest, UnknownMessageTypeClosesTheConnection) {
  auto c = raw();
  (void)c->send_msg("hello", 7);  // may fail: the close can beat the ACK
  EXPECT_TRUE(c->wait_closed(kCloseWait));
  EXPECT_TRUE(logged(c->peer(), "unknown message type"));
}

// ---------------------------------------------------------------- frames

TEST_F(RdmaBadInputTest, FrameWithBadMagic) {
  auto c = raw();
  std::string f = frame_bytes(request());
  f[0] = 'Z';
  (void)c->send_msg(f);  // may fail: the close can beat the ACK
  EXPECT_TRUE(c->wait_closed(kCloseWait));
  EXPECT_TRUE(logged(c->peer(), "magic"));
}

TEST_F(RdmaBadInputTest, FrameWithWrongVersion) {
  auto c = raw();
  FrameHeader h = request();
  h.version = kProtocolVersion + 1;
  (void)c->send_frame(h);  // may fail: the close can beat the ACK
  EXPECT_TRUE(c->wait_closed(kCloseWait));
  EXPECT_TRUE(logged(c->peer(), "version"));
}

TEST_F(RdmaBadInputTest, TruncatedFrameHeader) {
  auto c = raw();
  (void)c->send_msg(frame_bytes(request()).substr(0, 20));  // may fail: the close can beat the ACK
  EXPECT_TRUE(c->wait_closed(kCloseWait));
  EXPECT_TRUE(logged(c->peer(), "truncated"));
}

TEST_F(RdmaBadInputTest, FrameLengthDisagreesWithItsHeader) {
  auto c = raw();
  FrameHeader h = request();
  h.body_length = 100;
  (void)c->send_frame(h, std::string(10, 'b'));  // may fail: the close can beat the ACK
  EXPECT_TRUE(c->wait_closed(kCloseWait));
  EXPECT_TRUE(logged(c->peer(), "does not match its header"));
}

TEST_F(RdmaBadInputTest, TooManyDescriptors) {
  auto c = raw();
  std::string f = frame_bytes(request());
  put_u16(reinterpret_cast<std::byte*>(f.data()) + 14, kMaxDescriptors + 1);
  (void)c->send_msg(f);  // may fail: the close can beat the ACK
  EXPECT_TRUE(c->wait_closed(kCloseWait));
  EXPECT_TRUE(logged(c->peer(), "descriptor count"));
}

TEST_F(RdmaBadInputTest, DescriptorRegionOverTheLimit) {
  auto c = raw();
  FrameHeader h = request(pt::TestBulkSink::kMethod);
  h.descriptor_count = 1;
  std::byte d[kBulkDescriptorSize];
  encode_descriptor({0, kMaxRegionLength + 1, 0, BulkAccess::kServerPull}, d);
  (void)c->send_frame(h, {}, d);  // may fail: the close can beat the ACK
  EXPECT_TRUE(c->wait_closed(kCloseWait));
  EXPECT_TRUE(logged(c->peer(), "region length"));
}

TEST_F(RdmaBadInputTest, ResponseFrameFromAClient) {
  auto c = raw();
  FrameHeader h = request();
  h.type = FrameType::kResponse;
  (void)c->send_frame(h);  // may fail: the close can beat the ACK
  EXPECT_TRUE(c->wait_closed(kCloseWait));
  EXPECT_TRUE(logged(c->peer(), "unexpected response frame"));
}

TEST_F(RdmaBadInputTest, UnknownMethodGetsAnErrorReplyAndTheConnectionLives) {
  auto c = raw();
  ASSERT_TRUE(c->send_frame(request(pt::kTestUnregisteredMethod, 77)).ok());
  auto f = c->read_frame(kCloseWait);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->h.type, FrameType::kResponse);
  EXPECT_EQ(f->h.request_id, 77u);
  EXPECT_EQ(static_cast<Code>(f->h.status), Code::kUnknownMethod);
  // Still served.
  pt::EchoRequest req;
  req.set_payload("raw echo");
  std::string body;
  ASSERT_TRUE(detail::serialize_message(req, body));
  FrameHeader h = request(pt::TestEcho::kMethod, 78);
  h.body_length = static_cast<uint32_t>(body.size());
  ASSERT_TRUE(c->send_frame(h, body).ok());
  f = c->read_frame(kCloseWait);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->h.request_id, 78u);
  EXPECT_EQ(f->h.status, 0);
  pt::EchoReply reply;
  ASSERT_TRUE(detail::parse_message(reply, f->body));
  EXPECT_EQ(reply.payload(), "raw echo");
}

TEST_F(RdmaBadInputTest, PeerExceedingItsCreditsIsDisconnected) {
  auto c = raw();
  pt::EchoRequest req;
  req.set_sleep_ms(300);
  std::string body;
  ASSERT_TRUE(detail::serialize_message(req, body));
  for (uint64_t i = 0; i < 10; ++i) {  // the server grants 4
    FrameHeader h = request(pt::TestEcho::kMethod, i + 1);
    h.body_length = static_cast<uint32_t>(body.size());
    if (!c->send_frame(h, body).ok()) break;
  }
  EXPECT_TRUE(c->wait_closed(kCloseWait));
  EXPECT_TRUE(logged(c->peer(), "credits"));
}

// ---------------------------------------------------- bulk descriptors

// The positive control for the cases after it: a pull from the raw peer's
// own registered memory with its real rkey works (same crc).
TEST_F(RdmaBadInputTest, PullFromTheRawPeersMemoryWorks) {
  auto c = raw();
  for (size_t i = 0; i < 65536; ++i) c->bulk()[i] = std::byte(i * 7 + 3);
  BulkDescriptor d{reinterpret_cast<uintptr_t>(c->bulk()), 65536, c->rkey(),
                   BulkAccess::kServerPull};
  ASSERT_TRUE(c->send_msg(sink_request(d, 0, 0, 5)).ok());
  auto f = c->read_frame(kCloseWait);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  ASSERT_EQ(f->h.status, 0) << f->body;
  pt::BulkReply reply;
  ASSERT_TRUE(detail::parse_message(reply, f->body));
  EXPECT_EQ(reply.length(), 65536u);
  EXPECT_EQ(reply.crc32c(), crc32c(c->bulk(), 65536));
}

TEST_F(RdmaBadInputTest, PullPastItsRegionIsAnErrorReplyAndTheConnectionLives) {
  auto c = raw();
  BulkDescriptor d{reinterpret_cast<uintptr_t>(c->bulk()), 100, c->rkey(), BulkAccess::kServerPull};
  ASSERT_TRUE(c->send_msg(sink_request(d, 60, 100, 6)).ok());
  auto f = c->read_frame(kCloseWait);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->h.request_id, 6u);
  EXPECT_EQ(static_cast<Code>(f->h.status), Code::kOutOfRange) << f->body;
  ASSERT_TRUE(c->send_msg(sink_request(d, 0, 100, 7)).ok());
  f = c->read_frame(kCloseWait);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->h.request_id, 7u);
  EXPECT_EQ(f->h.status, 0) << f->body;
}

// A remote access error kills the QP (RC semantics): this connection only.
TEST_F(RdmaBadInputTest, WrongRkeyClosesOnlyThatConnection) {
  auto c = raw();
  BulkDescriptor d{reinterpret_cast<uintptr_t>(c->bulk()), 4096, c->rkey() ^ 0x5a5a00,
                   BulkAccess::kServerPull};
  // The send itself may report failure: the QP can die before its ACK.
  (void)c->send_msg(sink_request(d, 0, 0, 8));
  EXPECT_TRUE(c->wait_closed(kCloseWait));
  EXPECT_TRUE(logged(c->peer(), "bad bulk descriptor"));
}

// A push (RDMA WRITE, staged: the server does not wait for it before its
// reply) into a wrong rkey: the QP dies, so the reply never arrives.
TEST_F(RdmaBadInputTest, PushToAWrongRkeyClosesOnlyThatConnection) {
  auto c = raw();
  pt::BulkRequest req;
  req.set_length(4096);
  std::string body;
  detail::serialize_message(req, body);
  FrameHeader h = request(pt::TestBulkSource::kMethod, 10);
  h.body_length = static_cast<uint32_t>(body.size());
  h.descriptor_count = 1;
  std::byte desc[kBulkDescriptorSize];
  encode_descriptor(
      {reinterpret_cast<uintptr_t>(c->bulk()), 4096, c->rkey() ^ 0x5a5a00, BulkAccess::kServerPush},
      desc);
  (void)c->send_msg(frame_bytes(h, body, desc));
  EXPECT_TRUE(c->wait_closed(kCloseWait));
  EXPECT_TRUE(logged(c->peer(), "RDMA WRITE"));
  EXPECT_TRUE(logged(c->peer(), "bad bulk descriptor"));
  auto f = c->read_frame(milliseconds(100));
  EXPECT_FALSE(f.ok()) << "a reply arrived after a failed push";
}

TEST_F(RdmaBadInputTest, AddressOutsideTheRegisteredMemoryClosesOnlyThatConnection) {
  auto c = raw();
  // The right rkey, 64 KiB past the end of the registered area.
  BulkDescriptor d{reinterpret_cast<uintptr_t>(c->bulk()) + kBulkSize + 65536, 4096, c->rkey(),
                   BulkAccess::kServerPull};
  // The send itself may report failure: the QP can die before its ACK.
  (void)c->send_msg(sink_request(d, 0, 0, 9));
  EXPECT_TRUE(c->wait_closed(kCloseWait));
  EXPECT_TRUE(logged(c->peer(), "bad bulk descriptor"));
}

// ------------------------------------------------ busy: handshake slots

// A server of its own whose one handshake slot per address a raw peer
// holds (it connects and never proves the key). A real client from the
// same address is refused as busy (the rejection says so, busy_reject.h).
class BusyServer {
 public:
  explicit BusyServer(milliseconds handshake_timeout) {
    ServerOptions o = default_server_options();
    o.listen = "rdma://" + host() + ":0";
    o.handshake_timeout = handshake_timeout;
    o.max_unauthenticated_per_address = 1;
    server_ = start_test_server(o);
  }
  ~BusyServer() {
    if (server_) server_->stop();
  }
  RpcServer& server() { return *server_; }

 private:
  std::unique_ptr<RpcServer> server_;
};

Result<std::shared_ptr<RpcChannel>> connect_within(const std::string& address,
                                                   milliseconds connect_timeout) {
  ChannelOptions o;
  o.cluster_key = kTestKey;
  o.connect_timeout = connect_timeout;
  return RpcChannel::Connect(address, o);
}

TEST_F(RdmaBadInputTest, ABusyServerIsAskedAgainUntilASlotFrees) {
  // The raw peer's slot frees when the server drops it at its handshake
  // timeout (1.5 s), well inside the client's connect timeout (20 s).
  BusyServer busy(milliseconds(1500));
  RawPeer holder;
  ASSERT_TRUE(holder.connect(busy.server().port(), hello(kHelloMagic, 32, kSlot, holder.nonce())).ok());
  auto ch = connect_within(busy.server().address(), milliseconds(20000));
  ASSERT_TRUE(ch.ok()) << "refused as busy and not asked again: " << ch.status().ToString();
  pt::EchoRequest req;
  req.set_payload("after busy");
  pt::EchoReply resp;
  ASSERT_TRUE((*ch)->call<pt::TestEcho>(req, &resp).ok());
  EXPECT_EQ(resp.payload(), "after busy");
  EXPECT_TRUE(holder.wait_closed(kCloseWait));
  EXPECT_TRUE(logged(busy.server().address(), "refusing a connection request"));
}

TEST_F(RdmaBadInputTest, BusyPastTheConnectTimeoutFailsNamingTheAddressAndTheLimit) {
  BusyServer busy(milliseconds(60000));
  RawPeer holder;
  ASSERT_TRUE(holder.connect(busy.server().port(), hello(kHelloMagic, 32, kSlot, holder.nonce())).ok());
  auto ch = connect_within(busy.server().address(), milliseconds(1000));
  ASSERT_FALSE(ch.ok());
  const std::string why = ch.status().ToString();
  EXPECT_EQ(ch.status().code(), Code::kBusy) << why;
  EXPECT_NE(why.find(busy.server().address()), std::string::npos) << why;
  EXPECT_NE(why.find("limit of 1 connections in the handshake per address"), std::string::npos)
      << why;
  EXPECT_NE(why.find("refused"), std::string::npos) << why;
}

TEST_F(RdmaBadInputTest, ManyBadPeersAtOnce) {
  std::vector<std::thread> threads;
  std::atomic<int> closed{0};
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&, i] {
      RawPeer c;
      if (!c.connect(server_->port(), hello(kHelloMagic, 32, kSlot, c.nonce())).ok()) return;
      if (i % 2 == 0) {
        std::string junk(100 + i, static_cast<char>(i));
        (void)c.send_raw(junk);
      }  // odd ones stay silent until the handshake timeout
      if (c.wait_closed(kCloseWait)) closed++;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(closed.load(), 8);
}

}  // namespace
}  // namespace surge::net::testing
