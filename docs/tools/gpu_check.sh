#!/usr/bin/env bash
# The GPU's figures in one call, for a machine with one CUDA GPU (docs/benchmarks.md, "GPU"):
#   bash docs/tools/gpu_check.sh OUT_DIR [SECONDS]
# in this order, into OUT_DIR: machine.txt; the CUDA tests (tests/test_cuda.py, which the CPU
# suite skips); the self-play sweep (azshogi-bench: +experiment=gpu's 3x32 network with
# GPU_CHECK_ACTORS games in flight, then 10x192 with Gumbel 32/16 at GPU_CHECK_BIG_ACTORS), each
# against the network alone at the same batch; the training step (azshogi-bench bench.train=true:
# ms a step, host syncs a step); then, through docs/tools/gpu_train.sh, `azshogi +experiment=gpu
# run=gpu-check` until SECONDS after the start (default 540) less a minute, its checkpoint lines
# in report.txt (a checkpoint's wall time and where it went). report.txt holds every step's
# output; table.md the sweep's table as docs/benchmarks.md shows it. A step that fails or runs
# out its time is noted in its file and the next one runs.
# GPU_CHECK_DEVICE=cpu GPU_CHECK_EXTRA="model=tiny ..." GPU_CHECK_ACTORS="16 32" GPU_CHECK_BIG_ACTORS=32
# GPU_CHECK_BIG="model=tiny" make a dry run on a CPU; GPU_CHECK_GRAPHS=1 adds the 3x32 sweep's
# first size with CUDA graphs (inference.compile=true inference.cuda_graphs=true: compiling costs
# about 15 s per batch bucket on a cold cache). PYTHON picks the interpreter (default python3, with
# azshogi installed: `pip install -e .`; from a bare copy of the repository, `ln -s ../conf
# azshogi/conf` lets Hydra find the settings instead).
set -u
out=${1:?usage: gpu_check.sh OUT_DIR [SECONDS]}
budget=${2:-540}
start=$(date +%s)
py=${PYTHON:-python3}
device=${GPU_CHECK_DEVICE:-cuda}
extra=${GPU_CHECK_EXTRA:-}
actors=${GPU_CHECK_ACTORS:-512 1024 2048 4096}
big_actors=${GPU_CHECK_BIG_ACTORS:-1024 4096}
big=${GPU_CHECK_BIG:-model.blocks=10 model.channels=192 search.num_simulations=32 search.max_num_considered_actions=16}
run=gpu-check
mkdir -p "$out"
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
if ! "$py" -c "import azshogi.conf" 2>/dev/null; then
  echo "gpu_check.sh: $py cannot import azshogi's settings (azshogi.conf): pip install -e . first" >&2
  exit 2
fi

step() {  # step FILE SECONDS COMMAND...: runs COMMAND with a time limit, its output in OUT_DIR/FILE
  local file=$1 limit=$2; shift 2
  local t0=$(date +%s)
  echo "\$ $*" >"$out/$file"
  timeout -s INT -k 20 "$limit" "$@" >>"$out/$file" 2>&1
  local rc=$?
  echo "[exit $rc after $(( $(date +%s) - t0 )) s]" >>"$out/$file"
  echo "$file: exit $rc, $(( $(date +%s) - t0 )) s"
}

{ date -u; nvidia-smi -L; nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,power.limit --format=csv
  nproc; free -g | head -2
  "$py" -c "import sys, torch, numpy, cshogi; print(sys.version.split()[0], 'torch', torch.__version__,
'cuda', torch.version.cuda, torch.cuda.is_available() and torch.cuda.get_device_name(), 'numpy',
numpy.__version__)"; "$py" -m pip list 2>/dev/null | grep -i -E "^(cshogi|hydra-core|tqdm) "; git log -1 --format='commit %h %s' 2>/dev/null
} >"$out/machine.txt" 2>&1
cat "$out/machine.txt"

bench=("$py" -m azshogi.commands.bench +experiment=gpu device="$device" bench.seconds=4 bench.warmup_seconds=3
       bench.repeats=2)
step cuda_tests.txt 130 "$py" -m pytest -q -m cuda -p no:cacheprovider tests/test_cuda.py
files=(machine cuda_tests)
for a in $actors; do
  step "sweep-small-$a.txt" 45 "${bench[@]}" selfplay.num_actors="$a" $extra
  files+=("sweep-small-$a")
done
if [ "${GPU_CHECK_GRAPHS:-0}" = 1 ]; then
  a=${actors%% *}
  step "sweep-graphs-$a.txt" 150 "${bench[@]}" selfplay.num_actors="$a" inference.compile=true \
    inference.cuda_graphs=true $extra
  files+=("sweep-graphs-$a")
fi
for a in $big_actors; do
  step "sweep-big-$a.txt" 50 "${bench[@]}" selfplay.num_actors="$a" $big $extra
  files+=("sweep-big-$a")
done
step train_step.txt 60 "$py" -m azshogi.commands.bench +experiment=gpu device="$device" bench.train=true \
  bench.seconds=4 bench.warmup_seconds=2 bench.repeats=3 $extra
files+=(train_step)

# The sweep's table (docs/benchmarks.md): each run's JSON line.
"$py" - "$out" "${files[@]:2}" >"$out/table.md" <<'EOF'
import json, sys
from pathlib import Path
out = Path(sys.argv[1])
print("| run | games | network alone (pos/s) | self-play (pos/s) | efficiency | mean batch | workers idle "
      "| device busy | queued behind |")
print("|---|---|---|---|---|---|---|---|---|")
for name in sys.argv[2:]:
    lines = (out / f"{name}.txt").read_text().splitlines()
    try:
        r = json.loads(next(line for line in reversed(lines) if line.startswith("{")))
    except (StopIteration, ValueError):
        print(f"| {name} | (no result: see {name}.txt) |"); continue
    if "ms_per_step" in r:
        print(f"\ntraining step ({r.get('model')}, batch {r.get('batch')}): {r['ms_per_step']} ms, "
              f"{r['host_syncs_per_step']} host syncs a step\n"); continue
    if "efficiency" not in r:
        continue
    t = r.get("timeline_ms") or {}
    print(f"| {name} {r['model']} | {r['actors']} | {r['nn_positions_per_s']:,.0f} | "
          f"{r['selfplay_positions_per_s']:,.0f} | {r['efficiency']:.3f} | {r['mean_batch']:.0f} | "
          f"{r.get('workers_idle')} | {t.get('device_busy', '-')} | {t.get('queued_behind', '-')} |")
EOF
cat "$out/table.md"
for f in "${files[@]}"; do cat "$out/$f.txt"; echo; rm "$out/$f.txt"; done >"$out/report.txt"

left=$(( start + budget - 60 - $(date +%s) ))
if [ "$left" -gt 30 ]; then
  PYTHON="$py" GPU_TRAIN_DEVICE="$device" GPU_TRAIN_FRESH=1 bash "$(dirname "$0")/gpu_train.sh" "$out" "$left" $run +experiment=gpu $extra
  { echo; echo "=== $run: checkpoint lines"; grep -h "checkpoint [0-9]*: step" "$out"/$run-train.txt 2>/dev/null; } >>"$out/report.txt"
else
  echo "no time left to train ($left s)" | tee "$out/$run-train.txt"
fi
echo "done after $(( $(date +%s) - start )) s"
