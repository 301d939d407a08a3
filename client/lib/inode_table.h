// InodeTable: the inodes this client holds open, each with the state its
// handles share. An open is counted while the table is locked, so the last
// close of another handle (the mount's release is asynchronous) cannot drop
// the state between an open's finding it and counting itself; a state
// leaves the table only with no opens left. Thread-safe.
#pragma once

#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "client/lib/open_file.h"
#include "surge/client.h"

namespace surge::client {

class InodeTable {
 public:
  // One more open of a.ino, with the layout and size the MDS answered.
  std::shared_ptr<InodeState> attach(const Attr& a, const FileLayout& layout, int flags,
                                     const Caller& c);
  // One open fewer of st; the last one takes st out of the table.
  void release(const std::shared_ptr<InodeState>& st);
  // Null when ino is not open here.
  std::shared_ptr<InodeState> find(Ino ino);
  std::vector<std::shared_ptr<InodeState>> all();
  // a as this client sees it: the MDS size, or more if we wrote past it.
  Attr merge_local(Attr a);

 private:
  std::mutex mu_;
  std::unordered_map<Ino, std::shared_ptr<InodeState>> inodes_;
};

}  // namespace surge::client
