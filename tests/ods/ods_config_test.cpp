// OdsConfig: the shipped ods/surge-ods.toml parses and states exactly the
// built-in defaults; bad files are refused with the path and key named.
#include "ods/daemon/ods_config.h"

#include <gtest/gtest.h>

#include <fstream>

#include "tests/ods/test_dir.h"

namespace surge::ods {
namespace {

std::string source_dir() {
  const char* d = std::getenv("SURGE_SOURCE_DIR");
  if (d == nullptr) throw std::runtime_error("SURGE_SOURCE_DIR is not set (run through ctest)");
  return d;
}

TEST(OdsConfig, ShippedFileStatesTheDefaults) {
  OdsConfig from_file;
  from_file.data_dir = from_file.listen = from_file.mds = from_file.log_level = "changed";
  from_file.io_threads = from_file.worker_threads = 99;
  from_file.forward_lanes = from_file.forward_threads = 99;
  from_file.pool_1m_buffers = from_file.pool_64k_buffers = from_file.pool_4k_buffers = 99;
  from_file.max_object_size = from_file.max_io_bytes = from_file.reserved_free_bytes = 99;
  from_file.max_open_objects = 99;
  from_file.o_direct = from_file.huge_pages = !OdsConfig{}.huge_pages;
  from_file.lock_memory = !OdsConfig{}.lock_memory;
  from_file.heartbeat_interval_ms = from_file.mds_retry_ms = from_file.credits_per_connection = 99;
  from_file.advertise = from_file.log_file = from_file.cluster_key_file = from_file.metrics_listen = "changed";
  Status st = load_config_file(source_dir() + "/ods/surge-ods.toml", from_file);
  ASSERT_TRUE(st.ok()) << st.ToString();
  OdsConfig d;
  EXPECT_EQ(from_file.data_dir, d.data_dir);
  EXPECT_EQ(from_file.listen, d.listen);
  EXPECT_EQ(from_file.advertise, d.advertise);
  EXPECT_EQ(from_file.cluster_key_file, d.cluster_key_file);
  EXPECT_EQ(from_file.metrics_listen, d.metrics_listen);
  EXPECT_EQ(from_file.io_threads, d.io_threads);
  EXPECT_EQ(from_file.worker_threads, d.worker_threads);
  EXPECT_EQ(from_file.forward_lanes, d.forward_lanes);
  EXPECT_EQ(from_file.forward_threads, d.forward_threads);
  EXPECT_EQ(from_file.credits_per_connection, d.credits_per_connection);
  EXPECT_EQ(from_file.mds, d.mds);
  EXPECT_EQ(from_file.heartbeat_interval_ms, d.heartbeat_interval_ms);
  EXPECT_EQ(from_file.mds_retry_ms, d.mds_retry_ms);
  EXPECT_EQ(from_file.pool_1m_buffers, d.pool_1m_buffers);
  EXPECT_EQ(from_file.pool_64k_buffers, d.pool_64k_buffers);
  EXPECT_EQ(from_file.pool_4k_buffers, d.pool_4k_buffers);
  EXPECT_EQ(from_file.huge_pages, d.huge_pages);
  EXPECT_EQ(from_file.lock_memory, d.lock_memory);
  EXPECT_EQ(from_file.max_object_size, d.max_object_size);
  EXPECT_EQ(from_file.max_io_bytes, d.max_io_bytes);
  EXPECT_EQ(from_file.max_open_objects, d.max_open_objects);
  EXPECT_EQ(from_file.o_direct, d.o_direct);
  EXPECT_EQ(from_file.reserved_free_bytes, d.reserved_free_bytes);
  EXPECT_EQ(from_file.log_level, d.log_level);
  EXPECT_EQ(from_file.log_file, d.log_file);
  EXPECT_TRUE(validate_config(d).ok());
}

TEST(OdsConfig, UnknownKeysAndWrongTypesAreRefused) {
  testing::TempDir dir;
  std::string path = dir.path() + "/c.toml";
  std::ofstream(path) << "[server]\ndata_dri = \"/x\"\n";
  OdsConfig c;
  Status st = load_config_file(path, c);
  EXPECT_EQ(st.code(), Code::kInvalidArgument);
  EXPECT_NE(st.message().find("server.data_dri"), std::string::npos) << st.message();
  std::ofstream(path) << "[pool]\nbuffers_1m = \"many\"\n";
  EXPECT_EQ(load_config_file(path, c).code(), Code::kInvalidArgument);
  std::ofstream(path) << "[pool\n";
  EXPECT_EQ(load_config_file(path, c).code(), Code::kInvalidArgument);
}

// The forward lanes' bounds come from the table (ods_config_table()).
TEST(OdsConfig, ForwardLanesOutOfRangeAreRefusedByName) {
  OdsConfig c;
  c.forward_lanes = 17;
  Status st = validate_config(c);
  EXPECT_EQ(st.code(), Code::kInvalidArgument);
  EXPECT_NE(st.message().find("server.forward_lanes"), std::string::npos) << st.message();
  c = OdsConfig{};
  c.forward_threads = 0;
  st = validate_config(c);
  EXPECT_EQ(st.code(), Code::kInvalidArgument);
  EXPECT_NE(st.message().find("server.forward_threads"), std::string::npos) << st.message();
}

TEST(OdsConfig, ValidationRefusesRequestsBiggerThanThePool) {
  OdsConfig c;
  c.pool_1m_buffers = 4;
  c.max_io_bytes = 8 << 20;
  EXPECT_EQ(validate_config(c).code(), Code::kInvalidArgument);
}

}  // namespace
}  // namespace surge::ods
