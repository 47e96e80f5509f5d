"""Sentences of core.report.fmt that pages show, derived from what they describe."""

from __future__ import annotations

from core.models.rim import RIMConfig
from core.report.fmt import even_share_text


def test_the_even_share_follows_the_models_k_and_n():
    assert even_share_text(RIMConfig()) == ("With k = 4 of 6 every LSTM would be active in 0.67 of the rows if the "
                                            "attention chose evenly.")
    assert "k = 3 of 5" in even_share_text(RIMConfig(num_units=5, k_active=3)) and "0.60 of the rows" in \
        even_share_text(RIMConfig(num_units=5, k_active=3))
    assert "k = 6 of 6" in even_share_text(RIMConfig(selection="all")) and "1.00" in even_share_text(RIMConfig(selection="all"))


def test_the_parameter_gap_paragraph_comes_from_the_counts_configs_and_claims():
    from core.report.facts import parameter_gap_text

    counts = {"mnist": {"rim": 45_000, "parallel_lstm": 10_000}}
    text = parameter_gap_text(counts, [])
    assert "(4 LSTMs x 32 units, as many as RIM's 4 active ones)" in text and "**4.5x the parameters**" in text
    assert "(6 LSTMs plus two attentions)" in text and "parameter-matched control" not in text
    row = {"claim_id": "control_parallel_lstm_h81", "claim": "Ours, why: RIM beats X", "converged": "❌ does not hold"}
    assert text + (' A parameter-matched control, Parallel LSTMs 4 × 81, is in the claims table on the Compare page '
                   '("Ours, why: RIM beats X"): ❌ does not hold.') == parameter_gap_text(counts, [row])
    assert parameter_gap_text({"mnist": {"rim": 45_000}}, [row]) == ""


def test_failed_runs_are_listed_once_per_cell():
    from core.report.facts import _by_cell

    names = ["CIFAR-10 IndRNN seed 0", "CIFAR-10 IndRNN seed 2", "MNIST RMC seed 1", "CIFAR-10 IndRNN seed 1"]
    assert _by_cell(names) == ["CIFAR-10 IndRNN seeds 0, 2, 1", "MNIST RMC seed 1"]
