# Sourced by the CPU-per-operation benchmarks (bench_create_cpu.sh,
# bench_fuse_floor.sh).
# per_op FILE N: "CPU_US SWITCHES" per op from a `perf stat -e
# task-clock,context-switches` output file, over N operations.
per_op() {
  python3 - "$1" "$2" <<'PY'
import re, sys
cpu = sw = 0.0
for line in open(sys.argv[1]):
    m = re.match(r"\s*([\d,.]+)\s+(msec task-clock|context-switches)", line)
    if m:
        v = float(m.group(1).replace(",", ""))
        if "task" in m.group(2):
            cpu = v
        else:
            sw = v
n = int(sys.argv[2])
print("%.1f %.2f" % (cpu * 1000 / n, sw / n))
PY
}
