// FileModel: what the stress run knows each of its files must hold, kept
// in sectors of kSector bytes (every write, append and truncate of the run
// is sector-aligned, so one write id per sector names every byte).
//
// A sector's bytes are content(write id, file offset) (write id 0: zeros,
// a hole). An update the file system acknowledged (its round ended with a
// successful fsync/close, or the truncate/unlink returned OK) makes the
// sector certain. An update whose round returned an error may or may not
// have happened, piece by piece: the sector may then hold its old or its
// new content (`either`), and after a second such update any content
// (`any`, not checked) until an acknowledged update covers it again. The
// size is kept as a range for the same reason.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace surge::stress {

constexpr uint64_t kSector = 512;

// The bytes write `wid` puts at [offset, offset + len) (offset a multiple
// of 8); wid 0 is zeros.
void fill_content(uint32_t wid, uint64_t offset, size_t len, char* out);

struct Update {
  enum Kind { kWrite, kTruncate } kind = kWrite;
  uint64_t offset = 0;  // write: where; truncate: the new size
  uint64_t length = 0;  // write only
  uint32_t wid = 0;     // write only
};

class FileModel {
 public:
  explicit FileModel(std::string path) : path_(std::move(path)) {}

  const std::string& path() const { return path_; }
  // Existence: certain, or unknown after a create or unlink that failed.
  bool exists() const { return exists_; }
  bool maybe() const { return maybe_; }
  void set_exists(bool exists, bool certain) {
    exists_ = exists;
    maybe_ = !certain;
  }
  uint64_t size_max() const { return size_max_; }
  uint64_t size_min() const { return size_min_; }

  // An update, acknowledged or not.
  void apply(const Update& u, bool acknowledged);

  // Checks the whole file as read (`data`: every byte up to its size);
  // "" when it may hold that, else the first difference, naming the path,
  // offset, what was read and what was wanted.
  std::string check(const std::string& data) const;
  // Bytes that are not checked (any content allowed).
  uint64_t unknown_bytes() const;

 private:
  static constexpr uint8_t kCertain = 0, kEither = 1, kAny = 2;
  void grow(size_t sectors);
  std::string path_;
  bool exists_ = false;
  bool maybe_ = false;
  uint64_t size_min_ = 0, size_max_ = 0;
  std::vector<uint32_t> cur_, alt_;
  std::vector<uint8_t> state_;
};

}  // namespace surge::stress
