// FilesystemId: a name for the local file system a data directory lives
// on, the same for every directory of that file system on this host and
// different on every other host, so the MDS counts a disk that holds
// several targets once in `df` (statfs). Made of the host name, the
// device id of the directory (st_dev, major:minor) and the file system
// id statvfs reports (f_fsid: from the UUID on ext4 and XFS): the device
// id alone repeats across hosts (every host has an 8:1), and f_fsid alone
// repeats across hosts booted from copies of one image.
#pragma once

#include <string>

#include "common/status.h"

namespace surge::ods {

// "node7 dev 8:1 fsid 0a1b2c3d4e5f6071"; an IOError naming dir when it
// cannot be stat'ed.
Result<std::string> filesystem_id_of(const std::string& dir);

}  // namespace surge::ods
