#!/usr/bin/env bash
# Trains a run on one CUDA GPU for a fixed time and brings back what matches elsewhere need:
#   bash docs/tools/gpu_train.sh OUT_DIR SECONDS RUN [OVERRIDE ...]
# runs `azshogi device=cuda run=RUN loop.keep_checkpoints=1000 eval.every=0 OVERRIDE...` from
# scratch, in checkpoints/RUN and logs/RUN under the current folder (OUT_DIR/RUN-train.txt), until
# it ends or SECONDS have passed; then Ctrl-C stops it after its current step (it saves a -partial
# checkpoint, which is left out below). It writes into OUT_DIR/RUN-networks.tar the networks alone
# (azshogi-export network: a few hundred kB for 3x32) of four checkpoints spread over the run, the
# last among them, and of every GPU_TRAIN_EVERY-th one if that is set; and into OUT_DIR/RUN-logs.tgz
# its log folder without the hcpe3 records (the log's lines give each checkpoint's time;
# TensorBoard reads the rest). Unpacked elsewhere, `tar xf RUN-networks.tar -C checkpoints` gives
# checkpoints/RUN/ckpt-NNNNN.pt for azshogi-arena's `search:` players (over a run of that name
# there, its files of the same names).
# A run of that name already in checkpoints/ or logs/ stops it, unless GPU_TRAIN_FRESH=1 deletes
# it first. It exits 0 when the run ended or was stopped by the time limit and its networks were
# written, else 1. Needs azshogi importable (`pip install -e .`, or this repository as the current
# folder). GPU_TRAIN_DEVICE=cpu makes a dry run on a CPU; PYTHON picks the interpreter (python3).
set -u -o pipefail
usage="usage: gpu_train.sh OUT_DIR SECONDS RUN [OVERRIDE ...]"
out=${1:?$usage}
seconds=${2:?$usage}
run=${3:?$usage}
shift 3
py=${PYTHON:-python3}
device=${GPU_TRAIN_DEVICE:-cuda}
every=${GPU_TRAIN_EVERY:-0}
fail() { echo "gpu_train.sh: $*" >&2; exit 1; }
[[ "$seconds" =~ ^[0-9]+$ ]] || fail "SECONDS must be a whole number of seconds, not '$seconds'"
[[ "$every" =~ ^[0-9]+$ ]] || fail "GPU_TRAIN_EVERY must be a whole number, not '$every'"
for arg in ${@+"$@"}; do
  case "$arg" in
    checkpoint_root=*|log_root=*|run=*) fail "$arg: the run lives in checkpoints/RUN and logs/RUN; name it with RUN" ;;
  esac
done
if [ -e "checkpoints/$run" ] || [ -e "logs/$run" ]; then
  [ "${GPU_TRAIN_FRESH:-0}" = 1 ] || fail "checkpoints/$run or logs/$run exists: another RUN, or GPU_TRAIN_FRESH=1 to delete it"
  rm -rf "checkpoints/$run" "logs/$run"
fi
mkdir -p "$out"
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"

t0=$(date +%s)
echo "\$ azshogi device=$device run=$run loop.keep_checkpoints=1000 eval.every=0 $*" >"$out/$run-train.txt"
timeout -s INT -k 30 "$seconds" "$py" -m azshogi.commands.train device="$device" run="$run" \
  loop.keep_checkpoints=1000 eval.every=0 ${@+"$@"} >>"$out/$run-train.txt" 2>&1
rc=$?
echo "[exit $rc after $(( $(date +%s) - t0 )) s]" >>"$out/$run-train.txt"

"$py" - "$run" "$out" "$every" <<'EOF' 2>&1 | tee -a "$out/$run-train.txt"
import sys
import tempfile
import tarfile
from pathlib import Path
from azshogi.commands.export import export_network
from azshogi.formats.checkpoint import list_checkpoints
from azshogi.formats.paths import checkpoint_number

run, out, every = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3])
full = [p for p in list_checkpoints(Path("checkpoints") / run) if not checkpoint_number(p)[1]]
picked = {full[round(i * (len(full) - 1) / 3)] for i in range(4)} if full else set()
if every > 0:
    picked |= {p for p in full if checkpoint_number(p)[0] % every == 0}
with tempfile.TemporaryDirectory() as tmp, tarfile.open(out / f"{run}-networks.tar", "w") as tar:
    for path in sorted(picked):
        network = export_network(path, Path(tmp) / path.name)
        tar.add(network, arcname=f"{run}/{path.name}")
        network.unlink()  # a folder of checkpoint names is a run's: the next export would be refused
print(f"{len(full)} checkpoints in checkpoints/{run}; the networks of {len(picked)} in {out}/{run}-networks.tar:",
      " ".join(p.name for p in sorted(picked)))
EOF
exported=$?
tar czf "$out/$run-logs.tgz" --exclude=hcpe3 "logs/$run" || echo "gpu_train.sh: no log folder logs/$run to pack" >&2
echo "gpu_train.sh: done after $(( $(date +%s) - t0 )) s (training exit $rc)"
# 124: stopped by the time limit, as intended
[ "$rc" = 0 ] || [ "$rc" = 124 ] || exit 1
[ "$exported" = 0 ] || exit 1
