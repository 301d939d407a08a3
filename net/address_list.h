// Lists of server addresses ("tcp://a:7100,tcp://b:7100"): how a client or
// a data server names every MDS of one file system.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"

namespace surge::net {

// Splits a comma-separated list; InvalidArgument, naming `what` and the
// list, when it or an entry is empty.
inline Result<std::vector<std::string>> parse_address_list(const std::string& list,
                                                           const std::string& what) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    const size_t comma = list.find(',', start);
    std::string one =
        list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (one.empty()) {
      return Status::InvalidArgument(what + " list '" + list + "' has an empty entry");
    }
    out.push_back(std::move(one));
    if (comma == std::string::npos) return out;
    start = comma + 1;
  }
}

}  // namespace surge::net
