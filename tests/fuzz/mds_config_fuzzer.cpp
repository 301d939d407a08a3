// Fuzzes the surge-mds TOML config loader (mds/daemon/mds_config.*): the
// file an admin (or a broken deploy) hands the daemon. load_config_file
// and validate_config must answer every file with OK or an error naming
// it, never crash, throw or hang; toml++ parses it first.
#include <cstdio>
#include <fstream>
#include <string>

#include "mds/daemon/mds_config.h"
#include "tests/fuzz/fuzz_support.h"

using namespace surge;

namespace {
std::string path;

void write_seeds(const std::string& dir) {
  // The shipped file lists every key at its default: the best seed.
  std::ifstream f(std::string(SURGE_SOURCE_DIR) + "/mds/surge-mds.toml");
  std::string all((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (all.empty()) {
    std::fprintf(stderr, "mds_config_fuzzer: cannot read mds/surge-mds.toml\n");
    std::exit(1);
  }
  fuzz::write_seed(dir, "surge-mds.toml", all);
}
}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz::maybe_write_seeds(write_seeds);
  path = fuzz::make_temp_dir("surge-fuzz-mds-config") + "/surge-mds.toml";
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  mds::MdsConfig cfg;
  if (load_config_file(path, cfg).ok()) (void)validate_config(cfg);
  return 0;
}
