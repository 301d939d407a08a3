// Registry and the text exposition: see registry.h.
#include "common/metrics/registry.h"

#include <cmath>
#include <cstdio>
#include <stdexcept>

namespace surge::metrics {

namespace {

const char* type_name(Type t) {
  switch (t) {
    case Type::kCounter: return "counter";
    case Type::kGauge: return "gauge";
    case Type::kHistogram: return "histogram";
  }
  return "untyped";
}

// HELP text escapes backslash and newline (the exposition format's rule).
std::string escape_help(const std::string& h) {
  std::string out;
  for (char c : h) {
    if (c == '\\') out += "\\\\";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

std::string braces(const std::string& labels) { return labels.empty() ? "" : "{" + labels + "}"; }

std::string join(const std::string& a, const std::string& b) {
  if (a.empty()) return b;
  if (b.empty()) return a;
  return a + "," + b;
}

}  // namespace

std::string format_value(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[40];
  if (v == std::floor(v) && std::fabs(v) < 9.007199254740992e15) {
    std::snprintf(buf, sizeof buf, "%.0f", v);
  } else {
    std::snprintf(buf, sizeof buf, "%.12g", v);
  }
  return buf;
}

std::string escape_label_value(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

FamilyBase::FamilyBase(std::string name, std::string help, Type type,
                       std::vector<std::string> label_names)
    : name_(std::move(name)), help_(std::move(help)), type_(type),
      label_names_(std::move(label_names)) {}

void FamilyBase::check_arity(const std::vector<std::string>& values) const {
  if (values.size() != label_names_.size()) {
    throw std::logic_error("metric " + name_ + ": " + std::to_string(values.size()) +
                           " label values for " + std::to_string(label_names_.size()) + " labels");
  }
}

std::string FamilyBase::label_text(const std::vector<std::string>& values) const {
  std::string out;
  for (size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out += ",";
    out += label_names_[i] + "=\"" + escape_label_value(values[i]) + "\"";
  }
  return out;
}

template <>
void Family<Counter>::render_samples(std::string& out) const {
  std::lock_guard lk(mu_);
  for (const auto& [values, c] : children_) {
    out += name() + braces(label_text(values)) + " " + std::to_string(c->value()) + "\n";
  }
}

template <>
void Family<Gauge>::render_samples(std::string& out) const {
  std::lock_guard lk(mu_);
  for (const auto& [values, g] : children_) {
    out += name() + braces(label_text(values)) + " " + std::to_string(g->value()) + "\n";
  }
}

template <>
void Family<Histogram>::render_samples(std::string& out) const {
  std::lock_guard lk(mu_);
  for (const auto& [values, h] : children_) {
    const std::string labels = label_text(values);
    const Histogram::Snapshot s = h->snapshot();
    const Buckets& b = h->buckets();
    for (size_t i = 0; i < b.bounds.size(); ++i) {
      char le[32];
      std::snprintf(le, sizeof le, "%g", static_cast<double>(b.bounds[i]) * b.unit);
      out += name() + "_bucket{" + join(labels, std::string("le=\"") + le + "\"") + "} " +
             std::to_string(s.cumulative[i]) + "\n";
    }
    out += name() + "_bucket{" + join(labels, "le=\"+Inf\"") + "} " + std::to_string(s.count) + "\n";
    out += name() + "_sum" + braces(labels) + " " + format_value(s.sum) + "\n";
    out += name() + "_count" + braces(labels) + " " + std::to_string(s.count) + "\n";
  }
}

// Scrape-time functions of one name: by label values, each a list of
// (probe id, function) whose values add up.
class ProbeFamily final : public FamilyBase {
 public:
  using FamilyBase::FamilyBase;

  uint64_t add(std::vector<std::string> values, std::function<double()> read) {
    check_arity(values);
    std::lock_guard lk(mu_);
    const uint64_t id = ++next_id_;
    children_[std::move(values)].emplace_back(id, std::move(read));
    return id;
  }
  void remove(uint64_t id) {
    std::lock_guard lk(mu_);
    for (auto it = children_.begin(); it != children_.end(); ++it) {
      it->second.remove_if([id](const auto& p) { return p.first == id; });
      if (it->second.empty()) {
        children_.erase(it);
        return;
      }
    }
  }
  void render_samples(std::string& out) const override {
    std::lock_guard lk(mu_);
    for (const auto& [values, reads] : children_) {
      double v = 0;
      for (const auto& [id, read] : reads) v += read();
      out += name() + braces(label_text(values)) + " " + format_value(v) + "\n";
    }
  }

 private:
  uint64_t next_id_ = 0;
  std::map<std::vector<std::string>, std::list<std::pair<uint64_t, std::function<double()>>>>
      children_;
};

Probe& Probe::operator=(Probe&& o) noexcept {
  if (this != &o) {
    reset();
    owner_ = o.owner_;
    family_ = o.family_;
    id_ = o.id_;
    o.owner_ = nullptr;
  }
  return *this;
}

void Probe::reset() {
  if (owner_ == nullptr) return;
  // Under the registry's lock, so no render is calling the function when
  // reset() returns.
  std::lock_guard lk(owner_->mu_);
  family_->remove(id_);
  owner_ = nullptr;
}

Registry::~Registry() = default;

Registry& Registry::global() {
  static Registry* r = new Registry();  // never destroyed: probes and statics may outlive main
  return *r;
}

FamilyBase* Registry::find(const std::string& name, Type type,
                           const std::vector<std::string>& labels) {
  for (auto& f : families_) {
    if (f->name() != name) continue;
    if (f->type() != type || f->label_names() != labels) {
      throw std::logic_error("metric " + name + " declared twice with different types or labels");
    }
    return f.get();
  }
  return nullptr;
}

CounterFamily& Registry::counter_family(const std::string& name, const std::string& help,
                                        std::vector<std::string> label_names) {
  std::lock_guard lk(mu_);
  if (FamilyBase* f = find(name, Type::kCounter, label_names)) {
    if (auto* c = dynamic_cast<CounterFamily*>(f)) return *c;
    throw std::logic_error("metric " + name + " is a probe, declared again as a counter");
  }
  auto f = std::make_unique<CounterFamily>(name, help, Type::kCounter, std::move(label_names),
                                           [] { return std::make_unique<Counter>(); });
  auto& ref = *f;
  families_.push_back(std::move(f));
  return ref;
}

GaugeFamily& Registry::gauge_family(const std::string& name, const std::string& help,
                                    std::vector<std::string> label_names) {
  std::lock_guard lk(mu_);
  if (FamilyBase* f = find(name, Type::kGauge, label_names)) {
    if (auto* g = dynamic_cast<GaugeFamily*>(f)) return *g;
    throw std::logic_error("metric " + name + " is a probe, declared again as a gauge");
  }
  auto f = std::make_unique<GaugeFamily>(name, help, Type::kGauge, std::move(label_names),
                                         [] { return std::make_unique<Gauge>(); });
  auto& ref = *f;
  families_.push_back(std::move(f));
  return ref;
}

HistogramFamily& Registry::histogram_family(const std::string& name, const std::string& help,
                                            std::vector<std::string> label_names,
                                            Buckets buckets) {
  std::lock_guard lk(mu_);
  if (FamilyBase* f = find(name, Type::kHistogram, label_names)) {
    return *dynamic_cast<HistogramFamily*>(f);
  }
  Histogram check(buckets);  // bad bounds are refused here, not at first use
  auto f = std::make_unique<HistogramFamily>(
      name, help, Type::kHistogram, std::move(label_names),
      [buckets] { return std::make_unique<Histogram>(buckets); });
  auto& ref = *f;
  families_.push_back(std::move(f));
  return ref;
}

Probe Registry::probe(const std::string& name, const std::string& help, Type type,
                      std::vector<std::pair<std::string, std::string>> labels,
                      std::function<double()> read) {
  if (type == Type::kHistogram) {
    throw std::logic_error("metric " + name + ": a probe is a counter or a gauge");
  }
  std::vector<std::string> names, values;
  for (auto& [n, v] : labels) {
    names.push_back(n);
    values.push_back(v);
  }
  std::lock_guard lk(mu_);
  ProbeFamily* pf = nullptr;
  if (FamilyBase* f = find(name, type, names)) {
    pf = dynamic_cast<ProbeFamily*>(f);
    if (pf == nullptr) {
      throw std::logic_error("metric " + name + " is a counter or gauge, declared again as a probe");
    }
  } else {
    auto nf = std::make_unique<ProbeFamily>(name, help, type, std::move(names));
    pf = nf.get();
    families_.push_back(std::move(nf));
  }
  const uint64_t id = pf->add(std::move(values), std::move(read));
  return Probe(this, pf, id);
}

std::string Registry::render() const {
  std::lock_guard lk(mu_);
  std::string out;
  for (const auto& f : families_) {
    out += "# HELP " + f->name() + " " + escape_help(f->help()) + "\n";
    out += std::string("# TYPE ") + f->name() + " " + type_name(f->type()) + "\n";
    f->render_samples(out);
  }
  return out;
}

}  // namespace surge::metrics
