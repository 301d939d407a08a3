// Conversion between stored records and wire messages; see record_wire.h.
#include "mds/namespace/record_wire.h"

namespace surge::mds {

namespace pb = proto::mds;

void to_wire(const records::StoredLayout& l, pb::Layout* out) {
  out->Clear();
  out->set_stripe_size(l.stripe_size());
  out->set_stripe_count(l.stripe_count());
  out->mutable_targets()->Add(l.targets().begin(), l.targets().end());
  out->set_format(l.format());
  out->mutable_chains()->Add(l.chains().begin(), l.chains().end());
  switch (l.scheme()) {
    case pb::SCHEME_REPLICAS:
    case pb::SCHEME_EC:
      out->set_scheme(static_cast<pb::RedundancyScheme>(l.scheme()));
      break;
    default:
      out->set_scheme(pb::SCHEME_UNSET);
  }
  out->set_replicas(l.replicas());
  out->set_ec_data(l.ec_data());
  out->set_ec_parity(l.ec_parity());
}

pb::Layout to_wire(const records::StoredLayout& l) {
  pb::Layout out;
  to_wire(l, &out);
  return out;
}

void to_wire(const records::StoredAttr& a, pb::Attr* out) {
  out->Clear();
  out->set_ino(a.ino());
  out->set_mode(a.mode());
  out->set_nlink(a.nlink());
  out->set_uid(a.uid());
  out->set_gid(a.gid());
  out->set_size(a.size());
  out->set_atime_ns(a.atime_ns());
  out->set_mtime_ns(a.mtime_ns());
  out->set_ctime_ns(a.ctime_ns());
  out->set_rdev(a.rdev());
  if (a.has_layout()) to_wire(a.layout(), out->mutable_layout());
  out->set_generation(a.generation());
  out->set_truncate_seq(a.truncate_seq());
  out->set_truncate_size(a.truncate_size());
}

records::StoredLayout to_stored(const pb::Layout& l) {
  records::StoredLayout out;
  out.set_stripe_size(l.stripe_size());
  out.set_stripe_count(l.stripe_count());
  out.mutable_targets()->Add(l.targets().begin(), l.targets().end());
  out.set_format(l.format());
  out.mutable_chains()->Add(l.chains().begin(), l.chains().end());
  out.set_scheme(static_cast<uint32_t>(l.scheme()));
  out.set_replicas(l.replicas());
  out.set_ec_data(l.ec_data());
  out.set_ec_parity(l.ec_parity());
  return out;
}

}  // namespace surge::mds
