"""The numbers behind the figures, as files: a heatmap as CSV, a whole trace as JSON.

The JSON of a trace says what made it (model, input, settings) and, per tensor, its shape and
what each axis means, so it can be read back without RIMscope.
"""

from __future__ import annotations

import io
from collections.abc import Sequence

import numpy as np

from ..fileio import json_bytes
from ..models.registry import TraceSchema

# axes of a trace tensor of one image, by the schema field that names it
_AXES = {"mask": ["timestep", "unit"], "input_attention": ["timestep", "unit"],
         "input_heads": ["timestep", "unit", "head"], "comm_attention": ["timestep", "reader unit", "read unit"]}


def matrix_csv(z, row_labels: Sequence, col_labels: Sequence, row_title: str = "row") -> bytes:
    """A ``[rows, columns]`` matrix as CSV: a header ``row_title, col...`` and one line per row."""
    import pandas as pd

    m = np.asarray(z, dtype=float)
    if m.ndim != 2 or m.shape != (len(row_labels), len(col_labels)):
        raise ValueError(f"matrix of shape {list(m.shape)} does not fit {len(row_labels)} x {len(col_labels)} labels")
    df = pd.DataFrame(m, index=pd.Index([str(r) for r in row_labels], name=row_title),
                      columns=[str(c) for c in col_labels])
    buf = io.StringIO()
    df.to_csv(buf, float_format="%.6g")
    return buf.getvalue().encode()


def trace_record(trace: dict, schema: TraceSchema, unit_names: Sequence[str], *, model: dict, input: dict,
                 settings: dict, probs=None, classes: Sequence[str] = ()) -> dict:
    """A trace of one image (arrays ``[T, ...]``) with what made it, as plain JSON-able data."""
    axes = {getattr(schema, f): ax for f, ax in _AXES.items() if getattr(schema, f)}
    axes.setdefault("activity", ["timestep", "unit"])
    tensors = {}
    for key, value in trace.items():
        a = np.asarray(value, dtype=float)
        tensors[key] = {"shape": list(a.shape), "axes": axes.get(key, [f"axis {i}" for i in range(a.ndim)]),
                        "values": np.round(a, 6)}
    out = {"model": model, "input": input, "settings": settings, "units": list(unit_names),
           "timesteps": int(np.asarray(trace["activity"]).shape[0]),
           "activity_meaning": schema.activity_label, "trace": tensors}
    if probs is not None:
        p = np.asarray(probs, dtype=float)
        out["prediction"] = {"class": int(p.argmax()), "name": str(classes[int(p.argmax())]) if classes else None,
                             "probabilities": np.round(p, 6), "classes": [str(c) for c in classes]}
    return out


def trace_json(*args, **kwargs) -> bytes:
    """``trace_record`` as strict JSON bytes."""
    return json_bytes(trace_record(*args, **kwargs))
