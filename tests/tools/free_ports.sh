# Sourced by the launcher's shell tests: free PORT says nobody answers on
# 127.0.0.1:PORT; pick_base_port sets base to a port whose MDS and three
# data-server ports (base .. base+3) are all free, or fails the test.
free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
pick_base_port() {
  base=""
  local p
  for _ in $(seq 1 50); do
    p=$((20000 + RANDOM % 9000))
    if free "$p" && free $((p + 1)) && free $((p + 2)) && free $((p + 3)); then base=$p; return 0; fi
  done
  echo "FAIL: no four free ports found"
  exit 1
}
