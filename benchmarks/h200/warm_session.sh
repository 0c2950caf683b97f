#!/bin/bash
# One device call: matvec's cost of trust side by side (speed_session.sh ONLY=matvec: this tree
# against .device/before_tree), then one cold matvec run (run_trusted.sh run, beam 2x3, 2 rounds,
# instant replay replies, real ncu, no cache) for the device seconds per candidate. Files come back
# as $OUT/sp.tgz and $OUT/run.tgz. From the repository root with .device/ packed, carry [".device"].
set -u
root=$(pwd); final=${OUT:?}
ONLY=matvec PASS_S=${PASS_S:-80} bash benchmarks/h200/speed_session.sh | tail -8
export KAGENT_NCU_STANDBY=1
rm -rf /tmp/run1
KAGENT_CACHE_DIR=off RUN_LIMIT_S=${RUN_S:-110} bash benchmarks/h200/run_trusted.sh /tmp/run1 run > /tmp/run1.sh.txt 2>&1
find /tmp/run1 -name '*.so' -delete
find /tmp/run1 \( -name '*inductor*' -o -name '.triton_cache' -o -name 'program_*.db' \) -prune -exec rm -rf {} + 2>/dev/null
tar czf $final/run.tgz -C /tmp run1 run1.sh.txt
python3 -c "
import json; d = json.load(open('/tmp/run1/summary_run.json'))
print('device_s', round(d['device_s'], 1), 'candidates', d.get('candidates_total', ''), 'busy', round(d.get('gpu_busy_pct', 0), 1), 'best', d.get('best_ms'), 'wall', round(d.get('session_wall_s', 0), 1))"
cat /tmp/run1/programs_run.txt | cut -c1-160
