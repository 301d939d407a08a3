// A metadata store written in store format 1 (inode records embedding the
// wire Attr and Layout, as every MDS before chains wrote them) still
// mounts: the MDS migrates it at start, its files keep their layouts, and
// a store of a format this MDS does not know is refused by name.
#include <sys/stat.h>

#include "mds/namespace/keys.h"
#include "mds/namespace/store_format.h"
#include "tests/mds/mds_fixture.h"

namespace surge::mds::testing {
namespace {

void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

// An inode record exactly as the format 1 records.proto encoded it:
// field 1 the wire Attr (a length-delimited message), field 2 the parent.
std::string format1_record(const pb::Attr& a, uint64_t parent) {
  std::string out;
  const std::string attr = a.SerializeAsString();
  out.push_back(static_cast<char>((1 << 3) | 2));
  put_varint(out, attr.size());
  out += attr;
  if (parent != 0) {
    out.push_back(static_cast<char>(2 << 3));
    put_varint(out, parent);
  }
  return out;
}

class StoreFormatTest : public NamespaceTest {
 protected:
  // Replaces the store with a format 1 one: the root and one file striped
  // over targets 3, 1, 2.
  void write_format1_store(const std::string& format = "1") {
    close_all();
    std::filesystem::remove_all(dir_ + "/db");
    RocksKvOptions ko;
    ko.path = dir_ + "/db";
    auto kv = RocksKvStore::Open(ko);
    ASSERT_TRUE(kv.ok());
    KvBatch b;
    b.put(Space::kSystem, std::string(keys::kFormat), format);
    std::string id;
    keys::put_be64(id, 0x5eed);
    b.put(Space::kSystem, std::string(keys::kFsId), id);
    std::string hwm;
    keys::put_be64(hwm, 100);
    b.put(Space::kSystem, std::string(keys::kInoHwm), hwm);
    pb::Attr root;
    root.set_ino(kRoot);
    root.set_mode(S_IFDIR | 0777);
    root.set_nlink(2);
    root.set_generation(1);
    b.put(Space::kInodes, keys::inode(kRoot), format1_record(root, kRoot));
    pb::Attr file;
    file.set_ino(7);
    file.set_mode(S_IFREG | 0644);
    file.set_nlink(1);
    file.set_uid(1000);
    file.set_size(12345);
    file.set_mtime_ns(42);
    file.set_generation(1);
    file.mutable_layout()->set_stripe_size(1 << 20);
    file.mutable_layout()->set_stripe_count(3);
    for (uint32_t t : {3, 1, 2}) file.mutable_layout()->add_targets(t);
    b.put(Space::kInodes, keys::inode(7), format1_record(file, 0));
    b.put(Space::kDentries, keys::dentry(kRoot, "old"), keys::encode_dentry({7, S_IFREG}));
    ASSERT_TRUE((*kv)->commit(b).ok());
  }
};

TEST_F(StoreFormatTest, AFormatOneStoreMountsWithItsFilesAndLayouts) {
  write_format1_store();
  open_all();
  auto f = lookup(kRoot, "old");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->ino(), 7u);
  EXPECT_EQ(f->size(), 12345u);
  EXPECT_EQ(f->uid(), 1000u);
  EXPECT_EQ(f->mtime_ns(), 42u);
  EXPECT_EQ(f->layout().format(), 1u);
  EXPECT_EQ(f->layout().stripe_count(), 3u);
  EXPECT_EQ(std::vector<uint32_t>(f->layout().targets().begin(), f->layout().targets().end()),
            (std::vector<uint32_t>{3, 1, 2}));
  // New files are made beside it as usual.
  ASSERT_TRUE(create(kRoot, "new").ok());
}

TEST_F(StoreFormatTest, MigrationStampsEveryRecordAndTheStore) {
  write_format1_store();
  open_all();
  auto format = kv_->get(Space::kSystem, keys::kFormat);
  ASSERT_TRUE(format.ok() && format->has_value());
  EXPECT_EQ(**format, kStoreFormat);
  auto raw = kv_->get(Space::kInodes, keys::inode(7));
  ASSERT_TRUE(raw.ok() && raw->has_value());
  records::InodeRecord r;
  ASSERT_TRUE(r.ParseFromString(**raw));
  EXPECT_EQ(r.format_version(), kRecordFormatVersion);
  EXPECT_EQ(r.attr().layout().format(), 1u);
  // A second start finds nothing to do and changes nothing.
  reopen();
  auto again = kv_->get(Space::kInodes, keys::inode(7));
  ASSERT_TRUE(again.ok() && again->has_value());
  EXPECT_EQ(**again, **raw);
}

TEST_F(StoreFormatTest, AStoreOfAnUnknownFormatIsRefusedByName) {
  write_format1_store("9");
  RocksKvOptions ko;
  ko.path = dir_ + "/db";
  auto kv = RocksKvStore::Open(ko);
  ASSERT_TRUE(kv.ok());
  auto id = Namespace::FormatOrLoad(kv->get(), 0);
  ASSERT_FALSE(id.ok());
  EXPECT_EQ(id.status().code(), Code::kCorruption);
  EXPECT_NE(id.status().message().find("format '9'"), std::string::npos) << id.status().message();
}

TEST_F(StoreFormatTest, NewStoresAreWrittenInTheCurrentFormat) {
  auto format = kv_->get(Space::kSystem, keys::kFormat);
  ASSERT_TRUE(format.ok() && format->has_value());
  EXPECT_EQ(**format, kStoreFormat);
  auto f = create(kRoot, "f");
  ASSERT_TRUE(f.ok());
  auto raw = kv_->get(Space::kInodes, keys::inode(f->ino()));
  records::InodeRecord r;
  ASSERT_TRUE(r.ParseFromString(**raw));
  EXPECT_EQ(r.format_version(), kRecordFormatVersion);
}

}  // namespace
}  // namespace surge::mds::testing
