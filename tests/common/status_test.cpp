#include "common/status.h"

#include <gtest/gtest.h>

#include <cerrno>

namespace surge {
namespace {

TEST(Status, DefaultIsOk) {
  Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.ToString(), "OK");
}

TEST(Status, CarriesCodeAndMessage) {
  Status s = Status::NotFound("lookup 'a' in inode 7");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), Code::kNotFound);
  EXPECT_EQ(s.ToString(), "NotFound: lookup 'a' in inode 7");
  EXPECT_EQ(s.to_errno(), ENOENT);
}

TEST(Status, WithContextPrefixes) {
  Status s = Status::IOError("disk").WithContext("while writing object 5");
  EXPECT_EQ(s.code(), Code::kIOError);
  EXPECT_EQ(s.message(), "while writing object 5: disk");
}

TEST(Status, ErrnoRoundTripsForNamespaceCodes) {
  for (int e : {ENOENT, EEXIST, ENOTDIR, EISDIR, ENOTEMPTY, ENAMETOOLONG, EACCES, EPERM, ENOSPC,
                ENODATA, E2BIG, ERANGE, EINVAL, EMLINK, ESTALE, EXDEV}) {
    EXPECT_EQ(to_errno(from_errno(e)), e) << "errno " << e;
  }
}

TEST(Status, FromErrnoNamesTheOperation) {
  Status s = Status::FromErrno(ENOSPC, "pwrite /data/obj");
  EXPECT_EQ(s.code(), Code::kNoSpace);
  EXPECT_NE(s.message().find("pwrite /data/obj"), std::string::npos);
}

Result<int> half(int x) {
  if (x % 2) return Status::InvalidArgument("odd");
  return x / 2;
}

Status quarter(int x, int* out) {
  SURGE_ASSIGN_OR_RETURN(int h, half(x));
  SURGE_ASSIGN_OR_RETURN(int q, half(h));
  *out = q;
  return Status::OK();
}

TEST(Result, AssignOrReturnPropagates) {
  int out = 0;
  EXPECT_TRUE(quarter(8, &out).ok());
  EXPECT_EQ(out, 2);
  EXPECT_EQ(quarter(6, &out).code(), Code::kInvalidArgument);
}

TEST(Result, OkStatusBecomesInternalError) {
  Result<int> r{Status::OK()};
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kInternal);
}

}  // namespace
}  // namespace surge
