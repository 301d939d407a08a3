/* libsurge C API: the native Surge client for C programs, IOR-style tools
 * and other languages' bindings. A thin layer over surge/client.h.
 *
 * Conventions: functions returning int give 0 (or a byte count) on success
 * and a negative errno on failure (-ENOENT, -EIO, ...), like the kernel.
 * Paths are absolute inside the Surge file system ("/dir/file"). Handles
 * are opaque; every surge_file_t must be closed, every surge_t disconnected.
 * All functions are thread-safe. */
#ifndef SURGE_SURGE_H_
#define SURGE_SURGE_H_

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct surge_client surge_t;
typedef struct surge_file surge_file_t;

typedef struct surge_options {
  const char* mds_address;      /* "tcp://127.0.0.1:7000" (required); several: comma-separated */
  const char* cluster_key;      /* the key, or NULL */
  const char* cluster_key_file; /* or a file holding it */
  const char* transport;        /* "tcp" (default) or "rdma" */
  uint32_t io_timeout_ms;       /* 0: default (10 s) */
  uint32_t mds_timeout_ms;      /* 0: default (30 s): how long an unreachable MDS is retried */
} surge_options_t;

/* Connects; *out is set on success. */
int surge_connect(const surge_options_t* options, surge_t** out);
void surge_disconnect(surge_t* fs);

int surge_open(surge_t* fs, const char* path, int flags, mode_t mode, surge_file_t** out);
int surge_close(surge_t* fs, surge_file_t* f);
ssize_t surge_pread(surge_t* fs, surge_file_t* f, void* buf, size_t len, uint64_t offset);
ssize_t surge_pwrite(surge_t* fs, surge_file_t* f, const void* buf, size_t len, uint64_t offset);
int surge_fsync(surge_t* fs, surge_file_t* f);
/* fallocate(2) on an open file: mode 0 (reserve and grow), FALLOC_FL_KEEP_SIZE
 * (reserve only), FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE (free; reads as
 * zeros), FALLOC_FL_ZERO_RANGE [| FALLOC_FL_KEEP_SIZE]; the values of
 * linux/falloc.h. Other modes: -EOPNOTSUPP; not open for writing: -EBADF. */
int surge_fallocate(surge_t* fs, surge_file_t* f, int mode, uint64_t offset, uint64_t length);

/* Registered memory for the zero-copy path; free with surge_free_buffer. */
void* surge_alloc_buffer(surge_t* fs, size_t size);
void surge_free_buffer(surge_t* fs, void* buf);

int surge_stat(surge_t* fs, const char* path, struct stat* st);
int surge_truncate(surge_t* fs, const char* path, uint64_t size);
int surge_mkdir(surge_t* fs, const char* path, mode_t mode);
int surge_rmdir(surge_t* fs, const char* path);
int surge_unlink(surge_t* fs, const char* path);
int surge_rename(surge_t* fs, const char* from, const char* to);
int surge_link(surge_t* fs, const char* existing, const char* new_path);
int surge_symlink(surge_t* fs, const char* target, const char* link_path);

/* Calls fn(name, st, arg) for every entry; stops early when fn returns
 * non-zero. */
typedef int (*surge_dirent_fn)(const char* name, const struct stat* st, void* arg);
int surge_readdir(surge_t* fs, const char* path, surge_dirent_fn fn, void* arg);

int surge_getxattr(surge_t* fs, const char* path, const char* name, void* value, size_t size);
int surge_setxattr(surge_t* fs, const char* path, const char* name, const void* value,
                   size_t size, int flags);

typedef struct surge_statfs {
  uint64_t total_bytes;
  uint64_t free_bytes;
  uint64_t total_inodes;
  uint64_t free_inodes;
} surge_statfs_t;
int surge_statfs(surge_t* fs, surge_statfs_t* out);

#ifdef __cplusplus
}
#endif

#endif /* SURGE_SURGE_H_ */
