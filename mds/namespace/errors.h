// Status factories for the POSIX namespace codes (common/status.h has the
// codes; these name them where the namespace makes them).
#pragma once

#include <string>

#include "common/status.h"

namespace surge::mds::err {

inline Status NotDirectory(std::string m) {
  return {Code::kNotDirectory, std::move(m)};
}
inline Status IsDirectory(std::string m) {
  return {Code::kIsDirectory, std::move(m)};
}
inline Status NotEmpty(std::string m) {
  return {Code::kNotEmpty, std::move(m)};
}
inline Status NameTooLong(std::string m) {
  return {Code::kNameTooLong, std::move(m)};
}
inline Status NoData(std::string m) {
  return {Code::kNoData, std::move(m)};
}
inline Status TooBig(std::string m) {
  return {Code::kTooBig, std::move(m)};
}

}  // namespace surge::mds::err
