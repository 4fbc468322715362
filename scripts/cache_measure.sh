#!/bin/bash
# Times `passel run` on a generated chain without a cache, with an empty cache, warm, and
# after a one-function edit, and checks the outputs are byte-identical (docs/incremental.md).
# Usage: measure.sh BIN N
P=$1; N=$2; D=/tmp/passel-measure; rm -rf $D; mkdir -p $D
$P gen chain --functions $N --ops 50 --seed 1 > $D/chain.pir
python3 - $D <<'PY'
import sys,re
d=sys.argv[1]; s=open(d+'/chain.pir').read()
# edit one constant-free op in the middle function: first "add(" after the middle "def "
defs=[m.start() for m in re.finditer(r'^def ', s, re.M)]
mid=defs[len(defs)//2]; i=s.index('add(', mid)
open(d+'/edited.pir','w').write(s[:i]+'subtract('+s[i+4:])
PY
t() { local s=$(date +%s.%N); "$@" > /dev/null 2>$D/err; local e=$(date +%s.%N); printf "%-14s %.3f s  %s\n" "$LABEL" $(echo "$e - $s" | bc) "$(grep -h '^cache' $D/err | cut -c1-90)"; }
for r in 1 2; do
LABEL=cold t $P run $D/chain.pir -j 2 -o $D/cold.pir
rm -rf $D/cache
LABEL=cache-cold t $P run $D/chain.pir -j 2 --cache $D/cache -o $D/c1.pir
LABEL=cache-warm t $P run $D/chain.pir -j 2 --cache $D/cache -o $D/c2.pir
LABEL=cache-edit t $P run $D/edited.pir -j 2 --cache $D/cache -o $D/c3.pir
LABEL=edit-cold t $P run $D/edited.pir -j 2 -o $D/e.pir
done
cmp $D/cold.pir $D/c1.pir && cmp $D/cold.pir $D/c2.pir && cmp $D/e.pir $D/c3.pir && echo outputs-identical
$P cache stats --cache $D/cache
