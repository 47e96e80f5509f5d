"""Helpers of the pages, by concern (a package, so Streamlit never lists it as a page):

* ``legacy``: the one private-API patch (app.py's navigation even on a deep link)
* ``cache``: cached loading of models, test data, JSON files and reproduction outputs
* ``pickers``: data-set and model pickers, keeping URL values inside their options
* ``urlstate``: the view's state in the URL
* ``auth``: who is using the page (sign-in, when configured) and which runs are theirs
* ``upload``: uploaded images and models (the upload policy)
* ``export``: PNG and HTML downloads of a figure, CSV of its heatmaps
* ``explore``: the set-wide views of Mechanisms (inputs with the same mechanisms, each unit's role)
* ``pair``: two models on one input (Mechanisms)
* ``messages``: errors and notes instead of tracebacks
* ``frontend``: what the browser loads early (the chart library, with the page)
* ``svg_view``: SVG heatmaps drawn by the browser (static, or with clickable cells)

Each name lives in its module; pages import it from there (``from pages.ui.cache import
manifest``, or ``ui.cache.manifest``). Pages stay thin: they call these and core, and draw.
Nothing heavy runs at import; importing
this package (every page does, first) applies the navigation patch.
"""

from .legacy import leave_legacy_pages_mode

leave_legacy_pages_mode()

# the package's modules (not their names), so ``from pages import ui`` reaches ``ui.cache.*``
from . import auth, cache, explore, export, frontend, handwriting, messages, pair, pickers, svg_view, upload, urlstate  # noqa: E402, F401
