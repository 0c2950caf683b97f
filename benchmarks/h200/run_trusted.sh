#!/bin/bash
# The H200 session of issue 11/12 in benchmarks/RESULTS.md, from the repository root, with the
# binary and its libraries in .device/ and a carried bubblewrap in .device/probe/ (wrapper bwrap.sh).
#   run_trusted.sh OUT smoke   small shapes: the judge, the sandbox and the cheat corpus on CUDA
#   run_trusted.sh OUT cost    full shapes: per-candidate cost before/after/sandboxed, both examples
#   run_trusted.sh OUT run     a full kagent-actors NVIDIA run on matvec (real ncu), sandboxed
#   run_trusted.sh OUT run_every  the same with profile: every (each verified candidate profiled)
#   run_trusted.sh OUT run_rmsnorm  the full run on RMSNorm (nvidia_rmsnorm.yaml, replay_rmsnorm)
#   run_trusted.sh OUT timeout    candidate_timeout_s 15 s against the replay set's hanging kernel
#   run_trusted.sh OUT busy_fixed / busy_auto   20 s LLM replies (KAGENT_REPLAY_DELAY_S): rounds with
#                  num_workers 4, and async with num_workers: auto; GPU busy in summary_$what.json
#   run_trusted.sh OUT busy_tune  busy_auto with tune_variants: 8 (nvidia_matvec_tune.yaml): launch-constant
#                  variants of the beam's kernels run while the search waits for the LLM
#   run_trusted.sh OUT busy_wide  the same (20 s replies, async, auto) with a wider search:
#                  nvidia_matvec_wide.yaml, replay set replay_matvec_wide (make_replay_wide.py);
#                  busy_wide_fixed: nvidia_matvec_wide_fixed.yaml (num_workers fixed). These also
#                  keep events.jsonl, program.db, the run's file times and an nvidia-smi sample log.
set -u
out=${1:?out}; what=${2:?what}
root=$(pwd)
mkdir -p "$out"
bw=$root/.device/probe/bwrap.sh
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)'; } > "$out/machine.txt" 2>&1
case $what in
smoke)
  timeout 240 python3 benchmarks/trusted_cost.py --kernel-dir examples/optimize_01_matvec \
    --candidates examples/optimize_01_matvec/replay --size small --warmup 5 --repeat 20 \
    --cheats tests/cheats/matvec --bwrap "$bw" --peak-gbps 4800 --json "$out/smoke.json" > "$out/smoke.txt" 2>&1
  echo "rc=$?" >> "$out/smoke.txt" ;;
cost)
  timeout 420 python3 benchmarks/trusted_cost.py --kernel-dir examples/optimize_01_matvec \
    --candidates benchmarks/h200/replay_matvec --cheats tests/cheats/matvec --bwrap "$bw" --peak-gbps 4800 \
    --warmup 10 --repeat 50 --no-back-to-back --json "$out/cost_matvec.json" > "$out/cost_matvec.txt" 2>&1
  echo "rc=$?" >> "$out/cost_matvec.txt" ;;
cost2)
  timeout 200 python3 benchmarks/trusted_cost.py --kernel-dir examples/optimize_02_rmsnorm \
    --candidates benchmarks/h200/replay_rmsnorm --peak-gbps 4800 \
    --warmup 10 --repeat 50 --no-back-to-back --json "$out/cost_rmsnorm.json" > "$out/cost_rmsnorm.txt" 2>&1
  echo "rc=$?" >> "$out/cost_rmsnorm.txt" ;;
run|run_rmsnorm|short|run_every|busy_fixed|busy_auto|busy_tune|busy_wide|busy_wide_fixed|timeout)
  cfg=benchmarks/h200/nvidia_matvec.yaml
  kdir=examples/optimize_01_matvec
  [ "$what" = run_rmsnorm ] && cfg=benchmarks/h200/nvidia_rmsnorm.yaml && kdir=examples/optimize_02_rmsnorm
  [ "$what" = short ] && cfg=benchmarks/h200/nvidia_matvec_short.yaml
  [ "$what" = run_every ] && cfg=benchmarks/h200/nvidia_matvec_every.yaml
  [ "$what" = timeout ] && cfg=benchmarks/h200/nvidia_matvec_timeout.yaml
  [ "$what" = busy_fixed ] && export KAGENT_REPLAY_DELAY_S=20
  [ "$what" = busy_auto ] && export KAGENT_REPLAY_DELAY_S=20 && cfg=benchmarks/h200/nvidia_matvec_auto.yaml
  [ "$what" = busy_tune ] && export KAGENT_REPLAY_DELAY_S=20 && cfg=benchmarks/h200/nvidia_matvec_tune.yaml
  [ "$what" = busy_wide ] && export KAGENT_REPLAY_DELAY_S=20 && cfg=benchmarks/h200/nvidia_matvec_wide.yaml
  [ "$what" = busy_wide_fixed ] && export KAGENT_REPLAY_DELAY_S=20 && cfg=benchmarks/h200/nvidia_matvec_wide_fixed.yaml
  # The lent card may be an H100: the config names the card the machine has (specs, physics floor).
  card=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
  if [ -n "$card" ]; then
    sed "s/^gpu_name: .*/gpu_name: $card/" "$cfg" > "$out/config_$what.yaml" && cfg="$out/config_$what.yaml"
  fi
  # busy_tune with TUNE_VARIANTS=N: that many variants per kernel instead of the config's 8.
  if [ "$what" = busy_tune ] && [ -n "${TUNE_VARIANTS:-}" ]; then
    sed "s/^tune_variants: .*/tune_variants: $TUNE_VARIANTS/" "$cfg" > "$out/config_tune_$TUNE_VARIANTS.yaml"
    cfg="$out/config_tune_$TUNE_VARIANTS.yaml"
  fi
  smi=
  case $what in busy_wide*|busy_auto|busy_tune)
    # The device's own view beside the run's device seconds: kernel-active share per sample.
    nvidia-smi --query-gpu=timestamp,utilization.gpu,memory.used,power.draw --format=csv,noheader -lms 500 \
      > "$out/smi_$what.csv" 2>&1 &
    smi=$! ;;
  esac
  ( sleep 30; for p in $(pgrep -f "worker.py --zygote"); do echo "zygote $p"; grep -E "address space|data size|processes" /proc/$p/limits; done ) > "$out/limits.txt" 2>&1 &
  export LD_LIBRARY_PATH=$root/.device/lib KAGENT_HOME=$root KAGENT_PYTHON=python3 KAGENT_BWRAP=$bw
  t0=$(date +%s.%N)
  timeout ${RUN_LIMIT_S:-250} "$root/.device/kagent-actors" --strategy $cfg \
    --kernel-dir $kdir --run-dir "$out/runs" > "$out/run_$what.log" 2>&1
  echo "rc=$? wall_s=$(python3 -c "print(round($(date +%s.%N) - $t0, 1))") t0=$t0" >> "$out/run_$what.log"
  [ -n "$smi" ] && kill "$smi" 2>/dev/null
  d=$(ls -d "$out"/runs/*/ | head -1)
  cp "$d/summary.json" "$out/summary_$what.json" 2>/dev/null
  find "$d" -name invocations.jsonl | while read -r f; do echo "$f $(python3 -c "import json,sys; print(sum(json.loads(l).get('wall_s',0) for l in open(sys.argv[1]) if l.strip()))" "$f")"; done > "$out/profiles_$what.txt" 2>&1
  # Each profiler process: its name, wall and verdict (a standby's says how long before its batch it started).
  find "$d" -name invocations.jsonl | sort | while read -r f; do python3 -c "
import json, sys
for l in open(sys.argv[1]):
    if l.strip():
        j = json.loads(l)
        print(sys.argv[1].split('/runs/')[-1].split('/', 1)[-1], '|', j.get('name'), '|', round(j.get('wall_s', 0), 2), '|', (j.get('verdict') or '')[:160])
" "$f"; done > "$out/invocations_$what.txt" 2>&1
  # The wrapper's phase stamps (KAGENT_PROFILE_TRACE=1) next to each batch's wall from its hand-over.
  find "$d" -name invocations.jsonl | sort | while read -r f; do python3 -c "
import json, re, sys
for l in open(sys.argv[1]):
    j = json.loads(l) if l.strip() else {}
    found = re.findall(r'\[profile_wrapper ([0-9.]+)\] ([^\n]+)', j.get('output_tail', ''))
    marks = dict((m[1].strip(), float(m[0])) for m in found)
    if 'batch received' in marks and 'batch done' in marks:
        t0 = marks['batch received']
        work = marks['batch done'] - t0
        # Every phase between them (the kernel's first call, i.e. its compile under ncu; the measured call).
        phases = ', '.join(f'{w} +{float(t) - t0:.2f}' for t, w in found if t0 < float(t) < marks['batch done'])
        print(sys.argv[1].split('/runs/')[-1].split('/', 1)[-1], '| wall', round(j.get('wall_s', 0), 2), '| received to done',
              round(work, 2), '| after done', round(j.get('wall_s', 0) - work, 2), '|', phases)
" "$f"; done > "$out/marks_$what.txt" 2>&1
  sqlite3 "$d/program.db" 'select id, status, time_ms, failure_cause, floor_pct, substr(error,1,120) from programs' > "$out/programs_$what.txt" 2>&1 \
    || python3 -c "import sqlite3,sys; [print(r) for r in sqlite3.connect(sys.argv[1]).execute('select id, status, time_ms, failure_cause, floor_pct, substr(error,1,120) from programs')]" "$d/program.db" > "$out/programs_$what.txt" 2>&1
  tail -c 3000 "$d"/workers/gpu0/server.log > "$out/server_log_tail.txt" 2>/dev/null
  grep -h "judge:" "$d"/workers/gpu0/server.log > "$out/judge_lines_$what.txt" 2>/dev/null
  { ls -la "$d"/workers/gpu0/launchers/shared 2>&1; tail -c 2000 "$d"/workers/gpu0/launchers/build.log 2>&1; } > "$out/launchers_$what.txt"
  grep -h '"concurrency"' "$d"/events.jsonl > "$out/concurrency_$what.txt" 2>/dev/null
  grep -hE '"(candidate_start|candidate_result|note|error)"' "$d"/events.jsonl | cut -c1-400 > "$out/results_$what.txt" 2>/dev/null
  # Where each candidate's device steps went (device_steps.jsonl) and how each test.py ran.
  find "$d"/candidates -name device_steps.jsonl | sort | while read -r f; do echo "== ${f#$d}"; cat "$f"; done \
    > "$out/device_steps_$what.txt" 2>/dev/null
  head -qn1 "$d"/candidates/*/user_test.log > "$out/user_test_heads_$what.txt" 2>/dev/null
  grep -h '"start_checked"\|"initial"' "$d"/events.jsonl > "$out/start_$what.txt" 2>/dev/null
  case $what in busy_wide*|busy_auto|busy_tune)
    cp "$d/events.jsonl" "$out/events_$what.jsonl" 2>/dev/null
    cp "$d/program.db" "$out/program_$what.db" 2>/dev/null
    # When each step of each candidate wrote its files (prompt, reply, kernel.py, logs): the timeline.
    find "$d" -type f -printf '%T@ %s %P\n' | sort -n > "$out/files_$what.txt" 2>/dev/null ;;
  esac
  rm -rf "$out/runs" ;;
esac
exit 0
