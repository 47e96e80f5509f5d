#!/usr/bin/env bash
# The converged grid (every method, seeds 0-4 on MNIST, Fashion-MNIST and CIFAR-10,
# 0-2 on Animals-10; noise evaluation with 10 draws), in priority order so that every phase is a
# useful answer on its own. Resumable: finished cells are skipped, a half-done cell continues
# from its training state. The whole grid (102 runs) is in results/converged.
#   0. seed 0 of every method on every set
#   1. RIM and parallel LSTMs, seeds 1-4, MNIST + Fashion-MNIST (the main comparison)
#   2. the other baselines, seeds 1-4, MNIST + Fashion-MNIST
#   3. RIM and parallel LSTMs, seeds 1-4, CIFAR-10; then the other baselines
#   4. every method, seeds 1-2, Animals-10
#   5. the ablations of RIM (random selection, all six active), seeds 0-2, MNIST + Fashion-MNIST
# Usage: RIMSCOPE_DATA_DIR=../shared/data bash scripts/converged_grid.sh [OUT]
set -euo pipefail
PY=${PY:-.venv/bin/python}
OUT=${1:-results/converged}
W=${WORKERS:-2}
run() { "$PY" -m core.reproduce run --protocol converged --workers "$W" --noise-draws 10 --out "$OUT" "$@"; }
MF="--datasets mnist fashion_mnist"
run --seeds 0 --models rim parallel_lstm entnet rmc indrnn
run $MF --models rim parallel_lstm --seeds 1 2 3 4
run $MF --models entnet rmc indrnn --seeds 1 2 3 4
run --datasets cifar10 --models rim parallel_lstm --seeds 1 2 3 4
run --datasets cifar10 --models entnet rmc indrnn --seeds 1 2 3 4
run --datasets animals10 --seeds 1 2
run $MF --models rim_all rim_random --seeds 0 1 2
