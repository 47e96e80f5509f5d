"""Plotly figures shared by the pages. One colour per method, everywhere.

Figures take plain data (numpy arrays, dicts, DataFrames) and return ``plotly`` figures;
no streamlit here, so they work in a notebook too. By subject:

* ``style``: colours per method, axis conventions, empty figures
* ``training``: training curves (overlaid, one panel per method, one run)
* ``comparison``: final errors over seeds, parameter counts
* ``traces``: per-timestep traces of one input, unit heatmaps, class probabilities
* ``robustness``: error against a setting, how a selection mask shifts

Table formatting lives in core.report.fmt.
"""
