// surgectl and EC directories (issue 16), against a real cluster (1 MDS +
// 3 data servers on 127.0.0.1): `setstripe --ec K+M` makes new files EC
// with K+M chunks per stripe group on distinct targets, getstripe shows the
// groups and which target holds which data and parity chunk (text and
// JSON), K+M beyond the data servers and malformed schemes are refused
// naming them, --ec and --replicas exclude each other, df gives the
// usable space of each scheme next to the raw, and scrub checks each EC
// group's parity against its data, naming a group whose parity lies.
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>

#include "common/crc32c.h"
#include "net/cluster_key.h"
#include "net/proto/ods_methods.h"
#include "net/rpc_channel.h"
#include "tests/tools/surgectl_fixture.h"

namespace surge::test {
namespace {

using Json = nlohmann::json;

class SurgectlEc : public SurgectlTest {
 protected:
  void make_dir(const std::string& path) {
    auto cl = cluster_->connect();
    ASSERT_TRUE(cl.ok()) << cl.status().ToString();
    ASSERT_TRUE((*cl)->mkdir(path, 0755).ok()) << path;
  }
  // An empty file: EC data IO is not in the client yet, its layout is.
  void make_file(const std::string& path) {
    auto cl = cluster_->connect();
    ASSERT_TRUE(cl.ok()) << cl.status().ToString();
    auto f = (*cl)->open(path, O_RDWR | O_CREAT | O_EXCL, 0644);
    ASSERT_TRUE(f.ok()) << path << ": " << f.status().ToString();
    ASSERT_TRUE((*cl)->close(*f).ok()) << path;
  }
  // surgectl --json args, which must exit with rc.
  Json json_of_rc(const std::string& args, int rc_wanted) {
    std::string out, err;
    const int rc = surgectl_apart("--json " + args, &out, &err);
    if (rc != rc_wanted) {
      ADD_FAILURE() << "surgectl --json " << args << " exited " << rc << "\n" << out << err;
      return Json::object();
    }
    Json doc = Json::parse(out, nullptr, false);
    if (doc.is_discarded()) ADD_FAILURE() << "no JSON from " << args << ":\n" << out;
    return doc;
  }
  Json json_of(const std::string& args) {
    std::string out, err;
    const int rc = surgectl_apart("--json " + args, &out, &err);
    if (rc != 0) {
      ADD_FAILURE() << "surgectl --json " << args << " exited " << rc << "\n" << out << err;
      return Json::object();
    }
    Json doc = Json::parse(out, nullptr, false);
    if (doc.is_discarded()) ADD_FAILURE() << "no JSON from " << args << ":\n" << out;
    return doc;
  }
};

bool has(const std::string& out, const std::string& what) {
  return out.find(what) != std::string::npos;
}

TEST_F(SurgectlEc, SetstripeEcMakesNewFilesEcOnDistinctTargets) {
  make_dir("/ec");
  std::string out;
  ASSERT_EQ(surgectl("setstripe /ec --ec 2+1 --count 2", &out), 0) << out;
  ASSERT_EQ(surgectl("getstripe /ec", &out), 0) << out;
  EXPECT_TRUE(has(out, "ec 2+1")) << out;
  make_dir("/ec/sub");
  make_file("/ec/sub/f");
  ASSERT_EQ(surgectl("getstripe /ec/sub/f", &out), 0) << out;
  EXPECT_TRUE(has(out, "stripe_count 2 ec 2+1 chains")) << out;
  EXPECT_TRUE(has(out,
                  "stripe groups: 2 data + 1 parity chunks of 524288 bytes "
                  "(1048576 file bytes per group), group g on slot g % 2"))
      << out;
  // Each slot: data 0, data 1 and parity 0, each on its own target.
  const std::regex slot(
      "slot [01]: chain [0-9]+ version [0-9]+ healthy: data 0 target ([0-9]+) serving, "
      "data 1 target ([0-9]+) serving, parity 0 target ([0-9]+) serving");
  int slots = 0;
  for (std::sregex_iterator it(out.begin(), out.end(), slot), end; it != end; ++it) {
    const std::set<std::string> targets{(*it)[1], (*it)[2], (*it)[3]};
    EXPECT_EQ(targets.size(), 3u) << it->str();
    ++slots;
  }
  EXPECT_EQ(slots, 2) << out;
  // surgectl chains names the positions of EC chains the same way.
  ASSERT_EQ(surgectl("chains", &out), 0) << out;
  EXPECT_TRUE(std::regex_search(
      out, std::regex("ec 2\\+1.*data 0 target [0-9]+ serving, data 1 target [0-9]+ serving, "
                      "parity 0 target [0-9]+ serving")))
      << out;
}

TEST_F(SurgectlEc, GetstripeJsonNamesEachChunkPosition) {
  make_dir("/ec");
  Json set = json_of("setstripe /ec --ec 2+1 --count 1");
  EXPECT_EQ(set.at("scheme").get<std::string>(), "ec 2+1") << set;
  make_file("/ec/f");
  Json f = json_of("getstripe /ec/f");
  EXPECT_EQ(f.at("format").get<uint32_t>(), 2u) << f;
  EXPECT_EQ(f.at("scheme").get<std::string>(), "ec 2+1") << f;
  EXPECT_EQ(f.at("ec").at("data").get<uint32_t>(), 2u) << f;
  EXPECT_EQ(f.at("ec").at("parity").get<uint32_t>(), 1u) << f;
  // No --size: units of 1 MiB / K, so a 1 MiB write fills a whole group.
  EXPECT_EQ(f.at("ec").at("chunk_size").get<uint64_t>(), 524288u) << f;
  EXPECT_EQ(f.at("ec").at("group_bytes").get<uint64_t>(), 1048576u) << f;
  ASSERT_EQ(f.at("slots").size(), 1u) << f;
  const Json& pos = f.at("slots")[0].at("positions");
  ASSERT_EQ(pos.size(), 3u) << f;
  const std::vector<std::string> names{"data 0", "data 1", "parity 0"};
  std::set<uint32_t> targets;
  for (size_t p = 0; p < 3; ++p) {
    EXPECT_EQ(pos[p].at("position").get<uint32_t>(), p) << f;
    EXPECT_EQ(pos[p].at("chunk").get<std::string>(), names[p]) << f;
    EXPECT_EQ(pos[p].at("state").get<std::string>(), "serving") << f;
    targets.insert(pos[p].at("target").get<uint32_t>());
  }
  EXPECT_EQ(targets.size(), 3u) << f;
}

TEST_F(SurgectlEc, MoreChunksThanDataServersIsRefused) {
  make_dir("/wide");
  std::string out;
  EXPECT_NE(surgectl("setstripe /wide --ec 3+1", &out), 0) << out;
  EXPECT_TRUE(has(out, "ec 3+1 needs K >= 1, M >= 1 and K + M <= 3")) << out;
}

TEST_F(SurgectlEc, MalformedSchemeIsRefusedNamingIt) {
  make_dir("/bad");
  for (const std::string bad : {"4", "4+", "+2", "0+2", "2+0", "a+b", "2+1x"}) {
    std::string out;
    EXPECT_NE(surgectl("setstripe /bad --ec " + bad, &out), 0) << bad << ": " << out;
    EXPECT_TRUE(has(out, "--ec '" + bad + "': expected K+M")) << bad << ": " << out;
  }
}

TEST_F(SurgectlEc, EcAndReplicasExcludeEachOther) {
  make_dir("/both");
  std::string out;
  EXPECT_NE(surgectl("setstripe /both --ec 2+1 --replicas 2", &out), 0) << out;
  EXPECT_TRUE(has(out, "excludes")) << out;
  ASSERT_EQ(surgectl("getstripe /both", &out), 0) << out;
  EXPECT_FALSE(has(out, "ec 2+1")) << out;
}

TEST_F(SurgectlEc, DfShowsUsableSpaceOfEachSchemeNextToTheRaw) {
  make_dir("/ec");
  make_dir("/r2");
  std::string out;
  ASSERT_EQ(surgectl("setstripe /ec --ec 2+1", &out), 0) << out;
  ASSERT_EQ(surgectl("setstripe /r2 --replicas 2", &out), 0) << out;
  make_file("/ec/f");  // the chains of a scheme are formed by its first file
  make_file("/r2/f");
  Json df = json_of("df");
  const uint64_t raw = df.at("total_bytes").get<uint64_t>();
  const uint64_t raw_free = df.at("free_bytes").get<uint64_t>();
  ASSERT_EQ(df.at("usable").size(), 2u) << df;
  const Json& r2 = df.at("usable")[0];
  const Json& ec = df.at("usable")[1];
  EXPECT_EQ(r2.at("scheme").get<std::string>(), "replicas 2") << df;
  EXPECT_EQ(r2.at("usable_bytes").get<uint64_t>(), raw / 2) << df;
  EXPECT_EQ(r2.at("usable_free_bytes").get<uint64_t>(), raw_free / 2) << df;
  EXPECT_EQ(ec.at("scheme").get<std::string>(), "ec 2+1") << df;
  EXPECT_EQ(ec.at("usable_bytes").get<uint64_t>(), raw / 3 * 2 + raw % 3 * 2 / 3) << df;
  EXPECT_EQ(ec.at("usable_free_bytes").get<uint64_t>(), raw_free / 3 * 2 + raw_free % 3 * 2 / 3)
      << df;
  ASSERT_EQ(surgectl("df", &out), 0) << out;
  EXPECT_TRUE(std::regex_search(out, std::regex("\nscheme +usable bytes +usable free\n"))) << out;
  EXPECT_TRUE(std::regex_search(out, std::regex("\nreplicas 2 +[0-9]+ +[0-9]+\n"))) << out;
  EXPECT_TRUE(std::regex_search(out, std::regex("\nec 2\\+1 +[0-9]+ +[0-9]+\n"))) << out;
}

// scrub reads every position of every group of an EC file: clean after
// ordinary writes; after a parity server is sent a delta the data never
// made (a peer that lies), and the data position is then written at the
// version that delta claimed, the versions agree but the bytes do not: the
// group is named, and the exit status is 3.
TEST_F(SurgectlEc, ScrubNamesAGroupWhoseParityDiffersFromTheData) {
  make_dir("/ec");
  std::string out;
  ASSERT_EQ(surgectl("setstripe /ec --ec 2+1 --count 1", &out), 0) << out;
  auto cl = cluster_->connect();
  ASSERT_TRUE(cl.ok()) << cl.status().ToString();
  const std::string data = random_bytes(3 << 20, 9);
  {
    auto f = (*cl)->open("/ec/f", O_RDWR | O_CREAT | O_EXCL, 0644);
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    ASSERT_TRUE((*cl)->pwrite(**f, data.data(), data.size(), 0).ok());
    ASSERT_TRUE((*cl)->close(*f).ok());
  }
  ASSERT_EQ(surgectl("scrub", &out), 0) << out;
  EXPECT_TRUE(has(out, "1 chunk sets")) << out;
  EXPECT_TRUE(has(out, "0 parity windows inconsistent")) << out;

  // Where position 0 and the parity live, and the data chunk's version.
  auto st = (*cl)->stat("/ec/f");
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  Json f = json_of("getstripe /ec/f");
  const Json& slot = f.at("slots")[0];
  const uint32_t chain = slot.at("chain").at("id").get<uint32_t>();
  const uint64_t chain_version = slot.at("chain").at("version").get<uint64_t>();
  const uint32_t data0 = slot.at("positions")[0].at("target").get<uint32_t>();
  const uint32_t parity = slot.at("positions")[2].at("target").get<uint32_t>();
  std::map<uint32_t, std::string> address;
  const Json targets = json_of("targets");
  for (const Json& t : targets.at("targets")) {
    address[t.at("id").get<uint32_t>()] = t.at("address").get<std::string>();
  }
  auto key = net::load_cluster_key(cluster_->key_file());
  ASSERT_TRUE(key.ok()) << key.status().ToString();
  net::ChannelOptions o;
  o.cluster_key = *key;
  namespace ods = proto::ods;
  auto ref = [&](uint32_t target, uint32_t position) {
    ods::ChunkRef r;
    r.set_target_id(target);
    r.set_chain_id(chain);
    r.set_chain_version(chain_version);
    r.set_ino(st->ino);
    r.set_slot(0);
    r.set_position(position);
    return r;
  };
  ASSERT_EQ(address.count(data0), 1u) << data0 << " " << f;
  auto ch0 = net::RpcChannel::Connect(address[data0], o);
  ASSERT_TRUE(ch0.ok()) << ch0.status().ToString();
  ods::StatRequest sq;
  *sq.mutable_ref() = ref(data0, 0);
  ods::StatReply sa;
  ASSERT_TRUE((*ch0)->call<ods::OdsStat>(sq, &sa).ok());

  // The lie: a delta of position 0 at its next version, bytes it never wrote.
  std::string bogus = random_bytes(4096, 10);
  ods::ChainForwardRequest fq;
  *fq.mutable_ref() = ref(parity, 2);
  fq.set_update_version(sa.chunk_version() + 1);
  fq.set_kind(ods::UPDATE_EC_DELTA);
  fq.set_source_position(0);
  fq.set_offset(8192);
  fq.set_length(bogus.size());
  fq.set_crc32c(crc32c(bogus.data(), bogus.size()));
  fq.set_hop(1);
  net::BulkRegion region{bogus.data(), bogus.size(), net::BulkAccess::kServerPull};
  ods::ChainForwardReply fa;
  auto chp = net::RpcChannel::Connect(address[parity], o);
  ASSERT_TRUE(chp.ok()) << chp.status().ToString();
  Status sent = (*chp)->call<ods::OdsChainForward>(fq, &fa, {&region, 1});
  ASSERT_TRUE(sent.ok()) << sent.ToString();
  // scrub sees the versions disagree ...
  ASSERT_EQ(surgectl("scrub", &out), 3) << out;
  EXPECT_TRUE(has(out, "applied version " + std::to_string(sa.chunk_version() + 1) +
                           " of data position 0, which holds version " +
                           std::to_string(sa.chunk_version())))
      << out;
  // ... and once position 0 is written at that version, the bytes: the
  // parity took the real write's delta for a resend of the lie and kept
  // neither right, so the first byte that differs is the write's.
  {
    auto f2 = (*cl)->open("/ec/f", O_RDWR);
    ASSERT_TRUE(f2.ok()) << f2.status().ToString();
    ASSERT_TRUE((*cl)->pwrite(**f2, "x", 1, 100).ok());
    ASSERT_TRUE((*cl)->close(*f2).ok());
  }
  ASSERT_EQ(surgectl("scrub", &out), 3) << out;
  EXPECT_TRUE(has(out, "inconsistent: ino " + std::to_string(st->ino) +
                           " slot 0 parity 0 window at chunk offset 0: differs from the code of "
                           "the data at byte 100"))
      << out;
  Json doc = json_of_rc("scrub", 3);
  EXPECT_EQ(doc.at("parity_inconsistent").get<uint64_t>(), 1u) << doc;
  EXPECT_EQ(doc.at("ec_chains")[0].at("inconsistent")[0].at("what").get<std::string>(), "bytes")
      << doc;
}

}  // namespace
}  // namespace surge::test
