"""The errors of several models on one fixed test subset, point by point, taking the shipped
curves (core.eval.curves) where they hold the point; a page wraps the computed points in its
own cache (``noise_fn`` / ``stretch_fn``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..models.registry import trace_schema
from .curves import clean_key, file_hash, subset_hash
from .robustness_points import Curve, EvalPoint, curve_from_points, noisy_eval, stretch_eval


class Scorer:
    """Errors of the compared models on one fixed test subset, point by point.

    ``models``: method -> ``(catalog.ModelEntry, model)``. A curve point comes from the shipped
    curves (``shipped``, a ``ShippedCurves``) when they hold it for these weights
    and this subset, else it is computed (by ``noisy_eval`` / ``stretch_eval``, or by the caller's
    ``noise_fn(ident, model, images, labels, kind, strength, with_activity, seed)`` /
    ``stretch_fn(ident, model, images, labels, factor)``, typically cached wrappers of them). Models whose trace schema has a binary
    activity keep their activity with every noise point (for the mask flips).
    """

    def __init__(self, key: str, images, labels, models: dict, *, shipped=None, seed: int = 0,
                 noise_fn: Callable | None = None, stretch_fn: Callable | None = None,
                 weights_hash: Callable[[str, float], str] | None = None):
        self.key, self.images, self.labels, self.models, self.seed = key, images, labels, models, seed
        self.subset_hash = subset_hash(images, labels)
        self.shipped = shipped
        self._noise_fn, self._stretch_fn = noise_fn, stretch_fn
        self._weights_hash = weights_hash or (lambda path, mtime: file_hash(path))
        self._binary = {m: trace_schema(e.model).activity_binary for m, (e, _) in models.items()}

    def _from_shipped(self, method: str, what: str, value: float) -> EvalPoint | None:
        entry, _ = self.models[method]
        if entry.source != "pretrained" or self.shipped is None or not self.shipped.points:
            return None
        path = entry.stem.with_suffix(".safetensors")
        return self.shipped.get(self._weights_hash(str(path), entry.weights_mtime), self.subset_hash, what, value)

    def curve_noise(self, method: str, kind: str, strength: float) -> EvalPoint:
        """A curve point: from the shipped curves when they hold it, else computed."""
        return self._from_shipped(method, *clean_key(kind, strength)) or self.noise(method, kind, strength)

    def curve_stretch(self, method: str, factor: float) -> EvalPoint:
        return self._from_shipped(method, "stretch", float(factor)) or self.stretch(method, factor)

    def signature(self, what: str) -> tuple:
        """Identifies a curve: the data subset, what varies, and every model with its file's time."""
        return (self.key, what, tuple((m, e.key, e.weights_mtime) for m, (e, _) in self.models.items()))

    def ident(self, method: str) -> tuple:
        """What identifies one model's inputs (its key, its file's time, the data subset): the
        first argument of ``noise_fn`` / ``stretch_fn``, for a caller's cache to key on."""
        entry, _ = self.models[method]
        return (entry.key, entry.weights_mtime, self.key)

    def noise(self, method: str, kind: str, strength: float) -> EvalPoint:
        """A computed point (with the activity for a model with a binary mask)."""
        entry, model = self.models[method]
        kind, strength = clean_key(kind, strength)
        if self._noise_fn is None:
            return noisy_eval(model, self.images, self.labels, kind, strength, self.seed,
                              with_activity=self._binary[method])
        return self._noise_fn(self.ident(method), model, self.images, self.labels, kind, strength,
                              self._binary[method], self.seed)

    def stretch(self, method: str, factor: float) -> EvalPoint:
        entry, model = self.models[method]
        if self._stretch_fn is None:
            return stretch_eval(model, self.images, self.labels, float(factor))
        return self._stretch_fn(self.ident(method), model, self.images, self.labels, float(factor))

    def noise_curve(self, method: str, kind: str, strengths: Sequence[float], *, shipped: bool = True,
                    flips: bool = False) -> Curve:
        """Error against noise strength; ``flips``: changed activations against the clean run."""
        get = self.curve_noise if shipped else self.noise
        ref = self.noise(method, "gaussian", 0.0) if flips else None
        return curve_from_points(strengths, [get(method, kind, s) for s in strengths], reference=ref)

    def stretch_curve(self, method: str, factors: Sequence[float]) -> Curve:
        return curve_from_points(factors, [self.curve_stretch(method, f) for f in factors])


class ShippedScorer(Scorer):
    """The shipped curves alone, for a machine without the test set: the points computed at
    build time on one fixed subset (``subset``, its hash in ``curves.json``). Nothing is
    computed: ``noise``/``stretch`` raise ``LookupError``; ``images`` and ``labels`` are None."""

    def __init__(self, key: str, models: dict, shipped, subset: str, *, seed: int = 0,
                 weights_hash: Callable[[str, float], str] | None = None):
        self.key, self.images, self.labels, self.models, self.seed = key, None, None, models, seed
        self.subset_hash, self.shipped = subset, shipped
        self._noise_fn = self._stretch_fn = None
        self._weights_hash = weights_hash or (lambda path, mtime: file_hash(path))
        self._binary = {m: False for m in models}  # no activity without the images

    @property
    def n(self) -> int:
        """Images behind every point (the subset's size, as recorded with the points)."""
        method = next(iter(self.models))
        p = self._from_shipped(method, "gaussian", 0.0)
        return p.n if p is not None else 0

    def noise(self, method: str, kind: str, strength: float) -> EvalPoint:
        raise LookupError(f"no shipped point for {method} at {kind} {strength} (no test set to compute it)")

    def stretch(self, method: str, factor: float) -> EvalPoint:
        raise LookupError(f"no shipped point for {method} at stretch {factor} (no test set to compute it)")


def shipped_only(key: str, models: dict, shipped, *, seed: int = 0,
                 weights_hash: Callable[[str, float], str] | None = None) -> tuple[ShippedScorer | None, list]:
    """A ``ShippedScorer`` over the models of ``models`` (method -> (entry, model)) whose shipped
    curves share one subset, and the methods left out (no shipped points: a user's run, replaced
    weights). None when no subset is shared by all pretrained models, or when there are several
    (the bundled sample and the full test set: which one the user means is unknown)."""
    hash_of = weights_hash or (lambda path, mtime: file_hash(path))
    if shipped is None or not shipped.points:
        return None, list(models)
    per_method = {}
    for method, (entry, _) in models.items():
        if entry.source != "pretrained":
            continue
        subs = shipped.subsets(hash_of(str(entry.stem.with_suffix(".safetensors")), entry.weights_mtime))
        if subs:
            per_method[method] = subs
    common = set.intersection(*per_method.values()) if per_method else set()
    if len(common) != 1:
        return None, list(models)
    kept = {m: models[m] for m in models if m in per_method}
    return (ShippedScorer(key, kept, shipped, next(iter(common)), seed=seed, weights_hash=weights_hash),
            [m for m in models if m not in kept])
