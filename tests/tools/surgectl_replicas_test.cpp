// surgectl scrub compares the replicas of chained chunks, against a real
// cluster (1 MDS + 3 data servers on 127.0.0.1, files in a directory of
// `setstripe --replicas 2`): a cluster written through libsurge has
// every chunk identical on both members of its chain (replicas 3 is not
// tested: its writes stall under load, docs/redundancy.md); a member's copy changed
// on disk with its CRC sidecar kept true (so the CRC scrub of that target
// finds nothing) is named as a difference, with exit status 3; a copy
// whose bytes fail its own CRCs is named as corrupt, exit status 3 too.
#include <fcntl.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <iterator>
#include <fstream>

#include "common/crc32c.h"
#include "tests/tools/surgectl_fixture.h"

namespace surge::test {
namespace {

using SurgectlReplicas = SurgectlTest;

bool has(const std::string& out, const std::string& what) {
  return out.find(what) != std::string::npos;
}

constexpr size_t kBlock = 4096;  // ods/store/block_checksum.h

// Writes path (a new file) with bytes of data; returns its inode.
uint64_t write_file(LocalCluster& cluster, const std::string& path, size_t bytes, uint64_t seed) {
  auto cl = cluster.connect();
  if (!cl.ok()) throw std::runtime_error(cl.status().ToString());
  auto f = (*cl)->open(path, O_RDWR | O_CREAT | O_EXCL, 0644);
  if (!f.ok()) throw std::runtime_error("create " + path + ": " + f.status().ToString());
  const std::string data = random_bytes(bytes, seed);
  auto w = (*cl)->pwrite(**f, data.data(), data.size(), 0);
  if (!w.ok()) throw std::runtime_error("write " + path + ": " + w.status().ToString());
  const uint64_t ino = (*f)->ino();
  Status st = (*cl)->close(*f);
  if (!st.ok()) throw std::runtime_error("close " + path + ": " + st.ToString());
  return ino;
}

// The chunk data files (chunks/objects/HH/HH/<id>.dat) of data server i.
std::vector<std::string> chunk_files(LocalCluster& cluster, int i) {
  std::vector<std::string> found;
  const std::string root = cluster.ods_dir(i) + "/chunks/objects";
  if (!std::filesystem::exists(root)) return found;
  for (const auto& e : std::filesystem::recursive_directory_iterator(root)) {
    if (e.is_regular_file() && e.path().extension() == ".dat") found.push_back(e.path());
  }
  return found;
}

// Flips one byte of block 0 of a chunk file and rewrites that block's
// sidecar entry (<id>.crc, crc ^ crc(zero block)) to match the new bytes,
// as a bug that stored other bytes on one replica would leave it.
void change_block0_keeping_crc(const std::string& dat, bool keep_crc = true) {
  std::string block(kBlock, '\0');
  {
    std::fstream f(dat, std::ios::in | std::ios::out | std::ios::binary);
    ASSERT_TRUE(f.good()) << dat;
    f.read(block.data(), kBlock);
    ASSERT_EQ(f.gcount(), static_cast<std::streamsize>(kBlock)) << dat << " is under one block";
    block[100] = static_cast<char>(block[100] ^ 0x5a);
    f.clear();
    f.seekp(0);
    f.write(block.data(), kBlock);
    ASSERT_TRUE(f.good()) << dat;
  }
  if (!keep_crc) return;
  const std::string zeros(kBlock, '\0');
  const uint32_t stored = crc32c(block.data(), kBlock) ^ crc32c(zeros.data(), kBlock);
  std::string crc = dat.substr(0, dat.size() - 4) + ".crc";
  std::fstream f(crc, std::ios::in | std::ios::out | std::ios::binary);
  ASSERT_TRUE(f.good()) << crc;
  f.seekp(0);
  f.write(reinterpret_cast<const char*>(&stored), sizeof stored);
  ASSERT_TRUE(f.good()) << crc;
}

// The target id data server i registered with (its data dir keeps it).
std::string target_id_of(LocalCluster& cluster, int i) {
  std::ifstream in(cluster.ods_dir(i) + "/target_id");
  uint64_t id = 0;
  if (!(in >> id)) throw std::runtime_error("no target id in " + cluster.ods_dir(i));
  return std::to_string(id);
}

// Changes bytes 100 and 200..203 of a chunk file so that the CRC32C of the
// whole file stays the same (CRC is affine over GF(2): the 32 bits at 200
// are solved for), and rewrites block 0's sidecar entry: a copy that only
// a byte-for-byte comparison tells apart.
void change_keeping_whole_crc(const std::string& dat) {
  std::string data;
  {
    std::ifstream in(dat, std::ios::binary);
    ASSERT_TRUE(in.good()) << dat;
    data.assign(std::istreambuf_iterator<char>(in), {});
  }
  ASSERT_GE(data.size(), kBlock) << dat;
  const std::string zeros(data.size(), '\0');
  const uint32_t zero_crc = crc32c(zeros.data(), zeros.size());
  auto f = [&](const std::string& d) { return crc32c(d.data(), d.size()) ^ zero_crc; };
  std::string delta = zeros;
  delta[100] = 0x5a;
  const uint32_t target = f(delta);  // cancel it with bits at 200..203
  std::vector<uint32_t> col(32);
  for (int i = 0; i < 32; ++i) {
    std::string e = zeros;
    e[200 + i / 8] = static_cast<char>(1 << (i % 8));
    col[static_cast<size_t>(i)] = f(e);
  }
  // Solve sum x_i col_i = target by elimination on (column, chosen-bits).
  std::vector<std::pair<uint32_t, uint32_t>> basis;  // (value, bits of x)
  for (int i = 0; i < 32; ++i) {
    uint32_t v = col[static_cast<size_t>(i)], x = 1u << i;
    for (auto& [bv, bx] : basis) {
      if ((v ^ bv) < v) {
        v ^= bv;
        x ^= bx;
      }
    }
    if (v != 0) basis.emplace_back(v, x);
    std::sort(basis.begin(), basis.end(), std::greater<>());
  }
  uint32_t v = target, x = 0;
  for (auto& [bv, bx] : basis) {
    if ((v ^ bv) < v) {
      v ^= bv;
      x ^= bx;
    }
  }
  ASSERT_EQ(v, 0u) << "no compensating bits";
  data[100] = static_cast<char>(data[100] ^ 0x5a);
  for (int b = 0; b < 4; ++b) data[200 + b] = static_cast<char>(data[200 + b] ^ ((x >> (8 * b)) & 0xff));
  {
    std::fstream out(dat, std::ios::in | std::ios::out | std::ios::binary);
    out.write(data.data(), kBlock);
    ASSERT_TRUE(out.good()) << dat;
  }
  const std::string zb(kBlock, '\0');
  const uint32_t stored = crc32c(data.data(), kBlock) ^ crc32c(zb.data(), kBlock);
  std::fstream crc(dat.substr(0, dat.size() - 4) + ".crc", std::ios::in | std::ios::out | std::ios::binary);
  crc.write(reinterpret_cast<const char*>(&stored), sizeof stored);
  ASSERT_TRUE(crc.good());
}

void make_dir(LocalCluster& cluster, const std::string& dir) {
  auto cl = cluster.connect();
  ASSERT_TRUE(cl.ok()) << cl.status().ToString();
  ASSERT_TRUE((*cl)->mkdir(dir, 0755).ok());
}

TEST_F(SurgectlReplicas, WrittenFilesHaveIdenticalReplicas) {
  make_dir(*cluster_, "/r");
  std::string out;
  ASSERT_EQ(surgectl("setstripe --replicas 2 --count 3 --size 1048576 /r", &out), 0) << out;
  for (int i = 0; i < 4; ++i) {
    write_file(*cluster_, "/r/f" + std::to_string(i), (5u << 20) + 12345u * i,
               static_cast<uint64_t>(i));
  }
  ASSERT_EQ(surgectl("scrub", &out), 0) << out;
  EXPECT_TRUE(has(out, "0 corrupt blocks, 0 not scrubbed")) << out;
  EXPECT_TRUE(has(out, "0 replicas differ, 0 chains not compared")) << out;
  EXPECT_FALSE(has(out, " 0 chunks compared")) << out;
  ASSERT_EQ(surgectl("--json scrub", &out), 0) << out;
  // 4 files x 3 slots, each chunk compared once on its chain
  EXPECT_TRUE(has(out, "\"chunks_compared\":12,\"replica_differences\":0,\"uncompared_chains\":0"))
      << out;
}

TEST_F(SurgectlReplicas, AChangedReplicaIsNamedWithExitThree) {
  make_dir(*cluster_, "/r");
  std::string out;
  ASSERT_EQ(surgectl("setstripe --replicas 2 --count 1 /r", &out), 0) << out;
  const uint64_t ino = write_file(*cluster_, "/r/victim", 100000, 7);
  std::vector<int> holders;
  std::string dat;
  for (int i = 0; i < 3; ++i) {
    auto files = chunk_files(*cluster_, i);
    if (files.empty()) continue;
    ASSERT_EQ(files.size(), 1u) << "data server " << i;
    holders.push_back(i);
    dat = files[0];  // the last holder's copy is changed
  }
  ASSERT_EQ(holders.size(), 2u) << "one chunk of replicas 2: two copies";
  ASSERT_EQ(surgectl("scrub", &out), 0) << out;
  change_block0_keeping_crc(dat);
  if (HasFatalFailure()) return;

  EXPECT_EQ(surgectl("scrub", &out), 3) << out;
  std::printf("%s", out.c_str());
  EXPECT_TRUE(has(out, "0 corrupt blocks, 0 not scrubbed")) << out;  // each copy is self-consistent
  EXPECT_TRUE(has(out, "replicas differ (crc): chunk ino " + std::to_string(ino) +
                           " slot 0 position 0 of chain "))
      << out;
  for (int h : holders) {  // both copies, each with its target and address
    EXPECT_TRUE(has(out, " target " + target_id_of(*cluster_, h) + " tcp://127.0.0.1:")) << out;
  }
  EXPECT_TRUE(has(out, "1 replicas differ")) << out;
  EXPECT_EQ(surgectl("--json scrub", &out), 3) << out;
  EXPECT_TRUE(has(out, "\"differ\":[{\"ino\":" + std::to_string(ino) +
                           ",\"slot\":0,\"position\":0,\"what\":\"crc\""))
      << out;
  EXPECT_TRUE(has(out, "\"replica_differences\":1,")) << out;
}

TEST_F(SurgectlReplicas, BytesThatDifferUnderTheSameCrcAreFound) {
  make_dir(*cluster_, "/r");
  std::string out;
  ASSERT_EQ(surgectl("setstripe --replicas 2 --count 1 /r", &out), 0) << out;
  const uint64_t ino = write_file(*cluster_, "/r/victim", 100000, 9);
  std::string dat;
  for (int i = 0; i < 3; ++i) {
    auto files = chunk_files(*cluster_, i);
    if (!files.empty()) dat = files[0];
  }
  ASSERT_FALSE(dat.empty());
  change_keeping_whole_crc(dat);
  if (HasFatalFailure()) return;
  // Same version, size and CRC: only reading the copies tells them apart.
  ASSERT_EQ(surgectl("scrub --crc-only", &out), 0) << out;
  EXPECT_EQ(surgectl("scrub", &out), 3) << out;
  EXPECT_TRUE(has(out, "replicas differ (bytes): chunk ino " + std::to_string(ino) +
                           " slot 0 position 0 of chain "))
      << out;
  EXPECT_TRUE(has(out, " first at byte 100:")) << out;
  EXPECT_EQ(surgectl("--json scrub", &out), 3) << out;
  EXPECT_TRUE(has(out, "\"what\":\"bytes\",\"first_differing_byte\":100,")) << out;
}

TEST_F(SurgectlReplicas, ACopyFailingItsOwnCrcIsCorrupt) {
  make_dir(*cluster_, "/r");
  std::string out;
  ASSERT_EQ(surgectl("setstripe --replicas 2 --count 1 /r", &out), 0) << out;
  const uint64_t ino = write_file(*cluster_, "/r/victim", 100000, 8);
  int holder = -1;
  std::string dat;
  for (int i = 0; i < 3; ++i) {
    auto files = chunk_files(*cluster_, i);
    if (files.empty()) continue;
    holder = i;
    dat = files[0];
  }
  ASSERT_NE(holder, -1);
  change_block0_keeping_crc(dat, false);
  if (HasFatalFailure()) return;
  EXPECT_EQ(surgectl("scrub", &out), 3) << out;
  EXPECT_TRUE(has(out, "CORRUPT COPY: ")) << out;
  EXPECT_TRUE(has(out, "checksum mismatch in block at offset 0")) << out;
  EXPECT_TRUE(has(out, "ino " + std::to_string(ino))) << out;
  EXPECT_TRUE(has(out, "on target " + target_id_of(*cluster_, holder) + " at tcp://127.0.0.1:"))
      << out;
  EXPECT_TRUE(has(out, "1 replicas differ, 0 chains not compared")) << out;
}

}  // namespace
}  // namespace surge::test
