// open_store: an ObjectStore on a test's directory, or the test stops
// (a store that will not open is a broken test setup, not a case).
#pragma once

#include <memory>
#include <stdexcept>
#include <string>

#include "ods/store/object_store.h"

namespace surge::ods::testing {

inline std::unique_ptr<ObjectStore> open_store(const std::string& dir, size_t max_open = 1024) {
  ObjectStoreOptions o;
  o.data_dir = dir;
  o.max_open_objects = max_open;
  auto s = ObjectStore::Open(o);
  if (!s.ok()) throw std::runtime_error(s.status().ToString());
  return std::move(s).value();
}

}  // namespace surge::ods::testing
