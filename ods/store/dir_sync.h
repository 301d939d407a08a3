// fsync of a directory: what makes a name created, renamed or removed in
// it durable (the object store's fan-out directories, FORMAT, the records
// beside objects).
#pragma once

#include <string>

#include "common/status.h"

namespace surge::ods {

// Errors name the directory.
Status fsync_dir(const std::string& path);

}  // namespace surge::ods
