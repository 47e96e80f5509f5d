"""Errors with messages meant for the person using the tool.

Every error that can reach a user (bad upload, missing data, bad setting) is one of these,
so the pages and the CLI can show ``str(err)`` instead of a traceback.
"""


class RimscopeError(Exception):
    """Base class: the message is written for the user, not the developer; ``detail`` (optional)
    is the raw reason behind it (an exception's text), shown apart, e.g. under an expander."""

    def __init__(self, *args, detail: str = ""):
        super().__init__(*args)
        self.detail = detail


class DataUnavailableError(RimscopeError):
    """A data set could not be found or fetched from any source. ``reason``: why, in one short
    clause without the ways to get the data (for a page that lists those itself); "" when the
    message has no such clause."""

    def __init__(self, *args, detail: str = "", reason: str = ""):
        super().__init__(*args, detail=detail)
        self.reason = reason


class WeightsError(RimscopeError):
    """A model (safetensors + JSON) is missing, malformed, unsafe or does not fit."""


class InputImageError(RimscopeError):
    """An uploaded or drawn image cannot be turned into model input."""


class ConfigError(RimscopeError, ValueError):
    """A hyperparameter or setting is out of range."""
