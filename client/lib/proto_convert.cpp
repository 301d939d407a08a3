#include "client/lib/proto_convert.h"

namespace surge::client {

namespace mds = proto::mds;

namespace {

TimeSpec ts_from_ns(uint64_t ns) {
  return TimeSpec{static_cast<int64_t>(ns / 1000000000ull),
                  static_cast<uint32_t>(ns % 1000000000ull)};
}

}  // namespace

uint64_t ns_from_ts(const TimeSpec& t) {
  return static_cast<uint64_t>(t.sec) * 1000000000ull + t.nsec;
}

Attr attr_from_proto(const mds::Attr& a) {
  Attr r;
  r.ino = a.ino();
  r.mode = a.mode();
  r.nlink = a.nlink();
  r.uid = a.uid();
  r.gid = a.gid();
  r.size = a.size();
  r.rdev = a.rdev();
  r.atime = ts_from_ns(a.atime_ns());
  r.mtime = ts_from_ns(a.mtime_ns());
  r.ctime = ts_from_ns(a.ctime_ns());
  r.generation = a.generation();
  return r;
}

StripeLayout layout_from_proto(const mds::Layout& l) {
  StripeLayout r;
  r.stripe_size = l.stripe_size();
  r.stripe_count = l.stripe_count();
  r.targets.assign(l.targets().begin(), l.targets().end());
  r.chains.assign(l.chains().begin(), l.chains().end());
  if (l.replicas() != 0) r.replicas = l.replicas();
  return r;
}

FileLayout file_layout_from_proto(const mds::Layout& l) {
  FileLayout f;
  f.format = l.format() == 0 ? FileLayout::kFormatTargets : l.format();
  f.stripe_size = l.stripe_size();
  f.stripe_count = l.stripe_count();
  f.targets.assign(l.targets().begin(), l.targets().end());
  f.chains.assign(l.chains().begin(), l.chains().end());
  if (f.chained()) {
    f.scheme = l.scheme() == mds::SCHEME_REPLICAS ? Redundancy::kReplicas
               : l.scheme() == mds::SCHEME_EC     ? Redundancy::kErasure
                                                  : Redundancy::kNone;
  }
  f.replicas = l.replicas();
  f.ec_data = l.ec_data();
  f.ec_parity = l.ec_parity();
  return f;
}

FileLayout file_layout_of(const mds::Attr& a) {
  FileLayout f = file_layout_from_proto(a.layout());
  f.truncate_seq = a.truncate_seq();
  f.truncate_size = a.truncate_size();
  return f;
}

mds::Credentials cred_to_proto(const Caller& c) {
  mds::Credentials p;
  p.set_uid(c.uid);
  p.set_gid(c.gid);
  for (uint32_t g : c.groups) p.add_groups(g);
  return p;
}

}  // namespace surge::client
