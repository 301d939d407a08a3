// Fuzzes the surge-ods TOML config loader (ods/daemon/ods_config.*): the
// file an admin (or a broken deploy) hands the daemon. load_config_file
// and validate_config must answer every file with OK or an error naming
// it, never crash, throw or hang; toml++ parses it first.
#include <cstdio>
#include <fstream>
#include <string>

#include "ods/daemon/ods_config.h"
#include "tests/fuzz/fuzz_support.h"

using namespace surge;

namespace {
std::string path;

void write_seeds(const std::string& dir) {
  // The shipped file lists every key at its default: the best seed.
  std::ifstream f(std::string(SURGE_SOURCE_DIR) + "/ods/surge-ods.toml");
  std::string all((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (all.empty()) {
    std::fprintf(stderr, "ods_config_fuzzer: cannot read ods/surge-ods.toml\n");
    std::exit(1);
  }
  fuzz::write_seed(dir, "surge-ods.toml", all);
}
}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz::maybe_write_seeds(write_seeds);
  path = fuzz::make_temp_dir("surge-fuzz-ods-config") + "/surge-ods.toml";
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  ods::OdsConfig cfg;
  if (load_config_file(path, cfg).ok()) (void)validate_config(cfg);
  return 0;
}
