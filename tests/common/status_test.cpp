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

// The chain refusals are wire values (docs/redundancy.md) with names of
// their own, and an application that ever sees one gets EIO.
TEST(Status, ChainRefusalsKeepTheirWireValuesAndMapToEio) {
  struct Expect {
    Status s;
    uint16_t value;
    const char* name;
  };
  const Expect all[] = {
      {Status::StaleChain("chain 4 version 7 < 9"), 46, "StaleChain"},
      {Status::WrongTarget("target 3 is not 5"), 47, "WrongTarget"},
      {Status::ChunkDirty("chunk 12/0/0"), 48, "ChunkDirty"},
      {Status::ChunkVersionGap("chunk 12/0/0 at 3, got 5"), 49, "ChunkVersionGap"},
      {Status::NotServing("target 2 syncing in chain 4"), 50, "NotServing"},
  };
  for (const auto& e : all) {
    EXPECT_EQ(static_cast<uint16_t>(e.s.code()), e.value) << e.name;
    EXPECT_EQ(code_name(e.s.code()), e.name);
    EXPECT_EQ(e.s.to_errno(), EIO) << e.name;
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
