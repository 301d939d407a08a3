#!/bin/bash
# libsurge_dev_test.sh: the libsurge0 and libsurge-dev packages are enough to
# build and run a program against Surge. cpack makes the two packages, they
# are unpacked (dpkg -x) into a scratch root, and two programs
# (consumer/roundtrip.c, consumer/roundtrip.cpp) are built against that root
# only, once with pkg-config (surge.pc) and once with CMake
# (find_package(Surge)); each then writes and reads back a file on a local
# cluster (1 surge-mds, 2 surge-ods on 127.0.0.1) started from the build tree.
# Env: SURGE_BUILD_DIR, SURGE_SOURCE_DIR (set by ctest).
set -uo pipefail
src=${SURGE_SOURCE_DIR:?} build=${SURGE_BUILD_DIR:?}
here=$src/tests/deploy
die() { echo "libsurge_dev_test: FAILED: $*" >&2; exit 1; }

job=$(mktemp -d /tmp/surge-libdev.XXXXXX)
pids=()
cleanup() {
  local p
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; done
  wait 2>/dev/null
  rm -rf "$job"
}
trap cleanup EXIT

(cd "$build" && cpack -G DEB -D CPACK_COMPONENTS_ALL="lib;dev" -B "$job/packages") >"$job/cpack.log" 2>&1 ||
  { tail -20 "$job/cpack.log"; die "cpack (lib, dev) in $build"; }
root=$job/root
for p in libsurge0 libsurge-dev; do
  deb=$(ls "$job/packages/${p}_"*.deb 2>/dev/null | head -1)
  [ -n "$deb" ] || die "cpack made no $p package (in $job/packages: $(ls "$job/packages"))"
  dpkg -x "$deb" "$root" || die "dpkg -x $deb"
done
libdir=$(dirname "$(find "$root" -name surge.pc -path '*pkgconfig*' | head -1)")/..
libdir=$(cd "$libdir" && pwd)
soname=$(readelf -d "$libdir/libsurge.so.0" 2>/dev/null | sed -n 's/.*SONAME.*\[\(.*\)\]/\1/p')
[ "$soname" = libsurge.so.0 ] || die "libsurge.so.0 in libsurge0 has SONAME '$soname', not libsurge.so.0"
# The headers must stand alone: nothing of the source tree on the include path.
grep -rhoE '#include "[^"]+"' "$root/usr/include/surge" | grep -v '"surge/' &&
  die "an installed header includes something outside <surge/...>"

# pkg-config
export PKG_CONFIG_PATH=$libdir/pkgconfig
cflags=$(pkg-config --cflags surge) && libs=$(pkg-config --libs surge) || die "pkg-config surge"
mkdir -p "$job/pc"
cc -Wall -Werror -o "$job/pc/roundtrip-c" "$here/consumer/roundtrip.c" $cflags $libs ||
  die "cc against pkg-config surge ($cflags $libs)"
c++ -std=c++20 -Wall -Werror -o "$job/pc/roundtrip-cxx" "$here/consumer/roundtrip.cpp" $cflags $libs ||
  die "c++ against pkg-config surge ($cflags $libs)"
# CMake
cmake -S "$here/consumer" -B "$job/cmake" -G Ninja -DCMAKE_PREFIX_PATH="$root/usr" >"$job/cmake.log" 2>&1 &&
  cmake --build "$job/cmake" >>"$job/cmake.log" 2>&1 || { cat "$job/cmake.log"; die "CMake find_package(Surge) build"; }

# A cluster from the build tree, on loopback.
openssl rand -hex 32 > "$job/cluster.key"
# start NAME BINARY ARGS...: waits for the daemon's "listening on" line.
start() {
  local name=$1; shift
  "$@" >"$job/$name.out" 2>"$job/$name.log" &
  pids+=($!)
  for _ in $(seq 1 100); do
    grep -q "listening on" "$job/$name.out" && return 0
    kill -0 "${pids[-1]}" 2>/dev/null || { cat "$job/$name.log"; die "$name exited at start"; }
    sleep 0.1
  done
  cat "$job/$name.log"; die "$name not listening after 10 s"
}
start mds "$build/mds/surge-mds" --data-dir "$job/mds" --listen tcp://127.0.0.1:0 --cluster-key-file "$job/cluster.key"
mds=$(sed -n 's/.*listening on \(tcp:[^ ]*\).*/\1/p' "$job/mds.out")
for i in 0 1; do
  start "ods$i" "$build/ods/surge-ods" --data-dir "$job/ods$i" --listen tcp://127.0.0.1:0 --mds "$mds" \
    --cluster-key-file "$job/cluster.key"
done

export LD_LIBRARY_PATH=$libdir
for prog in "$job/pc/roundtrip-c" "$job/pc/roundtrip-cxx" "$job/cmake/roundtrip-c" "$job/cmake/roundtrip-cxx"; do
  deps=$(ldd "$prog")
  [[ $deps == *"libsurge.so.0 => $libdir/"* ]] || die "$prog does not load libsurge.so.0 from the package"
  "$prog" "$mds" "$job/cluster.key" "/$(basename "$(dirname "$prog")")-$(basename "$prog")" ||
    die "$prog against the cluster at $mds"
done
echo "libsurge_dev_test: C and C++, pkg-config and CMake, built from the packages and ran against $mds"
