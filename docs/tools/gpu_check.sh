#!/usr/bin/env bash
# The GPU's figures in one go, for a machine with one CUDA GPU (docs/benchmarks.md, "GPU"):
#   bash docs/tools/gpu_check.sh OUT_DIR [SECONDS]
# in this order, in OUT_DIR/report.txt: the machine; the CUDA tests (tests/test_cuda.py, which the
# CPU suite skips); the USI engine's NPS at 10x192 and BatchSize 256; self-play's speed with
# +experiment=gpu's settings; then, through docs/tools/gpu_train.sh, `azshogi +experiment=gpu
# run=gpu-check` (gpu-check-train.txt) until SECONDS after the start (default 540) less a minute for
# what follows, Ctrl-C'd, and the networks of four of its checkpoints, spread over the run
# (gpu-check-networks.tar), and the run's log folder (gpu-check-logs.tgz) for matches and
# TensorBoard elsewhere. A step that fails or runs out its
# time is noted in its file and the next one runs.
# GPU_CHECK_DEVICE=cpu GPU_CHECK_EXTRA="model=small ..." make a dry run on a CPU; PYTHON picks the
# interpreter (default python3, with azshogi installed: `pip install -e .`; from a bare copy of the
# repository, `ln -s ../conf azshogi/conf` lets Hydra find the settings instead).
set -u
out=${1:?usage: gpu_check.sh OUT_DIR [SECONDS]}
budget=${2:-540}
start=$(date +%s)
py=${PYTHON:-python3}
device=${GPU_CHECK_DEVICE:-cuda}
extra=${GPU_CHECK_EXTRA:-}
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

step cuda_tests.txt 150 "$py" -m pytest -q -m cuda -p no:cacheprovider tests/test_cuda.py
step usi_bench.txt 75 "$py" -m azshogi.commands.bench usi --model 10x192 --repeats 1 \
  --option Device="$device" --option BatchSize=256
step selfplay_bench.txt 110 "$py" -m azshogi.commands.bench +experiment=gpu device="$device" \
  bench.seconds=8 bench.warmup_seconds=5 bench.repeats=3 $extra
for f in machine cuda_tests usi_bench selfplay_bench; do cat "$out/$f.txt"; echo; rm "$out/$f.txt"; done >"$out/report.txt"

left=$(( start + budget - 60 - $(date +%s) ))
if [ "$left" -gt 30 ]; then
  PYTHON="$py" GPU_TRAIN_DEVICE="$device" GPU_TRAIN_FRESH=1 bash "$(dirname "$0")/gpu_train.sh" "$out" "$left" $run +experiment=gpu $extra
else
  echo "no time left to train ($left s)" | tee "$out/$run-train.txt"
fi
echo "done after $(( $(date +%s) - start )) s"
