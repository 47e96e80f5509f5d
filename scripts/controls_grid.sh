#!/usr/bin/env bash
# The controls that decide why RIM beats the parallel LSTMs, and the budget check of the
# converged protocol, in priority order (each phase is a useful answer on its own). Resumable:
# finished cells are skipped, a half-done cell continues from its training state.
#   1. parameter-matched parallel LSTMs (4 x 81), six parallel LSTMs of 32, RIM without
#      communication (alpha 0): seeds 0-4, MNIST + Fashion-MNIST (results/converged)
#   2. RIM's random-selection and all-active ablations brought to seeds 0-4 (results/converged)
#   3. the same controls on CIFAR-10 (4 x 60 is parameter-matched there)
#   4. RIM, parallel LSTMs and EntNet with three times the budget (12,000 iterations, the same
#      cosine shape), seeds 0-2, MNIST + Fashion-MNIST (results/budget)
#   5. the same with seeds 3-4, so the budget check has as many seeds as Tables 2-3
# Usage: RIMSCOPE_DATA_DIR=../shared/data bash scripts/controls_grid.sh [CONVERGED_OUT] [BUDGET_OUT]
set -euo pipefail
PY=${PY:-.venv/bin/python}
OUT=${1:-results/converged}
BUDGET=${2:-results/budget}
W=${WORKERS:-2}
run() { OMP_NUM_THREADS=1 "$PY" -m core.reproduce run --workers "$W" --noise-draws 10 "$@"; }
MF="--datasets mnist fashion_mnist"
S="--seeds 0 1 2 3 4"
run --protocol converged --out "$OUT" $MF --models parallel_lstm_h81 parallel_lstm_6 $S
run --protocol converged --out "$OUT" $MF --models rim_alpha0 $S
run --protocol converged --out "$OUT" $MF --models rim_random rim_all --seeds 3 4
run --protocol converged --out "$OUT" --datasets cifar10 --models parallel_lstm_h60 parallel_lstm_6 $S
run --protocol converged-12k --out "$BUDGET" $MF --models rim parallel_lstm entnet --seeds 0 1 2
run --protocol converged-12k --out "$BUDGET" $MF --models rim parallel_lstm --seeds 3 4
run --protocol converged-12k --out "$BUDGET" $MF --models entnet --seeds 3 4
