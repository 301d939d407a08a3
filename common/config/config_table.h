// ConfigTable: a daemon's settings declared once, as a table of typed
// fields: the TOML section and key, the member of the daemon's config
// struct it fills, its command-line flag, the values it accepts and the
// note printed above it in the sample file. Everything else comes from
// the table, the same way for every daemon:
//   * reading a TOML file over the defaults (an unknown section or key, a
//     wrong type or a value out of range is an error naming the file and
//     the key: a typo must not leave a default in place);
//   * the flags, which override the file (add_flags, then apply_flags once
//     the file is read);
//   * the range checks (check; relations between settings stay with the
//     daemon's validate_config);
//   * the sample file (sample(): every key at its default, with its note),
//     which each daemon prints with --print-config and ships as
//     <daemon>.toml; tests/common/config_sample_test.sh checks the shipped
//     files are that output.
// Settings are read at start; none change at run time.
#pragma once

#include <cstdint>
#include <deque>
#include <limits>
#include <string>
#include <variant>
#include <vector>

#include "common/status.h"

namespace CLI {
class App;
class Option;
}  // namespace CLI

namespace surge::config {

// What the table says about one setting, whatever struct it lives in.
struct FieldInfo {
  FieldInfo(std::string section_, std::string key_, std::string note_, std::string flag_ = "",
            uint64_t min_ = 0, uint64_t max_ = std::numeric_limits<uint64_t>::max())
      : section(std::move(section_)),
        key(std::move(key_)),
        note(std::move(note_)),
        flag(std::move(flag_)),
        min(min_),
        max(max_) {}
  std::string section;  // "server": the [server] table
  std::string key;      // "data_dir"
  std::string note;     // the comment above the key in the sample ('\n' splits lines)
  std::string flag;     // "--data-dir"; "": set in the file only
  // Numbers: the accepted range. Strings: min 1 means not empty.
  uint64_t min;
  uint64_t max;
  std::string name() const { return section + "." + key; }
};

// Where one setting lives in one config object.
using Slot = std::variant<std::string*, bool*, int*, uint32_t*, uint64_t*>;
struct BoundField {
  const FieldInfo* info;
  Slot slot;
};

// The engine, for any table bound to an object.
Status load_toml(const std::string& path, const std::vector<BoundField>& fields);
Status check_ranges(const std::vector<BoundField>& fields);
std::string render_sample(const std::string& header, const std::vector<BoundField>& fields);
// "2", "true", "\"tcp://127.0.0.1:7100\"": a value as the sample writes it.
std::string toml_value(const Slot& slot);

// The flags of a table on a CLI11 app: each flag's text is kept until
// apply, which parses it into the object (after the file was read).
class FlagOverrides {
 public:
  void add_to(CLI::App& app, const std::vector<BoundField>& fields);
  // Errors name the flag and the text given.
  Status apply(const std::vector<BoundField>& fields) const;

 private:
  struct Given {
    const FieldInfo* info;
    CLI::Option* option;
    std::string* text;
    bool* flag_value;  // bool settings: a flag (--o-direct, --o-direct=false)
  };
  std::deque<std::string> texts_;
  std::deque<bool> bools_;
  std::vector<Given> given_;
};

template <class C>
using Member = std::variant<std::string C::*, bool C::*, int C::*, uint32_t C::*, uint64_t C::*>;

template <class C>
struct Field {
  FieldInfo info;
  Member<C> member;
};

template <class C>
class ConfigTable {
 public:
  // header: the sample file's opening comment (without the flag list,
  // which the table adds).
  ConfigTable(std::string header, std::vector<Field<C>> fields)
      : header_(std::move(header)), fields_(std::move(fields)) {}

  std::vector<BoundField> bind(C& c) const {
    std::vector<BoundField> out;
    out.reserve(fields_.size());
    for (const auto& f : fields_) {
      out.push_back(BoundField{&f.info, std::visit([&c](auto m) { return Slot(&(c.*m)); },
                                                   f.member)});
    }
    return out;
  }
  std::vector<BoundField> bind(const C& c) const { return bind(const_cast<C&>(c)); }

  Status load_file(const std::string& path, C& c) const { return load_toml(path, bind(c)); }
  // The table's flags on app (their values wait in flags until load).
  void add_flags(CLI::App& app, FlagOverrides& flags) const {
    C unused;  // add_to reads the fields' info only
    flags.add_to(app, bind(unused));
  }
  // Over the defaults in c: the file (config_file; "" none), then the
  // flags given. The daemon's validate_config comes after.
  Status load(const std::string& config_file, const FlagOverrides& flags, C& c) const {
    if (!config_file.empty()) SURGE_RETURN_IF_ERROR(load_file(config_file, c));
    return flags.apply(bind(c));
  }
  Status check(const C& c) const { return check_ranges(bind(c)); }
  std::string sample() const {
    C defaults;
    return render_sample(header_, bind(defaults));
  }
  const std::vector<Field<C>>& fields() const { return fields_; }

 private:
  std::string header_;
  std::vector<Field<C>> fields_;
};

}  // namespace surge::config
