// A C++ program as a libsurge user writes one: only <surge/client.h> (and
// the surge::Status it returns) from the installed libsurge-dev. Writes
// 5 MiB + 3 bytes to PATH, reads them back through a new open, compares.
//   roundtrip-cxx MDS_ADDRESS KEY_FILE PATH
#include <fcntl.h>

#include <cstdio>
#include <string>
#include <surge/client.h>
#include <vector>

namespace {

int fail(const surge::Status& st, const char* what) {
  std::fprintf(stderr, "roundtrip-cxx: %s: %s\n", what, st.ToString().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: roundtrip-cxx MDS_ADDRESS KEY_FILE PATH\n");
    return 2;
  }
  const std::string path = argv[3];
  std::vector<char> out((5u << 20) + 3), in(out.size());
  for (size_t i = 0; i < out.size(); i++) out[i] = static_cast<char>(i * 13 + i / 65536);

  surge::ClientOptions opts;
  opts.mds_address = argv[1];
  opts.cluster_key_file = argv[2];
  auto client = surge::Client::Connect(opts);
  if (!client.ok()) return fail(client.status(), "connect");
  surge::Client& fs = **client;

  auto w = fs.open(path, O_CREAT | O_RDWR | O_TRUNC, 0644);
  if (!w.ok()) return fail(w.status(), ("create " + path).c_str());
  auto wn = fs.pwrite(**w, out.data(), out.size(), 0);
  if (!wn.ok()) return fail(wn.status(), ("write " + path).c_str());
  if (surge::Status st = fs.close(*w); !st.ok()) return fail(st, ("close " + path).c_str());

  auto r = fs.open(path, O_RDONLY);
  if (!r.ok()) return fail(r.status(), ("open " + path).c_str());
  auto rn = fs.pread(**r, in.data(), in.size(), 0);
  if (!rn.ok()) return fail(rn.status(), ("read " + path).c_str());
  if (surge::Status st = fs.close(*r); !st.ok()) return fail(st, ("close " + path).c_str());
  if (*rn != out.size() || in != out) {
    std::fprintf(stderr, "roundtrip-cxx: %s read back %zu bytes, not the %zu written\n", path.c_str(), *rn,
                 out.size());
    return 1;
  }
  std::printf("roundtrip-cxx: %s: %zu bytes written and read back\n", path.c_str(), out.size());
  return 0;
}
