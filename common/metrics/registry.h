// Registry: the one place a process's metrics live, and their Prometheus
// text exposition (format 0.0.4: HELP and TYPE lines, then one sample per
// label set; histograms as _bucket{le=...}, _sum and _count).
//
// A component declares its metrics next to what they count, once, at
// construction or as a function-local static, and keeps the references:
//
//   auto& bytes = metrics::Registry::global().counter(
//       "surge_ods_write_bytes_total", "Bytes stored by Write requests.");
//   auto& ops = registry.histogram_family("surge_mds_request_duration_seconds",
//       "Time in the handler.", {"method"}, metrics::Buckets::latency());
//   Histogram& create = ops.with({"create"});   // look up once, observe often
//
// Declaring a name twice returns the same family when its type and labels
// match (the first declaration's buckets stay) (two instances of a service in one test process share it);
// a mismatch is a programmer error (std::logic_error). Label lookups
// (with()) take the family's mutex: resolve them off the hot path.
//
// Values known only at scrape time (sessions open, free bytes) are Probes:
// a function the registry calls while rendering, unregistered when the
// Probe handle is destroyed, so a probe never outlives what it reads.
// Probes of the same name and labels add up (two services, one sum).
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/metrics/metric.h"

namespace surge::metrics {

enum class Type { kCounter, kGauge, kHistogram };

class Registry;
class ProbeFamily;

// The part of a family every kind shares: its name, help, labels and the
// rendering of its samples.
class FamilyBase {
 public:
  FamilyBase(std::string name, std::string help, Type type, std::vector<std::string> label_names);
  virtual ~FamilyBase() = default;
  FamilyBase(const FamilyBase&) = delete;
  FamilyBase& operator=(const FamilyBase&) = delete;

  const std::string& name() const { return name_; }
  Type type() const { return type_; }
  const std::vector<std::string>& label_names() const { return label_names_; }
  // Appends the samples (not the HELP/TYPE lines) to out.
  virtual void render_samples(std::string& out) const = 0;
  const std::string& help() const { return help_; }

 protected:
  void check_arity(const std::vector<std::string>& values) const;
  // `a="x",b="y"` for these label values (escaped), empty without labels.
  std::string label_text(const std::vector<std::string>& values) const;

  mutable std::mutex mu_;

 private:
  std::string name_, help_;
  Type type_;
  std::vector<std::string> label_names_;
};

// Metrics of one name, one per label-value tuple, made on first use.
template <class M>
class Family final : public FamilyBase {
 public:
  Family(std::string name, std::string help, Type type, std::vector<std::string> label_names,
         std::function<std::unique_ptr<M>()> make)
      : FamilyBase(std::move(name), std::move(help), type, std::move(label_names)),
        make_(std::move(make)) {}

  // The metric for these label values (one per label name, in order).
  M& with(const std::vector<std::string>& values) {
    check_arity(values);
    std::lock_guard lk(mu_);
    auto& slot = children_[values];
    if (!slot) slot = make_();
    return *slot;
  }
  M& with(std::initializer_list<std::string> values) {
    return with(std::vector<std::string>(values));
  }

  void render_samples(std::string& out) const override;

 private:
  std::function<std::unique_ptr<M>()> make_;
  std::map<std::vector<std::string>, std::unique_ptr<M>> children_;
};

template <>
void Family<Counter>::render_samples(std::string& out) const;
template <>
void Family<Gauge>::render_samples(std::string& out) const;
template <>
void Family<Histogram>::render_samples(std::string& out) const;

using CounterFamily = Family<Counter>;
using GaugeFamily = Family<Gauge>;
using HistogramFamily = Family<Histogram>;

// Keeps a scrape-time function registered; destroying it (or reset())
// removes the function, after which the registry never calls it again.
class Probe {
 public:
  Probe() = default;
  ~Probe() { reset(); }
  Probe(Probe&& o) noexcept : owner_(o.owner_), family_(o.family_), id_(o.id_) { o.owner_ = nullptr; }
  Probe& operator=(Probe&& o) noexcept;
  Probe(const Probe&) = delete;
  Probe& operator=(const Probe&) = delete;
  void reset();

 private:
  friend class Registry;
  Probe(Registry* owner, ProbeFamily* family, uint64_t id) : owner_(owner), family_(family), id_(id) {}
  Registry* owner_ = nullptr;
  ProbeFamily* family_ = nullptr;
  uint64_t id_ = 0;
};

class Registry {
 public:
  Registry() = default;
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;
  ~Registry();

  // The process's registry: what a daemon's /metrics page shows.
  static Registry& global();

  CounterFamily& counter_family(const std::string& name, const std::string& help,
                                std::vector<std::string> label_names);
  GaugeFamily& gauge_family(const std::string& name, const std::string& help,
                            std::vector<std::string> label_names);
  HistogramFamily& histogram_family(const std::string& name, const std::string& help,
                                    std::vector<std::string> label_names, Buckets buckets);
  // Without labels: the family's single metric.
  Counter& counter(const std::string& name, const std::string& help) {
    return counter_family(name, help, {}).with(std::vector<std::string>{});
  }
  Gauge& gauge(const std::string& name, const std::string& help) {
    return gauge_family(name, help, {}).with(std::vector<std::string>{});
  }
  Histogram& histogram(const std::string& name, const std::string& help, Buckets buckets) {
    return histogram_family(name, help, {}, std::move(buckets)).with(std::vector<std::string>{});
  }

  // A value read at scrape time, shown as `type` (kCounter or kGauge) under
  // name{labels}. `labels` pairs each label name with its value.
  [[nodiscard]] Probe probe(const std::string& name, const std::string& help, Type type,
                            std::vector<std::pair<std::string, std::string>> labels,
                            std::function<double()> read);

  // The exposition of every family, in the order they were declared.
  std::string render() const;

 private:
  friend class Probe;
  FamilyBase* find(const std::string& name, Type type, const std::vector<std::string>& labels);

  mutable std::mutex mu_;  // the family list; held while rendering (probes run under it)
  std::vector<std::unique_ptr<FamilyBase>> families_;
};

// The exposition's text of a sample value and of a label value.
std::string format_value(double v);
std::string escape_label_value(const std::string& v);

}  // namespace surge::metrics
