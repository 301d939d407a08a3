// Conversions between libsurge's API types (surge/client.h) and the MDS wire
// messages (net/proto/mds.proto). The client converts here and nowhere else,
// so a wire change touches one file.
#pragma once

#include <cstdint>

#include "common/file_layout.h"
#include "net/proto/mds.pb.h"
#include "surge/client.h"

namespace surge::client {

Attr attr_from_proto(const proto::mds::Attr& a);
StripeLayout layout_from_proto(const proto::mds::Layout& l);
// The model of a file's wire layout (format 0 reads as 1), what the data
// path maps ranges with (common/chunk_map.h).
FileLayout file_layout_from_proto(const proto::mds::Layout& l);
// A file's layout with the truncate generation its attributes carry.
FileLayout file_layout_of(const proto::mds::Attr& a);
proto::mds::Credentials cred_to_proto(const Caller& c);
// A TimeSpec as the nanoseconds since the epoch the wire carries.
uint64_t ns_from_ts(const TimeSpec& t);

}  // namespace surge::client
