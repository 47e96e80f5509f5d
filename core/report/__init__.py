"""Reporting: paper.py (the paper's grid and claims), stats.py, fmt.py (every formatter), tables.py,
plots/ (figures by subject)."""
