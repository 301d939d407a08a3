/* Compiled as C and linked against libsurge.so: surge/surge.h is valid C
 * and every function it declares is exported. Run with no arguments it
 * checks that connecting to nothing fails cleanly with a negative errno. */
#include <stdio.h>

#include "surge/surge.h"

int main(void) {
  surge_options_t o = {0};
  surge_t* fs = NULL;
  o.mds_address = "tcp://127.0.0.1:1";
  o.cluster_key = "0123456789abcdef";
  o.io_timeout_ms = 500;
  o.mds_timeout_ms = 300;
  int rc = surge_connect(&o, &fs);
  void* fns[] = {(void*)surge_open, (void*)surge_close, (void*)surge_pread, (void*)surge_pwrite,
                 (void*)surge_fsync, (void*)surge_fallocate, (void*)surge_stat, (void*)surge_truncate, (void*)surge_mkdir,
                 (void*)surge_rmdir, (void*)surge_unlink, (void*)surge_rename, (void*)surge_link,
                 (void*)surge_symlink, (void*)surge_readdir, (void*)surge_getxattr,
                 (void*)surge_setxattr, (void*)surge_statfs, (void*)surge_alloc_buffer,
                 (void*)surge_free_buffer, (void*)surge_disconnect};
  for (unsigned i = 0; i < sizeof(fns) / sizeof(fns[0]); ++i) {
    if (fns[i] == NULL) return 2;
  }
  if (rc >= 0) {
    fprintf(stderr, "connect to a closed port succeeded?\n");
    return 1;
  }
  printf("surge_connect to a closed port: %d (negative errno, as documented)\n", rc);
  return 0;
}
