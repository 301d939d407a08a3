#!/bin/bash
# What one metadata syscall costs through the mount, counted, not timed:
# MDS requests per syscall by method (the MDS's /metrics counters) and FUSE
# requests per syscall by opcode (a second mount in the foreground with -d),
# over N repetitions of each syscall in a fresh directory:
#   create   open(O_CREAT|O_EXCL|O_WRONLY) + close of an empty file
#   stat     stat of a name this mount looked up less than entry_timeout ago
#   stat-cold stat of a name another mount created (never looked up here)
#   open     open(O_RDONLY) + close of an empty file
#   unlink, mkdir, rmdir, stat-missing (a name that does not exist, twice)
#   write+futimens+fchmod  a 4 KiB file written, then its times and mode set
#             (what cp -p does per file), then closed
#   setxattr-acl  setxattr(system.posix_acl_access), which cp -a tries per
#             file before it falls back to chmod
#   cp -a, rm -rf  of a tree of N small files (and N/10 directories, N/10
#             symlinks) made under the build dir, per entry
#   bash tests/client/metadata_cost.sh [BUILD_DIR] [N]
# Needs root (tmpfs, FUSE) and python3. MDS and data servers on tmpfs.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=$(readlink -f "${1:-build}")
N=${2:-200}
PORT=${PORT:-7520}
MPORT=$((PORT + 90))
DIR=$(mktemp -d /var/tmp/surge-mdcost.XXXXXX)
CLUSTER=tools/surge-local-cluster
dbg_pid=""
cleanup() {
  if [ -n "$dbg_pid" ]; then fusermount3 -u "$DIR/dbg" 2>/dev/null || true; wait "$dbg_pid" 2>/dev/null || true; fi
  "$CLUSTER" stop --dir "$DIR" >/dev/null 2>&1 || true
  rm -rf "$DIR"
}
trap cleanup EXIT
"$CLUSTER" start --dir "$DIR" --build "$BUILD" --port "$PORT" --tmpfs 2g --metrics "$MPORT" >/dev/null
mkdir -p "$DIR/dbg"
"$BUILD/client/fuse/surge-fuse" -f -d "tcp://127.0.0.1:$PORT" "$DIR/dbg" \
  -o "key_file=$DIR/cluster.key,${FUSE_OPTS:-allow_other}" 2>"$DIR/fuse-debug.log" &
dbg_pid=$!
for _ in $(seq 1 100); do mountpoint -q "$DIR/dbg" && break; sleep 0.1; done
mountpoint -q "$DIR/dbg" || { echo "metadata_cost: debug mount failed" >&2; cat "$DIR/fuse-debug.log" >&2; exit 1; }

python3 - "$DIR" "$N" "$MPORT" <<'PY'
import os, sys, time, urllib.request, re, collections
d, n, mport = sys.argv[1], int(sys.argv[2]), sys.argv[3]
dbg, other = d + "/dbg", d + "/mnt"
log = d + "/fuse-debug.log"
def mds():
    t = urllib.request.urlopen(f"http://127.0.0.1:{mport}/metrics").read().decode()
    c = collections.Counter()
    for m in re.finditer(r'^surge_mds_requests_total\{method="(\w+)"\} (\d+)', t, re.M):
        c[m.group(1)] = int(m.group(2))
    for m in re.finditer(r'^surge_mds_wal_syncs_total (\d+)', t, re.M):
        c["(wal syncs)"] = int(m.group(1))
    return c
def fuse():
    c = collections.Counter()
    with open(log, errors="replace") as f:
        for line in f:
            m = re.search(r"opcode: (\w+)", line)
            if m: c[m.group(1)] += 1
    return c
def measure(name, setup, op, settle=True):
    setup()
    if settle: time.sleep(1.5)  # let periodic work (heartbeats, size reports) settle
    m0, f0 = mds(), fuse()
    for i in range(n): op(i)
    time.sleep(1.2)  # background work the syscalls queued counts too
    m1, f1 = mds(), fuse()
    def per(a, b):
        return ", ".join(f"{k} {(b[k]-a.get(k,0))/n:.2f}" for k in sorted(b)
                         if b[k] - a.get(k, 0) > 0 and k not in ("session_heartbeat", "target_heartbeat"))
    print(f"{name:13s} MDS: {per(m0, m1) or '-'}\n{'':13s} FUSE: {per(f0, f1) or '-'}")
base = dbg + "/cost"
os.mkdir(base)
def fresh(sub):
    p = f"{base}/{sub}"
    os.mkdir(p)
    return p
p = fresh("create")
measure("create", lambda: None,
        lambda i: os.close(os.open(f"{p}/f{i}", os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)))
measure("stat", lambda: [os.stat(f"{p}/f{i}") for i in range(n)], lambda i: os.stat(f"{p}/f{i}"), settle=False)
measure("open+close", lambda: None, lambda i: os.close(os.open(f"{p}/f{i}", os.O_RDONLY)))
measure("unlink", lambda: None, lambda i: os.unlink(f"{p}/f{i}"))
q = fresh("cold")
oq = other + "/cost/cold"
measure("stat-cold", lambda: [os.close(os.open(f"{oq}/f{i}", os.O_CREAT | os.O_WRONLY, 0o644)) for i in range(n)],
        lambda i: os.stat(f"{q}/f{i}"))
def missing(i):
    for _ in range(2):
        try: os.stat(f"{q}/missing{i}")
        except FileNotFoundError: pass
measure("stat-missing2", lambda: None, missing)
r = fresh("dirs")
measure("mkdir", lambda: None, lambda i: os.mkdir(f"{r}/d{i}"))
measure("rmdir", lambda: None, lambda i: os.rmdir(f"{r}/d{i}"))
w = fresh("cpp")
def write_times_mode(i):
    fd = os.open(f"{w}/f{i}", os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    os.write(fd, b"x" * 4096)
    os.utime(fd, ns=(1000000000 * 10**9, 1000000001 * 10**9))
    os.fchmod(fd, 0o644)
    os.close(fd)
measure("write+futimens+fchmod", lambda: None, write_times_mode)
acl = bytes([2,0,0,0, 1,0,6,0,255,255,255,255, 4,0,4,0,255,255,255,255, 32,0,4,0,255,255,255,255])
def set_acl(i):
    try: os.setxattr(f"{w}/f{i}", "system.posix_acl_access", acl)
    except OSError: pass
measure("setxattr-acl", lambda: None, set_acl)
# cp -a and rm -rf of a tree: n files of 1 KiB, n/10 directories holding
# them, n/10 symlinks; counted per entry.
src = d + "/cp-src"
def make_tree():
    dirs = max(1, n // 10)
    for k in range(dirs): os.makedirs(f"{src}/d{k}")
    for i in range(n):
        with open(f"{src}/d{i % dirs}/f{i}.h", "wb") as f: f.write(b"y" * 1024)
    for k in range(dirs): os.symlink(f"f{k}.h", f"{src}/d{k}/l{k}.h")
    return dirs * 2 + n + 1
entries = make_tree()
def tree(name, fn):
    time.sleep(1.5)
    m0, f0 = mds(), fuse()
    fn()
    time.sleep(1.2)
    m1, f1 = mds(), fuse()
    def per(a, b):
        return ", ".join(f"{k} {(b[k]-a.get(k,0))/entries:.2f}" for k in sorted(b)
                         if b[k] - a.get(k, 0) > 0 and k not in ("session_heartbeat", "target_heartbeat"))
    print(f"{name:13s} ({entries} entries) MDS: {per(m0, m1) or '-'}\n{'':13s} FUSE: {per(f0, f1) or '-'}")
import subprocess
tree("cp -a", lambda: subprocess.run(["cp", "-a", src, base + "/tree"], check=True))
tree("rm -rf", lambda: subprocess.run(["rm", "-rf", base + "/tree"], check=True))
PY
