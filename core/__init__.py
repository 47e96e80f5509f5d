"""RIMscope core: data sets, models, training, evaluation. Never imports streamlit."""

__version__ = "0.1.0"
