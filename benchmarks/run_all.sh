#!/usr/bin/env bash
# Reproduce benchmarks/results/ (the table in benchmarks/README.md). Run on an otherwise idle machine:
# every number is a ratio measured in this one process, but a busy CPU still skews wall times.
#
#   benchmarks/run_all.sh              # everything (hours on a 2-core CPU: see README)
#   benchmarks/run_all.sh --limit 10   # extra arguments go to every 'foretell bench' call below
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python

# 1. The model's real outputs on the edit corpus (+ the snake tasks), recorded once for the simulator.
#    Skipped when the recording exists; delete src/foretell/bench/data/recorded_outputs.json to redo it.
if [ ! -f src/foretell/bench/data/recorded_outputs.json ]; then
  $PY -m foretell.bench.cli --suite verbatim,edit,corpus --record-only --dtype auto "$@"
fi

# 2. Alignment efficiency on those recorded outputs (no model; seconds).
$PY -m foretell.bench.cli --replay --out benchmarks/results

# 3. The benchmark: verbatim, edits, corpus, controls, concurrency 1/4/8, HF peers; JSON + markdown + plots.
$PY -m foretell.bench.cli --suite verbatim,edit,corpus,controls,concurrency,peers --dtype auto --profile \
  --out benchmarks/results "$@"
