/* A C program as a libsurge user writes one: only <surge/surge.h> from the
 * installed libsurge-dev. Writes 3 MiB + 17 bytes to PATH, reads them back
 * through a new open and compares.
 *   roundtrip-c MDS_ADDRESS KEY_FILE PATH */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <surge/surge.h>

static int fail(const char* what, const char* path, int rc) {
  fprintf(stderr, "roundtrip-c: %s %s: %s\n", what, path, strerror(-rc));
  return 1;
}

int main(int argc, char** argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: roundtrip-c MDS_ADDRESS KEY_FILE PATH\n");
    return 2;
  }
  const char* path = argv[3];
  const size_t len = (3u << 20) + 17;
  char* out = malloc(len);
  char* in = malloc(len);
  if (out == NULL || in == NULL) return 1;
  for (size_t i = 0; i < len; i++) out[i] = (char)(i * 7 + i / 4096);

  surge_options_t opts;
  memset(&opts, 0, sizeof opts);
  opts.mds_address = argv[1];
  opts.cluster_key_file = argv[2];
  surge_t* fs = NULL;
  int rc = surge_connect(&opts, &fs);
  if (rc < 0) return fail("connect to", argv[1], rc);

  surge_file_t* f = NULL;
  if ((rc = surge_open(fs, path, O_CREAT | O_RDWR | O_TRUNC, 0644, &f)) < 0) return fail("create", path, rc);
  ssize_t n = surge_pwrite(fs, f, out, len, 0);
  if (n < 0) return fail("write", path, (int)n);
  if ((rc = surge_close(fs, f)) < 0) return fail("close", path, rc);

  if ((rc = surge_open(fs, path, O_RDONLY, 0, &f)) < 0) return fail("open", path, rc);
  n = surge_pread(fs, f, in, len, 0);
  if (n < 0) return fail("read", path, (int)n);
  if ((rc = surge_close(fs, f)) < 0) return fail("close", path, rc);
  surge_disconnect(fs);
  if ((size_t)n != len || memcmp(in, out, len) != 0) {
    fprintf(stderr, "roundtrip-c: %s read back %zd bytes, not the %zu written\n", path, n, len);
    return 1;
  }
  printf("roundtrip-c: %s: %zu bytes written and read back\n", path, len);
  free(out);
  free(in);
  return 0;
}
