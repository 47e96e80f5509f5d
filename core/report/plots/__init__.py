"""Plotly figures shared by the pages. One colour per method, everywhere.

Figures take plain data (numpy arrays, dicts, DataFrames) and return ``plotly`` figures;
no streamlit here, so they work in a notebook too. By subject:

* ``style``: colours per method, axis conventions, empty figures
* ``training``: training curves (overlaid, one panel per method, one run)
* ``comparison``: final errors over seeds, parameter counts
* ``traces``: per-timestep traces of one input, unit heatmaps, class probabilities
* ``sets``: mechanisms across a set (matches of a mask block, what each unit is for)
* ``robustness``: error against a setting, how a selection mask shifts
* ``interventions``: the mask after an intervention, an attribution map over the input

Table formatting lives in core.report.fmt.
"""
