// The Prometheus page of a LocalCluster daemon (ClusterConfig::metrics), read
// by tests that check which transport carried the traffic: in the
// Soft-RoCE VM (tests/client/rdma_guest.sh) the data servers' own calls
// (chain forwarding, resync, rebuild) must go over RDMA, not fall back to
// TCP.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "tests/client/local_cluster.h"

namespace surge::test {

// GET /metrics on 127.0.0.1:port: the whole response, "" when nobody
// answers.
inline std::string scrape_metrics(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return "";
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return "";
  }
  const std::string req = "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n";
  std::string out;
  if (::write(fd, req.data(), req.size()) == static_cast<ssize_t>(req.size())) {
    char buf[8192];
    ssize_t n;
    while ((n = ::read(fd, buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

// The value of one series (name and labels exactly as printed) on a page;
// 0 when the page does not have it (a counter never touched is not shown).
inline double series_value(const std::string& page, const std::string& series) {
  const auto at = page.find("\n" + series + " ");
  if (at == std::string::npos) return 0;
  return std::strtod(page.c_str() + at + 1 + series.size() + 1, nullptr);
}

// surge_mds_requests_total{method="<method>"} on the cluster's MDS page
// (ClusterConfig::metrics), now: 0 before the first such request, -1 when
// the MDS serves no page (so a test's count is wrong and it fails).
inline long mds_requests(const LocalCluster& c, const std::string& method) {
  const std::string page = scrape_metrics(c.mds_metrics_port());
  if (page.find("HTTP/1.1 200") == std::string::npos) return -1;
  return static_cast<long>(
      series_value(page, "surge_mds_requests_total{method=\"" + method + "\"}"));
}

// "tcp" or "rdma": what the cluster's daemons listen on.
inline std::string cluster_transport(const LocalCluster& c) {
  return c.mds_address().rfind("rdma://", 0) == 0 ? "rdma" : "tcp";
}

// The page of data server i; "" (and the caller's check fails) when it
// serves none.
inline std::string ods_metrics_page(const LocalCluster& c, int i) {
  const std::string p = scrape_metrics(c.ods_metrics_port(i));
  return p.find("HTTP/1.1 200") == std::string::npos ? "" : p;
}

}  // namespace surge::test
