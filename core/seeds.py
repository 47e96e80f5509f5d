"""Where every random stream of a run starts: the one table of derived seeds (a leaf: the data
plan, the training loop and the evaluation all read it, and it imports nothing of RIMscope)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SeedTable:
    """Where every random stream of a run starts: the one table of derived seeds.

    A run with seed ``s`` draws stream ``x`` from ``s + x`` (``SEEDS.of("x", s)``); the offsets
    keep the streams of one generator kind apart for every seed below 10,000 (seed 5's validation
    split is never seed 5's or any other such seed's evaluation subset). The ``fixed_*`` seeds do
    not depend on the run's seed. Changing a number here changes every result and breaks
    resuming the training states written before.
    """

    weights: int = 0  # torch.manual_seed(s): initial weights (and any model randomness)
    order: int = 0  # numpy default_rng(s): the batch order (one permutation per epoch)
    eval_subset: int = 10_000  # numpy default_rng(s + 10,000): the fixed test subset of the periodic evaluation
    validation: int = 20_000  # numpy default_rng(s + 20,000): which training images are held out (val_images)
    augment: int = 30_000  # torch.Generator(s + 30,000): the affine augmentation draws (augment="affine")
    fixed_final_noise: int = 1000  # the noise of the final noisy test accuracy: draw d uses seed 1000 + d, every run
    fixed_demo_split: int = 30_000  # core.data.plan.sample_split: the bundled sample's 800 / 200 demo split

    def of(self, stream: str, seed: int) -> int:
        """The seed of ``stream`` (a field name without ``fixed_``) in a run with seed ``seed``."""
        if stream.startswith("fixed_"):
            raise ValueError(f"{stream} does not depend on the run's seed: use SEEDS.{stream}")
        return getattr(self, stream) + seed


SEEDS = SeedTable()
