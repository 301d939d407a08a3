// Service ids of the Surge protocol. Method ids live in each service's
// *_methods.h beside its .proto. Numbers are wire format: never renumber.
#pragma once

#include <cstdint>

namespace surge::proto {

enum ServiceId : uint16_t {
  kServiceControl = 0,  // transport-internal (auth, ping)
  kServiceTest = 1,     // net tests and benchmarks
  kServiceMds = 2,      // metadata server
  kServiceOds = 3,      // object data server
};

}  // namespace surge::proto
