// The kernel's FUSE ABI (include/uapi/linux/fuse.h), which libfuse 3.14
// keeps private: the request header offsets the raw-buffer readers share.
#pragma once

#include <cstddef>

namespace surge::fuse {

inline constexpr size_t kInHeaderSize = 40;  // sizeof(fuse_in_header)
inline constexpr size_t kInOpcodeAt = 4;     // fuse_in_header.opcode, uint32

}  // namespace surge::fuse
