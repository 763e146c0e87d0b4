#!/bin/sh
# bench_smoke.sh — smoke test of larch-bench and scripts/bench-vs-zookeeper.
#
# usage: tests/bench_smoke.sh [LARCH_BENCH [LARCHD]]
#   (or env LARCH_BENCH / LARCHD; defaults: build/bench/larch-bench, build/server/larchd)
#
# 1. larch-bench refuses a bad argument with exit status 2 and a message that
#    names it.
# 2. A --quick comparison (about 15 s; bounded at 85 s) starts stock
#    ZooKeeper and larchd, and must produce a JSON line with non-zero ops/s
#    for both servers in every case, and the side-by-side table.
# Exit 0 when all holds, 1 otherwise (with the reason and the script's log).
set -u

root=$(cd "$(dirname "$0")/.." && pwd)
bench=${1:-${LARCH_BENCH:-$root/build/bench/larch-bench}}
larchd=${2:-${LARCHD:-$root/build/server/larchd}}
out=$(mktemp -d "${TMPDIR:-/tmp}/larch-bench-smoke.XXXXXX") || exit 1
trap 'rm -rf "$out"' EXIT INT TERM

fail() {
    echo "bench_smoke: FAIL: $*" >&2
    for f in "$out/stderr" "$out/stdout"; do
        [ -s "$f" ] && { echo "--- $f" >&2; tail -n 30 "$f" >&2; }
    done
    exit 1
}

for bin in "$bench" "$larchd"; do
    [ -x "$bin" ] || fail "$bin is not built"
done

# 1. argument errors
msg=$("$bench" --read-ratio 120 2>&1)
rc=$?
[ "$rc" -eq 2 ] || fail "larch-bench --read-ratio 120 exited $rc, expected 2"
echo "$msg" | grep -qx "larch-bench: --read-ratio: '120' is not in 0..100" ||
    fail "unexpected message for --read-ratio 120: $msg"
msg=$("$bench" --sessions 2>&1)
rc=$?
[ "$rc" -eq 2 ] && echo "$msg" | grep -qx "larch-bench: --sessions: needs a value" ||
    fail "larch-bench --sessions: exit $rc, message: $msg"

# 2. the comparison, quick
timeout 85 "$root/scripts/bench-vs-zookeeper" --quick --duration 1 --no-plot \
    --bench "$bench" --larchd "$larchd" --out "$out/run" >"$out/stdout" 2>"$out/stderr"
rc=$?
[ "$rc" -eq 0 ] || fail "bench-vs-zookeeper exited $rc"

python3 - "$out/run/results.jsonl" <<'PY' || fail "results.jsonl check failed"
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
seen = {}
for r in rows:
    key = (r["label"], r["case"], r["read_ratio"])
    seen[key] = r
    if not r["ops_per_s"] > 0:
        sys.exit("no throughput for %s" % (key,))
    if r["errors_total"] or r["sessions_lost"]:
        sys.exit("errors for %s: %s, sessions lost %s" % (key, r["errors"], r["sessions_lost"]))
for label in ("zookeeper", "larchd"):
    for case in ("throughput", "latency"):
        if not any(k[0] == label and k[1] == case for k in seen):
            sys.exit("no %s result for %s" % (case, label))
print("bench_smoke: %d runs with non-zero ops/s for both servers" % len(rows))
PY

grep -q "^workload .*| *zookeeper *larchd *x" "$out/stdout" || fail "no table header"
grep -q "^90% reads 8x8 " "$out/stdout" || fail "no 90% row in the table"
grep -q "^100% reads 1x1 " "$out/stdout" || fail "no single-connection row in the table"
echo "bench_smoke: ok"
exit 0
