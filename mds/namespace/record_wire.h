// Conversion between the MDS's stored records (records.proto) and the wire
// messages (net/proto/mds.proto), done where the namespace answers a
// request or takes a layout from the cluster map: the one place the two
// meet, so either can change without the other.
#pragma once

#include "mds/namespace/records.pb.h"
#include "net/proto/mds.pb.h"

namespace surge::mds {

void to_wire(const records::StoredAttr& a, proto::mds::Attr* out);
void to_wire(const records::StoredLayout& l, proto::mds::Layout* out);
proto::mds::Layout to_wire(const records::StoredLayout& l);
records::StoredLayout to_stored(const proto::mds::Layout& l);

}  // namespace surge::mds
