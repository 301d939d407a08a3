#include "net/cluster_key.h"

#include <fcntl.h>
#include <openssl/rand.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <cctype>
#include <fstream>
#include <sstream>

namespace surge::net {

Result<std::string> load_cluster_key(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status::FromErrno(errno, "open cluster key file '" + path + "'");
  std::stringstream ss;
  ss << in.rdbuf();
  std::string key = ss.str();
  auto not_space = [](unsigned char c) { return !std::isspace(c); };
  key.erase(key.begin(), std::find_if(key.begin(), key.end(), not_space));
  key.erase(std::find_if(key.rbegin(), key.rend(), not_space).base(), key.end());
  if (key.empty()) return Status::InvalidArgument("cluster key file '" + path + "' is empty");
  return key;
}

Status generate_cluster_key(const std::string& path) {
  unsigned char raw[32];
  if (RAND_bytes(raw, sizeof raw) != 1) return Status::Internal("RAND_bytes failed");
  static const char* hex = "0123456789abcdef";
  std::string text;
  for (unsigned char b : raw) {
    text += hex[b >> 4];
    text += hex[b & 15];
  }
  text += '\n';
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return Status::FromErrno(errno, "create cluster key file '" + path + "'");
  ssize_t n = ::write(fd, text.data(), text.size());
  int err = errno;
  ::close(fd);
  if (n != static_cast<ssize_t>(text.size())) {
    return Status::FromErrno(err, "write cluster key file '" + path + "'");
  }
  return Status::OK();
}

}  // namespace surge::net
