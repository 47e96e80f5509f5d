"""Reporting: paper.py (the paper's grid, claims, variants and controls), stats.py (tests, Holm and
the Holm-step intervals), comparisons.py (the tables' statistics), tables.py (Markdown/CSV/JSON of a
grid), claims.py (THE claims table across protocols), budget.py (4,000 vs 12,000 iterations),
facts.py (computed facts for prose), docs.py (the documents' generated blocks), fmt.py (every
formatter), floors.py, health.py, plots/ (figures by subject)."""
