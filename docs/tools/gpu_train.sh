#!/usr/bin/env bash
# Trains a run on one CUDA GPU for a fixed time and brings back what matches elsewhere need:
#   bash docs/tools/gpu_train.sh OUT_DIR SECONDS RUN [OVERRIDE ...]
# runs `azshogi device=cuda run=RUN loop.keep_checkpoints=1000 eval.every=0 OVERRIDE...` from
# scratch (OUT_DIR/RUN-train.txt) until SECONDS have passed, Ctrl-C's it (it stops at once, saving
# a -partial checkpoint), then writes into OUT_DIR/RUN-networks.tar the networks alone
# (azshogi-export network: a few hundred kB for 3x32) of four checkpoints spread over the run, the
# last among them, and of every GPU_TRAIN_EVERY-th one if that is set; and into OUT_DIR/RUN-logs.tgz
# its log folder without the hcpe3 records (the log's lines give each checkpoint's time;
# TensorBoard reads the rest). Unpacked here, `tar xf RUN-networks.tar -C checkpoints` gives
# checkpoints/RUN/ckpt-NNNNN.pt for azshogi-arena's `search:` players.
# GPU_TRAIN_DEVICE=cpu makes a dry run on a CPU; PYTHON picks the interpreter (default python3).
set -u
out=${1:?usage: gpu_train.sh OUT_DIR SECONDS RUN [OVERRIDE ...]}
seconds=${2:?usage: gpu_train.sh OUT_DIR SECONDS RUN [OVERRIDE ...]}
run=${3:?usage: gpu_train.sh OUT_DIR SECONDS RUN [OVERRIDE ...]}
shift 3
py=${PYTHON:-python3}
device=${GPU_TRAIN_DEVICE:-cuda}
every=${GPU_TRAIN_EVERY:-0}
mkdir -p "$out"
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"

rm -rf "checkpoints/$run" "logs/$run"
t0=$(date +%s)
echo "\$ azshogi device=$device run=$run loop.keep_checkpoints=1000 eval.every=0 $*" >"$out/$run-train.txt"
timeout -s INT -k 30 "$seconds" "$py" -m azshogi.commands.train device="$device" run="$run" \
  loop.keep_checkpoints=1000 eval.every=0 "$@" >>"$out/$run-train.txt" 2>&1
echo "[exit $? after $(( $(date +%s) - t0 )) s]" >>"$out/$run-train.txt"

"$py" - "$run" "$out" "$every" <<'EOF' 2>&1 | tee -a "$out/$run-train.txt"
import sys
import tempfile
import tarfile
from pathlib import Path
from azshogi.commands.export import export_network
from azshogi.formats.checkpoint import list_checkpoints
from azshogi.formats.paths import checkpoint_number

run, out, every = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3])
full = [p for p in list_checkpoints(Path("checkpoints") / run) if "partial" not in p.name]
picked = {full[round(i * (len(full) - 1) / 3)] for i in range(4)} if full else set()
if every > 0:
    picked |= {p for p in full if checkpoint_number(p)[0] % every == 0}
with tempfile.TemporaryDirectory() as tmp, tarfile.open(out / f"{run}-networks.tar", "w") as tar:
    for path in sorted(picked):
        network = export_network(path, Path(tmp) / path.name)
        tar.add(network, arcname=f"{run}/{path.name}")
print(f"{len(full)} checkpoints in checkpoints/{run}; the networks of {len(picked)} in {out}/{run}-networks.tar:",
      " ".join(p.name for p in sorted(picked)))
EOF
tar czf "$out/$run-logs.tgz" --exclude=hcpe3 "logs/$run" 2>/dev/null
echo "gpu_train.sh: done after $(( $(date +%s) - t0 )) s"
