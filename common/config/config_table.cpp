// The ConfigTable engine: see config_table.h.
#include "common/config/config_table.h"

#include <CLI/CLI.hpp>
#include <charconv>
#include <map>
#include <cstdio>
#include <toml++/toml.h>

namespace surge::config {
namespace {

// Every integer setting passes through here: in [min, max] and in the
// range of its C++ type.
Status set_integer(const Slot& slot, const FieldInfo& f, int64_t v, const std::string& where) {
  if (v < 0) return Status::InvalidArgument(where + " must be a non-negative integer");
  const auto u = static_cast<uint64_t>(v);
  uint64_t type_max = std::numeric_limits<uint64_t>::max();
  if (std::holds_alternative<int*>(slot)) type_max = std::numeric_limits<int>::max();
  if (std::holds_alternative<uint32_t*>(slot)) type_max = std::numeric_limits<uint32_t>::max();
  if (u > type_max || u > f.max) {
    return Status::InvalidArgument(where + " = " + std::to_string(u) + " is too large (at most " +
                                   std::to_string(std::min(type_max, f.max)) + ")");
  }
  if (u < f.min) {
    return Status::InvalidArgument(where + " = " + std::to_string(u) + " is too small (at least " +
                                   std::to_string(f.min) + ")");
  }
  if (auto* i = std::get_if<int*>(&slot)) **i = static_cast<int>(u);
  if (auto* u32 = std::get_if<uint32_t*>(&slot)) **u32 = static_cast<uint32_t>(u);
  if (auto* u64 = std::get_if<uint64_t*>(&slot)) **u64 = u;
  return Status::OK();
}

Status read_node(const toml::node& n, const BoundField& b, const std::string& where) {
  if (auto* s = std::get_if<std::string*>(&b.slot)) {
    auto v = n.value<std::string>();
    if (!v) return Status::InvalidArgument(where + " must be a string");
    **s = *v;
    return Status::OK();
  }
  if (auto* p = std::get_if<bool*>(&b.slot)) {
    auto v = n.value_exact<bool>();
    if (!v) return Status::InvalidArgument(where + " must be true or false");
    **p = *v;
    return Status::OK();
  }
  auto v = n.value_exact<int64_t>();
  if (!v) return Status::InvalidArgument(where + " must be a non-negative integer");
  return set_integer(b.slot, *b.info, *v, where);
}

Status parse_flag_text(const std::string& text, const BoundField& b, const std::string& where) {
  if (auto* s = std::get_if<std::string*>(&b.slot)) {
    **s = text;
    return Status::OK();
  }
  int64_t v = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, v);
  if (text.empty() || ec != std::errc() || ptr != end) {
    return Status::InvalidArgument(where + " '" + text + "' is not a non-negative integer");
  }
  return set_integer(b.slot, *b.info, v, where);
}

}  // namespace

Status load_toml(const std::string& path, const std::vector<BoundField>& fields) {
  toml::table root;
  try {
    root = toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    return Status::InvalidArgument("config " + path + ": " + std::string(e.description()) +
                                   " at line " + std::to_string(e.source().begin.line));
  }
  std::map<std::string, std::map<std::string, const BoundField*>> known;
  for (const auto& b : fields) known[b.info->section][b.info->key] = &b;
  for (const auto& [sk, sv] : root) {
    const std::string section(sk.str());
    auto s = known.find(section);
    if (s == known.end()) {
      return Status::InvalidArgument("config " + path + ": unknown section [" + section + "]");
    }
    const toml::table* t = sv.as_table();
    if (t == nullptr) {
      return Status::InvalidArgument("config " + path + ": " + section + " must be a table");
    }
    for (const auto& [kk, kv] : *t) {
      const std::string key(kk.str());
      auto f = s->second.find(key);
      if (f == s->second.end()) {
        return Status::InvalidArgument("config " + path + ": unknown setting " + section + "." +
                                       key);
      }
      SURGE_RETURN_IF_ERROR(read_node(kv, *f->second, "config " + path + ": " + section + "." + key));
    }
  }
  return Status::OK();
}

Status check_ranges(const std::vector<BoundField>& fields) {
  for (const auto& b : fields) {
    const FieldInfo& f = *b.info;
    if (auto* s = std::get_if<std::string*>(&b.slot)) {
      if (f.min > 0 && (*s)->empty()) return Status::InvalidArgument(f.name() + " is empty");
      continue;
    }
    if (std::holds_alternative<bool*>(b.slot)) continue;
    uint64_t v = 0;
    if (auto* i = std::get_if<int*>(&b.slot)) v = **i < 0 ? 0 : static_cast<uint64_t>(**i);
    if (auto* u = std::get_if<uint32_t*>(&b.slot)) v = **u;
    if (auto* u = std::get_if<uint64_t*>(&b.slot)) v = **u;
    if (auto* i = std::get_if<int*>(&b.slot); i != nullptr && **i < 0) {
      return Status::InvalidArgument(f.name() + " = " + std::to_string(**i) + " is negative");
    }
    if (v < f.min || v > f.max) {
      return Status::InvalidArgument(f.name() + " = " + std::to_string(v) + " must be between " +
                                     std::to_string(f.min) + " and " + std::to_string(f.max));
    }
  }
  return Status::OK();
}

std::string toml_value(const Slot& slot) {
  if (auto* s = std::get_if<std::string*>(&slot)) {
    std::string out = "\"";  // a TOML basic string
    for (char c : **s) {
      if (c == '"' || c == '\\') {
        out += '\\';
        out += c;
      } else if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(static_cast<unsigned char>(c)));
        out += buf;
      } else {
        out += c;
      }
    }
    return out + "\"";
  }
  if (auto* b = std::get_if<bool*>(&slot)) return **b ? "true" : "false";
  if (auto* i = std::get_if<int*>(&slot)) return std::to_string(**i);
  if (auto* u = std::get_if<uint32_t*>(&slot)) return std::to_string(**u);
  return std::to_string(**std::get_if<uint64_t*>(&slot));
}

std::string render_sample(const std::string& header, const std::vector<BoundField>& fields) {
  std::string out = header;
  std::string flags;
  for (const auto& b : fields) {
    if (b.info->flag.empty()) continue;
    flags += (flags.empty() ? "" : ", ") + b.info->flag;
  }
  if (!flags.empty()) {
    // Wrapped at 76 columns, as the rest of the file.
    std::string line = "# Flags override the file:";
    size_t start = 0;
    while (start < flags.size()) {
      size_t end = flags.find(", ", start);
      std::string word = flags.substr(start, end == std::string::npos ? end : end - start + 1);
      if (line.size() + 1 + word.size() > 76) {
        out += line + "\n";
        line = "#";
      }
      line += " " + word;
      start = end == std::string::npos ? flags.size() : end + 2;
    }
    out += line + ".\n";
  }
  out += "# Nothing here changes at run time: restart the daemon to apply a change.\n";
  std::string section;
  for (const auto& b : fields) {
    if (b.info->section != section) {
      section = b.info->section;
      out += "\n[" + section + "]\n";
    }
    size_t start = 0;
    const std::string& note = b.info->note;
    while (start < note.size()) {
      size_t end = note.find('\n', start);
      if (end == std::string::npos) end = note.size();
      out += "# " + note.substr(start, end - start) + "\n";
      start = end + 1;
    }
    out += b.info->key + " = " + toml_value(b.slot) + "\n";
  }
  return out;
}

void FlagOverrides::add_to(CLI::App& app, const std::vector<BoundField>& fields) {
  for (const auto& b : fields) {
    const FieldInfo& f = *b.info;
    if (f.flag.empty()) continue;
    const std::string help = f.note.substr(0, f.note.find('\n')) + " (" + f.name() + ")";
    if (std::holds_alternative<bool*>(b.slot)) {
      bool& v = bools_.emplace_back(false);
      given_.push_back(Given{&f, app.add_flag(f.flag, v, help), nullptr, &v});
    } else {
      std::string& t = texts_.emplace_back();
      given_.push_back(Given{&f, app.add_option(f.flag, t, help), &t, nullptr});
    }
  }
}

Status FlagOverrides::apply(const std::vector<BoundField>& fields) const {
  for (const Given& g : given_) {
    if (g.option->count() == 0) continue;
    for (const auto& b : fields) {
      if (b.info != g.info) continue;
      if (g.flag_value != nullptr) {
        **std::get_if<bool*>(&b.slot) = *g.flag_value;
        continue;
      }
      SURGE_RETURN_IF_ERROR(parse_flag_text(*g.text, b, "flag " + g.info->flag));
    }
  }
  return Status::OK();
}

}  // namespace surge::config
