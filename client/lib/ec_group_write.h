// EcGroupWrite: a write that covers the same range of all K data chunks of
// one EC stripe group, with the parity encoded here (docs/redundancy.md,
// "EC writes: full groups"). The parity comes from the caller's buffer
// itself (RsCodec::Encode reads the K data ranges in place) while the data
// is in flight, and every byte crosses the network once: K + M pieces for
// K of data, against 1 + M per byte when each data position sends a
// parity delta. Three steps, each for all groups of a batch at once:
//   1. begin(): the K data pieces go to their positions as held writes
//      (WriteRequest.ec_hold): stored, their deltas kept, versions answered.
//   2. send_parity(): once all K answered, the parity pieces go to the
//      SERVING parity positions with those versions; each stores them
//      only where its chunk stands at those versions (or just before).
//   3. commit_all(): one OdsEcCommit per data chunk, naming each of its
//      held updates in the batch and the parity positions that stored
//      their parity (one request, so the member sends them in version
//      order); the data server sends the delta to the others. The write
//      is done when every commit answered.
// A data piece that fails (step 1 or 3) is handed back as a PieceFailure
// and retried by DataPath as a plain write; a parity piece that fails or
// is declined costs only the deltas its data positions then send.
#pragma once

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "client/lib/parity_buffers.h"
#include "client/lib/stripe_io.h"
#include "net/proto/mds.pb.h"

namespace surge::client {

class EcGroupWrite {
 public:
  EcGroupWrite() = default;
  // Gives the parity buffers back to the client's ParityBuffers.
  ~EcGroupWrite();
  EcGroupWrite(const EcGroupWrite&) = delete;
  EcGroupWrite& operator=(const EcGroupWrite&) = delete;

  // Moves the pieces of `pieces` that make full group rows (the K data
  // positions of one chain, slot and chunk range) into writes of runs of
  // rows: consecutive rows of one chunk inside one kMaxPiece-aligned
  // window, whose parity goes as one write per parity position. The rest
  // stay.
  static std::vector<std::unique_ptr<EcGroupWrite>> take(const IoRequest& r,
                                                         std::vector<IoPiece>& pieces);

  uint64_t bytes() const { return length_ * data_units_; }
  // The data chunks the run writes: its chain and slot. Two runs of one
  // batch with the same chunks (two windows of them) must not be under
  // way at once: each data position orders their held updates as they
  // come, the orders may cross between positions, and each run's parity
  // then waits for the other's (StripeIo::issue_all sends them in waves).
  std::pair<uint32_t, uint32_t> chunks() const;

  // Step 1 into b. When a data position has no serving member the run is
  // given up: its pieces go out as plain writes (b's issue).
  void begin(IoBatch& b);
  // Step 2: waits for step 1's answers, sends the parity.
  void send_parity(IoBatch& b);
  // Waits for step 2's answers.
  void finish_parity(IoBatch& b);
  // Step 3 for all of b's runs; data pieces that failed go to b's
  // failures.
  static void commit_all(IoBatch& b, std::vector<std::unique_ptr<EcGroupWrite>>& groups);

 private:
  struct Member {
    PieceFailure attempt;  // the piece (parity: position and range), target, address
    std::shared_ptr<net::RpcChannel> channel;
    net::PendingCall call;
    bool sent = false;
    uint64_t version = 0;             // data: the version step 1 answered
    bool held = false;                // data: the delta waits for a commit
    bool applied = false;             // parity: the bytes were stored
    size_t row_from = 0, row_to = 0;  // parity: the rows it covers
  };
  struct Row {
    uint64_t chunk_offset = 0;
    uint64_t length = 0;
    std::vector<Member> data;  // position i at i
    bool answered = false;     // every data piece stored (step 1)
  };
  // Waits for m's call; on failure records it in b when record (a data
  // piece) and returns false.
  bool finish_call(IoBatch& b, Member& m, bool record, proto::ods::WriteReply* reply);
  // Sends m's piece (m.attempt: chunk range, target; m.channel) from src
  // with req's EC fields.
  void send_write(IoBatch& b, Member& m, proto::ods::WriteRequest req, const std::byte* src);
  // Sends parity position k + j the parity of rows [from, to).
  void send_parity_write(IoBatch& b, uint32_t j, size_t from, size_t to, bool whole_run);

  proto::mds::Chain chain_;
  uint64_t chunk_offset_ = 0;  // of the run
  uint64_t length_ = 0;        // of the run, in each chunk
  uint32_t data_units_ = 0;    // K
  bool given_up_ = false;
  std::vector<Row> rows_;
  std::vector<Member> parity_;
  ParityBuffers* parity_from_ = nullptr;                   // where parity_bufs_ go back
  std::vector<std::unique_ptr<std::byte[]>> parity_bufs_;  // M, each length_ bytes at least
};

}  // namespace surge::client
