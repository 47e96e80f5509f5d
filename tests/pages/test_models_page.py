"""The Models page through AppTest: one table of pretrained models and runs, inspecting one,
downloads, uploads (bad ones refused with a message, nothing stored) and deleting own runs."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from core.report.fmt import method_title, short_method_title
from pages.ui.auth import owner_id
from tests.pages.helpers import valid_weights

PAGE = str(Path(__file__).resolve().parents[2] / "pages" / "models.py")
# the page as a signed-in user sees it (sign-in configured: st.user has is_logged_in); runs
# recorded with another owner are another user's
USER = {"is_logged_in": True, "iss": "https://id.example", "sub": "models-page-user", "email": "me@example.com"}
OWNER = owner_id(USER)


def run_page() -> AppTest:
    at = AppTest.from_file(PAGE, default_timeout=120)
    at.user = dict(USER)
    return at.run()


def store():
    from core.runs.store import RunStore

    return RunStore()


def upload(at: AppTest, weights: tuple[str, bytes], meta: tuple[str, bytes], dataset: str | None = None) -> AppTest:
    at.file_uploader(key="models_up_w").set_value((weights[0], weights[1], "application/octet-stream"))
    at.file_uploader(key="models_up_m").set_value((meta[0], meta[1], "application/json"))
    if dataset:
        at.selectbox(key="models_up_ds").set_value(dataset)
    at.run()
    return at.button(key="models_import").click().run()


def table(at: AppTest):
    return at.dataframe[0].value


def metric(at: AppTest, label: str) -> str:
    return next(m.value for m in at.metric if m.label == label)


def test_models_page_lists_pretrained_and_inspects_one(page_env):
    at = run_page()
    assert not at.exception and not at.error
    df = table(at)
    assert len(df) == 6
    assert set(df["source"]) == {"pretrained"}
    assert list(df.columns[:4]) == ["data set", "model", "protocol", "source"]
    assert {"parameters", "seed", "clean error (%)", "noisy error (%)"} <= set(df.columns)
    assert "owner" not in df.columns  # empty for every shipped model: left out (the table fits at 1280 px)
    assert "status" not in df.columns and any("Every run in the table completed" in c.value for c in at.caption)
    assert set(df["clean error (%)"]) == {3.12, 4.47, 5.81, 55.23, 57.61, 61.02}
    assert at.selectbox(key="models_pick").value is not None
    assert len(at.get("plotly_chart")) == 1  # the selected model's curves
    labels = [b.label for b in at.get("download_button")]
    assert "⬇ Weights (.safetensors)" in labels and "⬇ Metadata (.json)" in labels
    assert "⬇ Table as CSV" in labels
    assert len(at.file_uploader) == 2


def test_filter_and_selection_change_the_numbers(page_env):
    at = run_page()
    at.selectbox(key="models_ds").set_value("cifar10").run()
    df = table(at)
    assert set(df["data set"]) == {"CIFAR-10"} and len(df) == 3
    first = metric(at, "Clean test error")
    assert first in {"55.23 %", "57.61 %", "61.02 %"}
    options = at.selectbox(key="models_pick").options
    at.selectbox(key="models_pick").select_index(len(options) - 1).run()
    second = metric(at, "Clean test error")
    assert second != first and second in {"55.23 %", "57.61 %", "61.02 %"}
    at.selectbox(key="models_ds").set_value("fashion_mnist").run()
    assert not at.exception
    assert any("No model matches" in i.value for i in at.info)


def test_downloads_are_the_files_on_disk(page_env):
    """The two download buttons serve the model's bytes as stored (media ids hash the bytes)."""
    mfs = pytest.importorskip("streamlit.runtime.memory_media_file_storage")
    if not hasattr(mfs, "_calculate_file_id"):
        pytest.skip("this Streamlit names media files differently")
    at = run_page()
    ds, model = at.selectbox(key="models_pick").value.split(":", 1)[1].split("/")
    buttons = {b.label: b.proto.url for b in at.get("download_button")}
    stem = page_env["pretrained"] / ds / model
    for label, suffix, mime in (("⬇ Weights (.safetensors)", ".safetensors", "application/octet-stream"),
                                ("⬇ Metadata (.json)", ".json", "application/json")):
        data = stem.with_suffix(suffix).read_bytes()
        file_id = mfs._calculate_file_id(data, mime, filename=f"{ds}_{model}_s0{suffix}")
        assert file_id in buttons[label], label


@pytest.mark.parametrize(
    "weights, meta, needle",
    [
        (("model.pt", b"\x80\x04\x95 pickle bytes"), ("model.json", b"{}"), "pickle"),
        (("model.pth", b"anything"), ("model.json", b"{}"), "never opens pickle"),
        (("model.safetensors", b"not safetensors"), ("model.json", b"{not json"), "not a safetensors file"),
        (("model.safetensors", b"\x80\x04 disguised pickle"), ("model.json", None), "pickle"),
        (("model.safetensors", b"junk"), ("model.txt", b"{}"), ".json"),
    ],
)
def test_bad_uploads_are_refused_with_a_clear_error(page_env, weights, meta, needle):
    if meta[1] is None:  # a real metadata file with weights that are a pickle in disguise
        meta = ("model.json", valid_weights()[1])
    at = upload(run_page(), weights, meta)
    assert not at.exception
    errors = [e.value for e in at.error]
    assert errors and errors[0].startswith("Upload refused") and needle in errors[0]
    assert store().list_runs() == []  # nothing stored


def test_upload_for_the_wrong_dataset_is_refused(page_env):
    w, m = valid_weights("mnist")
    at = upload(run_page(), ("m.safetensors", w), ("m.json", m), dataset="cifar10")
    assert any("not on 'cifar10'" in e.value for e in at.error)
    assert store().list_runs() == []


def test_valid_upload_is_imported_listed_and_deletable_after_confirmation(page_env):
    pretrained_before = sorted(p.name for p in page_env["pretrained"].rglob("*"))
    w, m = valid_weights("mnist", "parallel_lstm", 0.0777)
    at = upload(run_page(), ("mine.safetensors", w), ("mine.json", m))
    assert not at.exception and not at.error
    assert any("Imported" in s.value for s in at.success)
    runs = store().list_runs()
    assert len(runs) == 1 and runs[0].status == "uploaded" and runs[0].owner == OWNER
    df = table(at)
    row = df[df["source"] == "uploaded"].iloc[0]
    assert row["clean error (%)"] == 7.77 and row["model"] == short_method_title("parallel_lstm")
    assert at.selectbox(key="models_pick").value == f"run:{runs[0].run_id}"  # the new run is selected
    assert metric(at, "Clean test error") == "7.77 %"
    # delete: disabled until confirmed
    rid = runs[0].run_id
    assert at.button(key=f"models_del_{rid}").disabled
    at.checkbox(key=f"models_del_ok_{rid}").check().run()
    at.button(key=f"models_del_{rid}").click().run()
    assert not at.exception
    assert store().list_runs() == []
    assert any("deleted" in s.value for s in at.success)
    assert len(table(at)) == 6
    assert sorted(p.name for p in page_env["pretrained"].rglob("*")) == pretrained_before  # untouched


def test_runs_of_other_users_are_read_only_and_pretrained_not_deletable(page_env):
    w, m = valid_weights("cifar10", "rim", 0.4444)
    rid = store().import_weights(w, m, "cifar10", owner="ffffffffffffffff")
    at = run_page()
    df = table(at)
    assert len(df[df["source"] == "uploaded"]) == 1
    at.selectbox(key="models_pick").set_value(f"run:{rid}").run()
    assert metric(at, "Clean test error") == "44.44 %"
    assert not [b for b in at.button if b.key == f"models_del_{rid}"]
    assert any("another user" in c.value for c in at.caption)
    at.selectbox(key="models_pick").set_value("pretrained:mnist/rim").run()
    assert any("cannot be deleted" in c.value for c in at.caption)


def test_models_page_without_any_model_explains(empty_env):
    at = run_page()
    assert not at.exception
    assert any("export-pretrained" in i.value for i in at.info)
    assert len(at.file_uploader) == 2  # uploading still works


def test_a_stopped_run_shows_its_status_and_the_iterations_it_ran(page_env):
    import json

    w, m = valid_weights()
    meta = json.loads(m)
    meta.update(status="stopped", train_config={"iterations": 1000})  # stopped after 3 of 1,000
    store().import_weights(w, json.dumps(meta).encode(), expected_dataset="mnist", owner=OWNER)
    at = run_page()
    assert not at.exception
    df = table(at)
    row = df[df["source"] == "uploaded"].iloc[0]
    assert row["state"] == "stopped early" and row["iterations"] == 3
    assert set(df[df["source"] == "pretrained"]["state"]) == {"healthy"}
    # the page's own words: a stopped run is here, marked, not called finished or healthy
    assert "stopped early" in at.caption[0].value and "were stopped are on the Train page" not in at.caption[0].value
    assert not any("Every run in the table completed" in c.value for c in at.caption)
    assert any("This run was stopped early, after 3 of 1000 iterations" in x.value for x in at.warning)


def test_open_in_models_selects_that_run_and_its_data_set(page_env):
    """The Train page's "Open in Models" (session key models_open) or a ?model= link opens the
    Models page on that run, with its data set in the filter."""
    w, m = valid_weights(dataset="cifar10")
    rid = store().import_weights(w, m, expected_dataset="cifar10", owner="someone-else")
    at = AppTest.from_file(PAGE, default_timeout=120)
    at.user = dict(USER)
    at.session_state["models_open"] = f"run:{rid}"
    at.run()
    assert not at.exception
    assert at.selectbox(key="models_ds").value == "cifar10"
    assert at.selectbox(key="models_pick").value == f"run:{rid}"
    link = AppTest.from_file(PAGE, default_timeout=120)
    link.query_params["model"] = f"run:{rid}"
    link.run()
    assert link.selectbox(key="models_pick").value == f"run:{rid}"


def test_models_page_opens_on_your_latest_run_else_mnist_rim(page_env):
    at = run_page()
    assert at.selectbox(key="models_pick").value == "pretrained:mnist/rim"
    w, m = valid_weights(dataset="cifar10")
    rid = store().import_weights(w, m, expected_dataset="cifar10", owner=OWNER)
    at = run_page()
    assert at.selectbox(key="models_pick").value == f"run:{rid}"


CONTENT_PX_AT_1280 = 820  # the page's width in a 1280 px window (Streamlit 1.67, wide layout, sidebar open: measured)


def test_table_columns_are_wide_enough_and_fit_a_1280_px_window(page_env):
    """The grid sizes columns by the rows it measures first (Animals-10, CIFAR-10): without set
    widths a laptop showed "Fashion-MNI". Every shown column has its width, and together they fit
    the page at 1280 px, with a stopped, an uploaded demo and another session's run in the table."""
    import json

    w, m = valid_weights()
    meta = json.loads(m)
    meta.update(status="stopped", train_config={"iterations": 1000, "data_source": "sample"})
    store().import_weights(w, json.dumps(meta).encode(), expected_dataset="mnist", owner="someone-else")
    at = run_page()
    cols = json.loads(at.dataframe[0].proto.columns)
    shown = list(table(at).columns)
    assert {"data set", "model", "source", "clean error (%)", "state"} <= set(shown)
    assert all(cols[c].get("width") for c in shown), cols
    assert sum(cols[c]["width"] for c in shown) <= CONTENT_PX_AT_1280
    assert cols["data set"]["width"] >= 110 and cols["data set"].get("pinned") is True  # "Fashion-MNIST"
    assert cols["model"]["width"] >= 100 and cols["model"].get("pinned") is True  # "Parallel LSTMs"
    assert cols["source"]["width"] >= 95  # "uploaded demo"


def test_foreign_safetensors_upload_is_refused_in_plain_words(page_env):
    """A text file named .safetensors with foreign metadata: the message names the file and says
    that the weights file is not a safetensors file; no Python None, no internal model ids."""
    at = upload(run_page(), ("notes.safetensors", b"just some text, not weights\n"), ("notes.json", b'{"hello": 1}'))
    assert not at.exception
    msg = at.error[0].value
    assert "notes.safetensors" in msg and "is not a safetensors file" in msg
    assert "None" not in msg and "parallel_lstm" not in msg
    # real weights with that metadata: the metadata file is named, and what it lacks, in words
    w, _ = valid_weights()
    at = upload(run_page(), ("model.safetensors", w), ("notes.json", b'{"hello": 1}'))
    msg = at.error[0].value
    assert "notes.json" in msg and "which model" in msg and "None" not in msg and "parallel_lstm" not in msg
    assert "Parallel LSTMs" in msg  # the models by their titles
    assert not store().list_runs()


def test_every_model_has_its_own_name_and_inspect_opens_the_row(page_env, monkeypatch):
    """With the shipped models (two protocols per method): the table has a protocol column, every
    picker label is unique, and picking a row's name opens that row's model (same error)."""
    from core.paths import ROOT

    assert (ROOT / "pretrained" / "manifest.json").is_file(), "the shipped models (pretrained/) are missing"
    monkeypatch.setenv("RIMSCOPE_PRETRAINED_DIR", str(ROOT / "pretrained"))
    at = run_page()
    assert not at.exception
    at.selectbox(key="models_ds").set_value("mnist").run()
    df = table(at)
    assert "protocol" in df.columns and {"paper protocol", "Adam 4k"} <= set(df["protocol"])
    options = at.selectbox(key="models_pick").options
    assert len(options) == len(set(options)) == len(df)
    full = {short_method_title(m): method_title(m) for m in ("rim", "parallel_lstm", "entnet", "rmc", "indrnn")}
    for row in df.to_dict("records"):  # the table's protocol is the one in the model's name
        name = f"{row['data set']} · {full[row['model']]} · {row['protocol']} · seed {row['seed']} ({row['source']})"
        assert name in options, name
        at.selectbox(key="models_pick").select_index(options.index(name)).run()
        assert metric(at, "Clean test error") == f"{row['clean error (%)']:.2f} %", name


def test_the_protocol_column_fits_and_inspect_names_the_protocol_in_full(page_env, monkeypatch):
    """The protocol column holds the short names a model goes by (core.report.fmt.PROTOCOL_SHORT,
    "Adam 4k"), each within the column's width ("Adam, cosine, 4,000 iterations" needs twice its 108 px),
    the columns within the 820 px a 1280 px window leaves the page; the inspected model's protocol
    stands in full under *Inspect a model*."""
    import json

    from core.paths import ROOT
    from core.report.fmt import PROTOCOL_SHORT, protocol_title

    assert (ROOT / "pretrained" / "manifest.json").is_file(), "the shipped models (pretrained/) are missing"
    monkeypatch.setenv("RIMSCOPE_PRETRAINED_DIR", str(ROOT / "pretrained"))
    at = run_page()
    assert not at.exception
    widths = {name: c["width"] for name, c in json.loads(at.dataframe[0].proto.columns).items() if "width" in c}
    shown = [c for c in table(at).columns if c in widths]
    assert sum(widths[c] for c in shown) <= 820
    protocols = set(table(at)["protocol"])
    assert "Adam 4k" in protocols and not any("," in p for p in protocols)
    for p in protocols:  # Source Sans at 14 px: at most 6.5 px a character, 16 px of cell padding
        assert len(p) * 6.5 + 16 <= widths["protocol"], f"{p!r} does not fit {widths['protocol']} px"
    options = at.selectbox(key="models_pick").options
    for short, name in ((PROTOCOL_SHORT["converged"], "converged"), ("paper protocol", "paper")):
        at.selectbox(key="models_pick").select_index(next(i for i, o in enumerate(options) if f" · {short} · " in o))
        at.run()
        assert f"Protocol: {protocol_title(name)}" in [c.value for c in at.caption], short


def test_each_model_shows_its_health_and_an_unhealthy_one_is_flagged(page_env):
    """Health (core.report.health) per row; the inspected model says why it is unhealthy."""
    import json

    import numpy as np

    at = run_page()
    assert set(table(at)["state"]) == {"healthy"}
    assert any(c.value.startswith("Health: healthy") for c in at.caption)
    w, m = valid_weights()
    meta = json.loads(m)
    confusion = np.zeros((10, 10), int)
    confusion[:, 3] = 50  # every test image called "3"
    meta["metrics"]["confusion"] = confusion.tolist()
    at = upload(at, ("one_class.safetensors", w), ("one_class.json", json.dumps(meta).encode()))
    assert not at.exception and not at.error
    df = table(at)
    assert list(df.loc[df["source"] == "uploaded", "state"]) == ["collapsed"]
    warning = next(x.value for x in at.warning if "This model is collapsed" in x.value)
    assert "class 3 predicted for 100.0 %" in warning and "balanced accuracy 10.00 %" in warning


def _walk(node):
    yield node
    for child in getattr(node, "children", {}).values():
        yield from _walk(child)


def _order(at: AppTest) -> list[str]:
    """The main area's headers and messages, top to bottom."""
    return [f"{e.type}:{e.value}" for e in _walk(at.main)
            if getattr(e, "type", "") in ("header", "success", "warning", "error") and isinstance(e.value, str)]


def test_import_message_is_beside_the_button_and_a_copy_of_a_model_here_is_refused(page_env):
    w, m = valid_weights("mnist", "parallel_lstm", 0.0777)
    at = upload(run_page(), ("mine.safetensors", w), ("mine.json", m))
    order = _order(at)
    said = next(i for i, t in enumerate(order) if t.startswith("success:Imported"))
    assert said > order.index("header:Upload a model")  # below the upload form, not at the top
    # the shipped model, downloaded and uploaded again: said, not stored a second time
    stem = page_env["pretrained"] / "mnist" / "rim"
    at = upload(at, ("rim.safetensors", stem.with_suffix(".safetensors").read_bytes()),
                ("rim.json", stem.with_suffix(".json").read_bytes()))
    assert not at.exception and not at.error
    warn = next(x.value for x in at.warning if x.value.startswith("Not imported"))
    assert "exactly those of **MNIST · RIM (paper's method)" in warn and "(pretrained)" in warn
    assert len(store().list_runs()) == 1  # only the first upload
    # and the own upload again: the same
    at = upload(at, ("again.safetensors", w), ("again.json", m))
    assert any(x.value.startswith("Not imported") and "uploaded" in x.value for x in at.warning)
    assert len(store().list_runs()) == 1


def test_a_demo_run_is_marked_in_the_table_picker_and_inspect(page_env):
    import json

    w, m = valid_weights()
    meta = json.loads(m)
    meta["train_config"] = {"iterations": 3, "data_source": "sample"}
    rid = store().import_weights(w, json.dumps(meta).encode(), expected_dataset="mnist", owner=OWNER)
    at = run_page()
    df = table(at)
    assert list(df.loc[df["source"].str.startswith("uploaded"), "source"]) == ["uploaded demo"]
    assert at.selectbox(key="models_pick").value == f"run:{rid}"
    assert any("(uploaded demo, run " in o for o in at.selectbox(key="models_pick").options)
    assert any("A **demo** run" in i.value for i in at.info)
    csv = next(b for b in at.get("download_button") if b.label == "⬇ Table as CSV")
    assert csv is not None


def test_floors_beside_the_error_and_the_balanced_error_where_classes_are_unbalanced(page_env):
    import json

    import numpy as np

    at = run_page()
    at.selectbox(key="models_pick").set_value("pretrained:mnist/rim").run()
    cap = next(c.value for c in at.caption if c.value.startswith("For comparison"))
    assert "guessing at random errs 90.00 %" in cap and "largest class 88.65 %" in cap and "balanced" not in cap
    # the small Animals-10 subset: five classes of 46 test images, five of 6
    w, m = valid_weights("animals10", "parallel_lstm", 0.30)
    meta = json.loads(m)
    counts = [46] * 5 + [6] * 5
    confusion = np.diag(counts)
    confusion[5:, 5:] = 0
    confusion[5:, 0] = 6  # the small classes all wrong: balanced error 50 %
    meta["metrics"]["confusion"] = confusion.tolist()
    rid = store().import_weights(w, json.dumps(meta).encode(), expected_dataset="animals10", owner=OWNER)
    at = run_page()
    at.selectbox(key="models_pick").set_value(f"run:{rid}").run()
    cap = next(c.value for c in at.caption if c.value.startswith("For comparison"))
    assert "largest class 82.31 %" in cap and "unbalanced" in cap and "this model's is **50.00 %**" in cap


def test_a_demo_run_compares_with_the_floors_of_the_images_it_was_tested_on(page_env):
    """Tested on 200 images of the bundled sample, not on the MNIST test set: the floors beside its
    error are those 200 images' (from its confusion matrix), not the full test set's 88.65 %."""
    import json

    import numpy as np

    w, m = valid_weights()
    meta = json.loads(m)
    meta["train_config"] = {"iterations": 3, "data_source": "sample"}
    counts = [30, 20, 20, 20, 20, 20, 20, 20, 15, 15]  # 200 images, class 0 the largest
    meta["metrics"]["confusion"] = np.diag(counts).tolist()
    rid = store().import_weights(w, json.dumps(meta).encode(), expected_dataset="mnist", owner=OWNER)
    at = run_page()
    assert at.selectbox(key="models_pick").value == f"run:{rid}"
    cap = next(c.value for c in at.caption if c.value.startswith("For comparison"))
    assert cap.startswith("For comparison: on the 200 MNIST images it was tested on, guessing at random errs 90.00 %")
    assert "largest class 85.00 %" in cap and "88.65" not in cap


def test_a_final_evaluation_far_below_the_best_seen_is_said_on_inspect(page_env):
    import json

    w, m = valid_weights()
    meta = json.loads(m)
    meta["evals"] = {"iteration": [100, 200, 300], "test_acc": [0.80, 0.865, 0.53], "test_loss": [1, 1, 1]}
    meta["metrics"].update(test_accuracy=0.53, test_error=0.47, iterations_done=300)
    rid = store().import_weights(w, json.dumps(meta).encode(), expected_dataset="mnist", owner=OWNER)
    at = run_page()
    assert at.selectbox(key="models_pick").value == f"run:{rid}"
    assert any("33.5 points below the best seen" in x.value for x in at.warning)
    at.selectbox(key="models_pick").set_value("pretrained:mnist/rim").run()
    assert not any("below the best seen" in x.value for x in at.warning)


def test_a_run_that_stopped_early_on_its_own_shows_the_iterations_it_ran_of_its_budget(page_env):
    """Early stopping ends most long-grid runs before their budget: the table gives the iterations
    trained, Inspect the iterations trained with the budget and the kept iteration in its help and
    in a caption beside it, the CSV both."""
    import json

    w, m = valid_weights()
    meta = json.loads(m)
    meta.update(status="completed", train_config={**meta.get("train_config", {}), "iterations": 1000})
    meta["metrics"] = {**meta.get("metrics", {}), "iterations_done": 750, "best_iteration": 500}
    store().import_weights(w, json.dumps(meta).encode(), expected_dataset="mnist", owner=OWNER)
    at = run_page()
    assert not at.exception
    row = table(at).query("source == 'uploaded'").iloc[0]
    assert row["iterations"] == 750 and row["state"] == "healthy"
    assert at.selectbox(key="models_pick").value.startswith("run:")  # the imported run is the one inspected
    metric = next(x for x in at.metric if x.label == "Iterations trained")
    assert metric.value == "750"
    assert "Trained 750 of its budget of 1,000 iterations" in metric.help
    assert "stopped early when its validation accuracy stopped improving" in metric.help
    assert "iteration 500" in metric.help
    assert any(metric.help == c.value for c in at.caption)  # said on the page, not only in a tooltip


def test_weights_of_one_model_with_anothers_metadata_say_which_is_which(page_env):
    """The fixture's IndRNN weights with its RIM metadata: the message says what the two files
    are (RIM metadata, IndRNN weights) and what to do, then the technical detail; nothing stored."""
    pre = page_env["pretrained"] / "mnist"
    at = upload(run_page(), ("indrnn.safetensors", (pre / "indrnn.safetensors").read_bytes()),
                ("rim.json", (pre / "rim.json").read_bytes()))
    assert not at.exception
    msg = at.error[0].value
    assert msg.startswith("Upload refused: The metadata describes RIM (MNIST, seed 0) but the weights look like "
                          "IndRNN's: upload the metadata file that came with these weights. "), msg
    assert msg.endswith("The weights lack 9 tensor(s) the model needs, e.g. b_hq.")
    assert store().list_runs() == []
