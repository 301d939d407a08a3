// FileChunks: what the MDS does to a file's data on the data servers
// (truncate, removal of an orphan or of an empty file's old layout), for
// every layout format, through the one chunk map (common/chunk_map.h).
// Format 1: each slot's legacy object on its target. Format 2: each chunk
// through its chain's head (which forwards the change down the chain) with
// the chain version the map holds; an EC chain's chunk at the member of its
// position (a data position's cut sends the parity its delta).
#pragma once

#include <cstdint>

#include "common/file_layout.h"
#include "common/status.h"
#include "mds/cluster/cluster_map.h"
#include "mds/cluster/object_targets.h"
#include "net/proto/mds.pb.h"

namespace surge::mds {

// The model of a wire/stored layout (format 0 reads as 1).
FileLayout to_file_layout(const proto::mds::Layout& l);

// Sets every chunk to the size file_size implies. Unavailable naming the
// target or chain when one cannot be reached (nothing is skipped).
// truncate_seq != 0: the truncate generation applied, which a chunk or
// legacy object that applied it already skips.
Status truncate_file_data(const proto::mds::Layout& layout, uint64_t ino, uint64_t file_size,
                          ClusterMap& map, ObjectTargets& objects, uint64_t truncate_seq = 0);

// Removes every chunk (idempotent). Unavailable as above: retry later.
// truncate_seq != 0 (a setstripe's old layout): not a chunk that applied
// that generation or a later one.
Status remove_file_data(const proto::mds::Layout& layout, uint64_t ino, ClusterMap& map,
                        ObjectTargets& objects, uint64_t truncate_seq = 0);

}  // namespace surge::mds
