# ruff: noqa: F401 - this package re-exports its modules' names
"""Plotly figures shared by the pages. One colour per method, everywhere.

Figures take plain data (numpy arrays, dicts, DataFrames) and return ``plotly`` figures;
no streamlit here, so they work in a notebook too. By subject:

* ``style``: colours per method, axis conventions, empty figures
* ``training``: training curves (overlaid, one panel per method, one run)
* ``comparison``: final errors over seeds, parameter counts
* ``traces``: per-timestep traces of one input, unit heatmaps, class probabilities
* ``robustness``: error against a setting, how a selection mask shifts

Table formatting lives in ``core.fmt`` (re-exported here under its old names).
"""

from ..fmt import gap as fmt_gap
from ..fmt import mean_sd as fmt_mean_sd
from ..fmt import reproduction_tables, runs_frame
from ..fmt import verdict as fmt_verdict
from ..stats import ema_smooth
from .comparison import ERROR_METRICS, INPUT_SHAPES, error_bar_figure, parameter_bar_figure
from .robustness import error_curve_figure, mark_current, mask_shift_figure
from .style import (
    CHANGE_COLORS,
    FLOOR_COLOR,
    LOG_TICKS,
    MASK_COLORS,
    METHOD_COLORS,
    TIMESTEP_AXIS,
    UPLOAD_COLOR,
    add_floor_lines,
    empty_figure,
    method_color,
    method_order,
    method_title,
)
from .traces import (
    comm_attention_figure,
    mark_step,
    probability_figure,
    timeline_figure,
    trace_panels,
    unit_heatmap,
)
from .training import (
    CURVE_METRICS,
    ITERATION_AXIS,
    curves_from_metadata,
    curves_overlay,
    curves_small_multiples,
    run_curves_figure,
)
