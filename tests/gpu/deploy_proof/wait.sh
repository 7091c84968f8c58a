#!/bin/bash
# wait.sh SECONDS: wait for full.sh's done marker (or SECONDS), packing /tmp/h200 into $OUT
# every 10 s so that what ran comes back even if this call is cut short.
L=/tmp/h200; end=$(( $(date +%s) + ${1:-560} ))
pack() { tar -czf "$OUT/h200.tgz.part" -C /tmp h200 2>/dev/null && mv -f "$OUT/h200.tgz.part" "$OUT/h200.tgz"; }
n=0
while [ ! -e $L/done ] && [ "$(date +%s)" -lt "$end" ]; do
  sleep 2; n=$((n + 1)); [ $((n % 5)) -eq 0 ] && pack
done
pack
echo "--- steps"; cat $L/steps.txt 2>/dev/null
last=$(ls -t $L/*.txt 2>/dev/null | grep -v steps.txt | head -1)
echo "--- tail of $last"; tail -c 2500 "$last" 2>/dev/null
[ -e $L/done ] && echo "DONE: $(cat $L/done)"
