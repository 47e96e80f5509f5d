# ruff: noqa: F401 - this package re-exports its modules' names
"""Helpers of the pages, by concern (a package, so Streamlit never lists it as a page):

* ``legacy``: the one private-API patch (app.py's navigation even on a deep link)
* ``cache``: cached loading of models, test data, JSON files and reproduction outputs
* ``pickers``: data-set and model pickers, keeping URL values inside their options
* ``urlstate``: the view's state in the URL, the session's owner id
* ``upload``: uploaded images and checkpoints (the upload policy)
* ``export``: PNG and HTML downloads of a figure, CSV of its heatmaps
* ``explore``: the set-wide views of Mechanisms (inputs with the same mechanisms, each unit's role)
* ``pair``: two models on one input (Mechanisms)
* ``messages``: errors and notes instead of tracebacks

Pages stay thin: they call these and core, and draw. Nothing heavy runs at import; importing
this package (every page does, first) applies the navigation patch.
"""

from .legacy import leave_legacy_pages_mode

leave_legacy_pages_mode()

from .cache import (  # noqa: E402
    SCHEDULES,
    data_key,
    entry_metadata,
    entry_mtime,
    load_curves,
    load_entry_cached,
    load_or_report,
    load_summary,
    manifest,
    model_entries,
    mtime,
    read_json,
    run_store,
    schedules_available,
    set_traces,
    test_data,
)
from .explore import URL_STATE as EXPLORE_URL_STATE  # noqa: E402
from .explore import match_view, unit_view  # noqa: E402
from .export import figure_downloads, heatmap_csvs, png_export_ready, trace_downloads  # noqa: E402
from .messages import image_name, missing_data_note, no_models_note, reproduce_hint, show_error  # noqa: E402
from .pair import Side, compare_with_picker  # noqa: E402
from .pair import panels as pair_panels  # noqa: E402
from .pair import predictions as pair_predictions  # noqa: E402
from .pickers import (  # noqa: E402
    PROTOCOL_KEY,
    chosen_protocol,
    clamp_state,
    dataset_picker,
    entries_or_stop,
    keep_valid,
    main_model_picker,
    method_models_picker,
    protocol_switch,
    tab_views,
)
from .upload import (  # noqa: E402
    MAX_UPLOAD_MB,
    check_upload,
    framed_row,
    prepare_pixels,
    prepare_upload,
    show_preprocessing,
    uploaded_image,
    upscaled,
)
from .urlstate import restore_from_url, session_owner, sync_url, url_bool, url_list  # noqa: E402
