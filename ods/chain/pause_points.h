// Pause points: named places in the chained update path where a test can
// hold one request as long as it likes, to force an interleaving that
// otherwise needs a loaded server and luck (a write admitted under one
// chain version that takes the chunk's update order only after the chain
// moved and a resync compared the chunk).
//
// Armed only by the environment: SURGE_ODS_PAUSE_AT="NAME:N:DIR" holds the
// N-th pass (1-based, counted in this process) through point NAME: it
// creates DIR/NAME.held (so the test knows the request is held) and waits
// until DIR/NAME.go exists, then goes on; when the request it held leaves
// the scope of the point (whatever it returned), DIR/NAME.done appears, so
// the test knows the request's effect, if any, is there. Files rather than
// times, so the test decides when the request goes on and nothing depends
// on how fast the machine is. Unset (always, in production), a pause point
// is one relaxed atomic load.
#pragma once

namespace surge::ods {

// Points:
//   "write_before_order": a chained write at the head, admitted, about to
//     take its chunk's update order;
//   "resync_before_order": a whole-chunk piece (OdsResyncChunk) at the
//     receiver, admitted, about to take its chunk's update order;
//   "resync_sent_before_done": a resync source that sent chunks in this
//     round and found none incomplete after it, about to report done.
class PausePoint {
 public:
  explicit PausePoint(const char* name);
  ~PausePoint();
  PausePoint(const PausePoint&) = delete;
  PausePoint& operator=(const PausePoint&) = delete;

 private:
  bool held_ = false;
};

}  // namespace surge::ods
