// surge-bench's metadata mode (--mode md): an mdtest-like run.
//
// N processes (fork, each with its own mount descriptors or its own libsurge
// session) create, stat, read and remove files-per-process files each, in a
// directory of their own or all in one shared directory. As mdtest -N 1 does,
// the stat and read phases of process i touch the files process i+1 created
// (its own when alone), so no answer comes from a cache of one's own creates.
// Every phase starts in all processes at once (a barrier) and is timed from
// that start until the last process finishes it; ops/s = files touched /
// that time. The tree lives under PATH/mdtest.<pid> and is removed at the end
// unless --keep or a phase list without remove leaves it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace surge::bench {

struct MetadataConfig {
  std::string api = "posix";  // posix: PATH is a directory in the mount
  std::string path = ".";     // native: PATH is a directory in the file system
  std::string mds;
  std::string key_file;
  int processes = 1;
  uint64_t files = 1000;       // per process
  bool shared_dir = false;     // one directory for everyone
  uint64_t write_bytes = 0;    // written into each file by create
  uint64_t read_bytes = 0;     // read back from each file by read
  std::vector<std::string> phases = {"create", "stat", "read", "remove"};
  bool keep = false;
  bool json = false;
  bool progress = true;
};

// Runs the phases, prints the result; returns the exit status (0: no error).
int run_metadata_bench(const MetadataConfig& c);

}  // namespace surge::bench
