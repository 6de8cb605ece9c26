#!/usr/bin/env bash
# The CPU benchmark set of docs/benchmarks.md. Each line is one azshogi-bench run; the last
# line each prints is its JSON result, collected into $OUT (default benchmarks.jsonl).
# Usage: bash docs/tools/run_benchmarks.sh [seconds per window] [repeats]
set -uo pipefail
SECONDS_PER_WINDOW=${1:-10}
REPEATS=${2:-3}
OUT=${OUT:-benchmarks.jsonl}
common="bench.seconds=$SECONDS_PER_WINDOW bench.repeats=$REPEATS bench.warmup_seconds=5"
run() {
    echo "== azshogi-bench $* $common" >&2
    azshogi-bench "$@" $common | tail -n 1 | python3 -c "import json,sys; d=json.loads(sys.stdin.read()); d['overrides']=sys.argv[1:]; print(json.dumps(d))" "$@" >> "$OUT"
    tail -n 1 "$OUT" >&2
}
run +experiment=smoke
run model=small
run model=small inference.dtype=fp32
run model=small selfplay.search_threads=2
run model=small search=puct
run model=medium
run model=small selfplay.num_workers=2
# What everything around the network costs (issue #9): the server alone fed by fake clients,
# self-play's search with an instant network, and per-move cost against the game's length.
run bench.network=instant bench.fake_clients=4 selfplay.num_actors=128
run bench.network=instant bench.fake_clients=4 selfplay.num_actors=512
run bench.network=instant bench.fake_clients=8 selfplay.num_actors=2048
run bench.network=instant
run bench.network=instant "bench.plies=[30,300]"
