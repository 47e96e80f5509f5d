#!/usr/bin/env bash
# The equal-footing re-run: the paper grid, the ablation grid and the initialisation study,
# all stored in one folder (default results/paper) so their tables share the base runs.
# Resumable: every finished cell is skipped, so run it again after a stop or a crash.
# Phases in priority order (each is a complete, useful answer on its own):
#   1. seed 0 of every data set x model (the pretrained set)
#   2. rim and parallel LSTMs, seeds 1-2, MNIST + Fashion-MNIST (the paper's main comparison)
#   3. ablations and forget-bias-0 runs, seeds 0-2, MNIST + Fashion-MNIST
#   4. seeds 1-2 of the rest of the paper grid
#   5. seeds 3-4 for rim and parallel LSTMs on every data set (5 seeds for the main comparison)
# Usage: RIMSCOPE_DATA_DIR=../shared/data bash scripts/equal_footing_grid.sh [OUT]
set -euo pipefail
PY=${PY:-.venv/bin/python}
OUT=${1:-results/paper}
W=${WORKERS:-2}
run() { "$PY" -m core.reproduce run --workers "$W" --noise-draws 10 --out "$OUT" "$@"; }
MF="--datasets mnist fashion_mnist"
run --seeds 0
run $MF --models rim parallel_lstm --seeds 1 2
run $MF --models rim_random rim_all rim_alpha0 rim_k5 rim_k6 rim_fb0 parallel_lstm_fb0 --seeds 0 1 2
run --seeds 1 2
run --models rim parallel_lstm --seeds 3 4
