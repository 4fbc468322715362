#!/bin/bash
# Whole-process CPU time (user + sys) of `passel run FILE -O3 -j 2` on a generated chain: no
# cache, filling an empty cache, warm with no change, after a one-function edit, and the same
# through Redis on localhost from three "machines" (their own empty local directories); every
# cached output is compared with `cmp` to the run without a cache (docs/incremental.md).
# Usage: cache_measure.sh BIN [FUNCTIONS] [OPS]   (Redis runs only when redis-server exists)
set -u
P=$1; N=${2:-10000}; OPS=${3:-10}
D=$(mktemp -d /tmp/passel-measure.XXXXXX)
$P gen chain --functions "$N" --ops "$OPS" --seed 1 > "$D/chain.pir"
python3 - "$D" <<'PY'
import sys, re
d = sys.argv[1]; s = open(d + '/chain.pir').read()
# One constant of the middle function changed: a body edit with the same signature.
defs = [m.start() for m in re.finditer(r'^def ', s, re.M)]
mid = defs[len(defs) // 2]; end = defs[len(defs) // 2 + 1]
m = re.compile(r'-?\d+\.\d+f').search(s, mid, end)
if m is None:
    i = s.index('add(', mid); s2 = s[:i] + 'subtract(' + s[i + 4:]
else:
    s2 = s[:m.start()] + '0.8125f' + s[m.end():]
open(d + '/edited.pir', 'w').write(s2)
PY
t() {
  local label=$1; shift
  /usr/bin/time -f '%U %S' -o "$D/time" "$@" > /dev/null 2> "$D/err"
  local cpu; cpu=$(tail -1 "$D/time" | awk '{printf "%.2f", $1 + $2}')
  printf "%-34s %6s s  %s\n" "$label" "$cpu" "$(grep -h '^cache' "$D/err" | cut -c1-110)"
}
t "cold, no cache" "$P" run -O3 -j 2 "$D/chain.pir" -o "$D/cold.pir"
t "edited file, no cache" "$P" run -O3 -j 2 "$D/edited.pir" -o "$D/cold-edit.pir"
t "first run, empty cache" "$P" run -O3 -j 2 "$D/chain.pir" --cache "$D/cache" -o "$D/c1.pir"
t "warm, no change" "$P" run -O3 -j 2 "$D/chain.pir" --cache "$D/cache" -o "$D/c2.pir"
t "warm, one-function edit" "$P" run -O3 -j 2 "$D/edited.pir" --cache "$D/cache" -o "$D/c3.pir"
cmp "$D/cold.pir" "$D/c1.pir" && cmp "$D/cold.pir" "$D/c2.pir" && cmp "$D/cold-edit.pir" "$D/c3.pir" && echo "disk: outputs identical"
if command -v redis-server > /dev/null; then
  PORT=6397
  redis-server --port $PORT --save '' --appendonly no --daemonize yes --pidfile "$D/redis.pid" > /dev/null
  sleep 0.5
  R=redis://127.0.0.1:$PORT/0
  t "redis A: empty server" "$P" run -O3 -j 2 "$D/chain.pir" --cache $R --cache-local "$D/A" -o "$D/r1.pir"
  t "redis B: warm server, same file" "$P" run -O3 -j 2 "$D/chain.pir" --cache $R --cache-local "$D/B" -o "$D/r2.pir"
  t "redis C: warm server, edited file" "$P" run -O3 -j 2 "$D/edited.pir" --cache $R --cache-local "$D/C" -o "$D/r3.pir"
  kill "$(cat "$D/redis.pid")"
  cmp "$D/cold.pir" "$D/r1.pir" && cmp "$D/cold.pir" "$D/r2.pir" && cmp "$D/cold-edit.pir" "$D/r3.pir" && echo "redis: outputs identical"
fi
du -sh "$D/cache"
rm -rf "$D"
