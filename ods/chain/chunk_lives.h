// Chunk lives: the versions of one chunk key across its removals
// (docs/redundancy.md, "Chunk versions"). A removed chunk leaves no record,
// so a rewrite of the same {ino, slot, position} (a file truncated short,
// then written past the cut) used to start again at version 1, and a
// replica away during the remove and rewrite could hold the old bytes at
// the same version as the new ones: the resync compared them equal and
// kept the stale chunk.
//
// So each life of a chunk starts where no other life starts: the head that
// creates it takes the base (its target id, the object id it allocated for
// the bytes) << kSeqBits, unique per creation since object ids never
// repeat on a target; its updates count up from there. A member applies an
// update only from the same life (the life bits agree), or the first
// update of a life onto a chunk it does not hold; anything else is a
// ChunkVersionGap and the chunk comes over whole, so a stale life is
// replaced, never appended to. A life that outgrows kSeqBits updates runs
// into the next base: its members see a new life and get the chunk whole
// once, which is still right. Chunks written before lives existed are in
// life 0 (base 0) and keep counting from 1.
#pragma once

#include <cstdint>

namespace surge::ods {

inline constexpr unsigned kSeqBits = 20;           // updates per life before a rollover
inline constexpr unsigned kLifeObjectBits = 32;    // object id bits in the base
inline constexpr uint64_t kSeqMask = (uint64_t{1} << kSeqBits) - 1;

// The version a new life of a chunk starts at (its first update is + 1).
inline uint64_t life_base(uint32_t head_target, uint64_t object_id) {
  const uint64_t life = (uint64_t{head_target & 0xfff} << kLifeObjectBits) |
                        (object_id & ((uint64_t{1} << kLifeObjectBits) - 1));
  return life << kSeqBits;
}
inline uint64_t life_of(uint64_t version) { return version >> kSeqBits; }
// The first update of a life (0 + 1 in life 0 too).
inline bool first_of_life(uint64_t version) { return (version & kSeqMask) == 1; }

}  // namespace surge::ods
