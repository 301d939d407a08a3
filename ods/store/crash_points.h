// Crash points: named places in the object store's write path where a test
// can make the process die exactly as a crash (SIGKILL) would, to force the
// interleavings crash recovery must handle (data written, CRC not yet).
//
// Armed only by the environment: SURGE_ODS_CRASH_AT="NAME:N" kills the
// process the N-th time (1-based) it passes point NAME. Unset (always, in
// production), a crash point is one relaxed atomic load.
#pragma once

namespace surge::ods {

// Points: "after_data_write" (a write's bytes are in the file, its CRCs
// not), "after_crc_write" (both written, nothing synced yet).
void crash_point(const char* name);

}  // namespace surge::ods
