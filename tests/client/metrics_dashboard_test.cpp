// The Grafana dashboard (docs/grafana/surge.json) against a running
// cluster: a local cluster (surge-mds, 3 surge-ods, each with
// --metrics-listen) and a FUSE mount with metrics_listen, some IO through
// the mount, then every metric name the dashboard's PromQL expressions use
// must have a sample on the MDS's, a data server's or the mount's /metrics
// page. A dashboard naming a metric nobody exports (a typo, a rename) fails
// here, naming it. The mount's own page is checked too: its FUSE
// operations, their latency and errors move with real requests.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "tests/client/local_cluster.h"

namespace surge::test {
namespace {

// GET /metrics on 127.0.0.1:port: the whole response, "" when nobody
// answers.
std::string scrape(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
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

bool ident_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_' || c == ':'; }
bool ident_char(char c) { return ident_start(c) || std::isdigit(static_cast<unsigned char>(c)); }

// Skips from an opening bracket at i to just past its match (strings
// inside skipped whole).
size_t skip_group(const std::string& e, size_t i, char open, char close) {
  int depth = 0;
  for (; i < e.size(); ++i) {
    char c = e[i];
    if (c == '"' || c == '\'' || c == '`') {
      for (++i; i < e.size() && e[i] != c; ++i) {
        if (e[i] == '\\') ++i;
      }
    } else if (c == open) {
      ++depth;
    } else if (c == close && --depth == 0) {
      return i + 1;
    }
  }
  return i;
}

// The metric names a PromQL expression selects: identifiers outside label
// matchers ({...}), ranges ([...]) and strings that are not functions
// (followed by "("), aggregations (sum, max, ...), their modifiers with
// their label lists
// (by (...), without (...), on, ignoring, group_left, group_right) or
// operators.
std::set<std::string> metric_names(const std::string& e) {
  static const std::set<std::string> kGrouping = {"by", "without", "on", "ignoring",
                                                  "group_left", "group_right"};
  static const std::set<std::string> kWords = {"and", "or", "unless", "bool", "offset", "inf", "nan"};
  // Aggregations may put their modifier first: "sum by (x) (...)".
  static const std::set<std::string> kAggregations = {
      "sum",    "min",     "max",      "avg",          "group", "stddev", "stdvar",
      "count",  "topk",    "bottomk",  "count_values", "quantile", "limitk", "limit_ratio"};
  std::set<std::string> out;
  size_t i = 0;
  while (i < e.size()) {
    char c = e[i];
    if (c == '{') {
      i = skip_group(e, i, '{', '}');
    } else if (c == '[') {
      i = skip_group(e, i, '[', ']');
    } else if (c == '"' || c == '\'' || c == '`') {
      i = skip_group(e, i, c, c);  // open == close: depth 1 then 0 at the end quote
    } else if (std::isdigit(static_cast<unsigned char>(c))) {
      while (i < e.size() && (ident_char(e[i]) || e[i] == '.')) ++i;  // 0.99, 1e3
    } else if (ident_start(c)) {
      size_t j = i;
      while (j < e.size() && ident_char(e[j])) ++j;
      std::string word = e.substr(i, j - i);
      size_t k = j;
      while (k < e.size() && std::isspace(static_cast<unsigned char>(e[k]))) ++k;
      if (kGrouping.count(word)) {
        i = k < e.size() && e[k] == '(' ? skip_group(e, k, '(', ')') : k;
      } else {
        const bool call = k < e.size() && e[k] == '(';
        if (!kWords.count(word) && !kAggregations.count(word) && !call) out.insert(word);
        i = j;
      }
    } else {
      ++i;
    }
  }
  return out;
}

// Every "expr" in the dashboard (panels, rows, templating: anywhere).
void collect_exprs(const nlohmann::json& j, std::vector<std::string>& out) {
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it) {
      if (it.key() == "expr" && it.value().is_string()) {
        out.push_back(it.value().get<std::string>());
      } else {
        collect_exprs(it.value(), out);
      }
    }
  } else if (j.is_array()) {
    for (const auto& v : j) collect_exprs(v, out);
  }
}

// Whether the page has a sample of `name` (a line "name{...} v" or
// "name v"; HELP and TYPE lines alone do not count: Prometheus would have
// no series).
bool has_sample(const std::string& page, const std::string& name) {
  for (const char* after : {"{", " "}) {
    if (page.find("\n" + name + after) != std::string::npos) return true;
  }
  return false;
}

// The dashboard's metric names that no page has a sample of.
std::set<std::string> missing_metrics(const nlohmann::json& dashboard,
                                      const std::vector<std::string>& pages,
                                      std::set<std::string>* all = nullptr) {
  std::vector<std::string> exprs;
  collect_exprs(dashboard, exprs);
  std::set<std::string> names, missing;
  for (const auto& e : exprs) {
    for (const auto& n : metric_names(e)) names.insert(n);
  }
  for (const auto& n : names) {
    bool found = false;
    for (const auto& p : pages) found = found || has_sample(p, n);
    if (!found) missing.insert(n);
  }
  if (all != nullptr) *all = names;
  return missing;
}

// A sample's value; -1 when absent.
double value_of(const std::string& page, const std::string& series) {
  auto at = page.find("\n" + series + " ");
  if (at == std::string::npos) return -1;
  return std::strtod(page.c_str() + at + 1 + series.size() + 1, nullptr);
}

std::string join(const std::set<std::string>& s) {
  std::string out;
  for (const auto& x : s) out += (out.empty() ? "" : ", ") + x;
  return out;
}

TEST(MetricNames, ComeFromSelectorsNotFromFunctionsLabelsOrRanges) {
  EXPECT_EQ(metric_names("histogram_quantile(0.99, sum by (instance, le) "
                         "(rate(surge_a_seconds_bucket{method=\"write\", x=~\"a|b\"}[$__rate_interval])))"),
            (std::set<std::string>{"surge_a_seconds_bucket"}));
  EXPECT_EQ(metric_names("surge_free / surge_capacity > bool 0.5 and on (instance) up"),
            (std::set<std::string>{"surge_free", "surge_capacity", "up"}));
  EXPECT_EQ(metric_names("sum without (le) (increase(b_total[5m] offset 1h)) * 1e3"),
            (std::set<std::string>{"b_total"}));
}

TEST(MissingMetrics, NamesWhatNoPageHas) {
  nlohmann::json d = {{"panels", {{{"targets", {{{"expr", "rate(x_total[1m]) + y"}}}}}}}};
  EXPECT_EQ(missing_metrics(d, {"# TYPE x_total counter\nx_total 3\n", "# TYPE y gauge\n"}),
            (std::set<std::string>{"y"}));
}

class MetricsDashboard : public ::testing::Test {
 protected:
  // One cluster and mount for the suite, started by the first test; a
  // failure to start fails every test (not a skip), with the reason.
  void SetUp() override {
    static const std::string error = start();
    ASSERT_TRUE(error.empty()) << error;
  }
  static void TearDownTestSuite() {
    delete cluster_;
    cluster_ = nullptr;
  }

  static std::string start() {
    ClusterConfig cfg = small_stripes();
    cfg.metrics = true;
    auto c = LocalCluster::Start(cfg);
    if (!c.ok()) return "cluster: " + c.status().ToString();
    cluster_ = c->release();
    fuse_port_ = free_port();
    auto m = cluster_->mount("m", "metrics_listen=127.0.0.1:" + std::to_string(fuse_port_));
    if (!m.ok()) return "mount: " + m.status().ToString();
    mount_ = *m;
    // Traffic of every kind the dashboard shows: writes and reads (through
    // the data servers), namespace operations, and errors.
    const std::string data = random_bytes(3 << 20, 7);
    if (Status st = write_file(mount_ + "/f", data); !st.ok()) return "write: " + st.ToString();
    auto back = read_file(mount_ + "/f");
    if (!back.ok()) return "read: " + back.status().ToString();
    if (*back != data) return "read back other bytes than written";
    if (::mkdir((mount_ + "/d").c_str(), 0755) != 0) return "mkdir: " + std::string(strerror(errno));
    if (Status st = write_file(mount_ + "/d/x", "x"); !st.ok()) return "write: " + st.ToString();
    // Not empty: the MDS refuses, the FUSE rmdir answers ENOTEMPTY.
    if (::rmdir((mount_ + "/d").c_str()) == 0 || errno != ENOTEMPTY) {
      return "rmdir of a directory that is not empty did not fail with ENOTEMPTY";
    }
    return "";
  }

  static std::string page_of(int port, const std::string& what) {
    std::string p = scrape(port);
    EXPECT_NE(p.find("HTTP/1.1 200"), std::string::npos)
        << what << " (127.0.0.1:" << port << ") served no metrics page: " << p;
    return p;
  }

  static LocalCluster* cluster_;
  static int fuse_port_;
  static std::string mount_;
};

LocalCluster* MetricsDashboard::cluster_ = nullptr;
int MetricsDashboard::fuse_port_ = 0;
std::string MetricsDashboard::mount_;

TEST_F(MetricsDashboard, EveryMetricItQueriesIsExportedByARunningCluster) {
  const char* src = std::getenv("SURGE_SOURCE_DIR");
  ASSERT_NE(src, nullptr) << "SURGE_SOURCE_DIR is not set (ctest sets it)";
  const std::string path = std::string(src) + "/docs/grafana/surge.json";
  std::ifstream in(path);
  ASSERT_TRUE(in.good()) << "cannot read " << path;
  nlohmann::json dashboard;
  ASSERT_NO_THROW(dashboard = nlohmann::json::parse(in)) << path << " is not JSON";

  std::vector<std::string> pages = {page_of(cluster_->mds_metrics_port(), "surge-mds")};
  for (int i = 0; i < 3; ++i) {
    pages.push_back(page_of(cluster_->ods_metrics_port(i), "surge-ods " + std::to_string(i)));
  }
  pages.push_back(page_of(fuse_port_, "surge-fuse"));

  std::set<std::string> all;
  const std::set<std::string> missing = missing_metrics(dashboard, pages, &all);
  // The dashboard covers every part: a parse that found (almost) nothing
  // would pass vacuously.
  EXPECT_GE(all.size(), 30u) << "metrics found in " << path << ": " << join(all);
  for (const char* part : {"surge_mds_", "surge_ods_", "surge_fuse_", "surge_net_"}) {
    bool any = false;
    for (const auto& n : all) any = any || n.rfind(part, 0) == 0;
    EXPECT_TRUE(any) << path << " queries no " << part << "* metric";
  }
  EXPECT_TRUE(missing.empty()) << path << " queries metrics that no process exports: "
                               << join(missing);
}

TEST_F(MetricsDashboard, TheMountCountsAndTimesItsFuseOperations) {
  const std::string page = page_of(fuse_port_, "surge-fuse");
  EXPECT_GE(value_of(page, "surge_fuse_requests_total{op=\"write\"}"), 1) << page;
  EXPECT_GE(value_of(page, "surge_fuse_requests_total{op=\"read\"}"), 1) << page;
  EXPECT_GE(value_of(page, "surge_fuse_request_duration_seconds_count{op=\"write\"}"), 1) << page;
  EXPECT_GT(value_of(page, "surge_fuse_request_duration_seconds_sum{op=\"write\"}"), 0) << page;
  EXPECT_GE(value_of(page, "surge_fuse_requests_total{op=\"mkdir\"}"), 1) << page;
  EXPECT_EQ(value_of(page, "surge_fuse_request_errors_total{op=\"mkdir\"}"), 0) << page;
  EXPECT_GE(value_of(page, "surge_fuse_request_errors_total{op=\"rmdir\"}"), 1) << page;
  EXPECT_EQ(value_of(page, "surge_fuse_request_errors_total{op=\"write\"}"), 0) << page;
  // The mount's client side of the transport: its calls to the MDS and
  // the data servers. The 3 MiB file's bytes reached the data servers'
  // server side (over TCP sent by the mount; over RDMA pulled by the
  // servers' READs, so counted there only).
  const std::string t = cluster_->mds_address().rfind("rdma", 0) == 0 ? "rdma" : "tcp";
  EXPECT_GE(value_of(page, "surge_net_calls_total{transport=\"" + t + "\",side=\"client\"}"), 3)
      << page;
  double received = 0;
  for (int i = 0; i < 3; ++i) {
    received += value_of(page_of(cluster_->ods_metrics_port(i), "surge-ods"),
                         "surge_net_received_bytes_total{transport=\"" + t + "\",side=\"server\"}");
  }
  EXPECT_GE(received, 3 << 20);
}

}  // namespace
}  // namespace surge::test
