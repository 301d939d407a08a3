// The leader's pass over the truncate intents: a file's truncate
// is committed with a new truncate generation and an intent, and answered
// (mds/namespace/namespace_truncate.cpp); this sends each intent's
// truncate, with its generation, to every chunk (or legacy object) of the file, then deletes
// the intent unless a newer truncate replaced it. A chunk that applied the
// generation already (a writer that knew of it cut it first) is left as it
// is, so however late the pass runs it never cuts a later write. An intent
// whose data servers cannot be reached stays and is tried on a later pass;
// the intent of a file that is gone is dropped (its chunks go with the
// orphan collector). Runs on the leader's background thread, beside the
// orphan collector (orphan_collector.h). A setstripe's intent also names
// the old layout, whose chunks it removes first (apply_truncate_intent).
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/status.h"
#include "mds/cluster/cluster_map.h"
#include "mds/cluster/object_targets.h"
#include "mds/namespace/namespace.h"

namespace surge::mds {

struct TruncateStats {
  uint64_t applied = 0;   // intents applied and deleted
  uint64_t deferred = 0;  // a data server failed; tried again later
};

// Applies one intent to the data of the file whose attributes (current
// layout) are `a`: a setstripe's removes the old layout's chunks, each
// unless the generation or a later one wrote it; then every chunk of the
// current layout is truncated with the generation. Unavailable naming the
// target or chain when one cannot be reached (retry later).
Status apply_truncate_intent(const records::TruncateIntent& t, const records::StoredAttr& a,
                             ClusterMap& map, ObjectTargets& objects);

// One pass over up to `max` intents.
Result<TruncateStats> apply_truncate_intents(Namespace& ns, ClusterMap& map, ObjectTargets& objects,
                                             size_t max);

}  // namespace surge::mds
