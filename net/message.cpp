// detail::parse_message / serialize_message: the protobuf (lite) codec of
// every message body, kept out of the headers so they need no protobuf
// include.
#include <google/protobuf/message_lite.h>

#include "net/rpc_server.h"

namespace surge::net::detail {

bool parse_message(google::protobuf::MessageLite& msg, std::string_view bytes) {
  if (bytes.size() > static_cast<size_t>(INT32_MAX)) return false;
  return msg.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()));
}

bool serialize_message(const google::protobuf::MessageLite& msg, std::string& out) {
  return msg.SerializeToString(&out);
}

}  // namespace surge::net::detail
