"""scripts.sync_grid: the long grid's finished runs come over from the checkout that trains them,
once each; runs still training, half-written records and runs already here stay where they are."""
import json

from scripts.sync_grid import copy_new, finished_runs, main


def _run(root, rel, status="completed", weights=True, state=False, text=None):
    rec = root / "results" / rel
    rec.parent.mkdir(parents=True, exist_ok=True)
    rec.write_text(text if text is not None else json.dumps({"status": status, "metrics": {}}))
    if weights:
        rec.with_suffix(".safetensors").write_bytes(b"weights of " + rel.encode())
    if state:
        rec.with_suffix(".ckpt").mkdir()
    return rec


def test_only_finished_runs_this_checkout_lacks_are_copied(tmp_path):
    src, dst = tmp_path / "grid", tmp_path / "main"
    _run(src, "budget-24k/runs/fashion_mnist/rim_random_s3.json")  # finished: comes over
    _run(src, "budget/runs/mnist/rim_all_s0.json")  # finished: comes over
    _run(src, "budget-24k/runs/fashion_mnist/rim_random_s4.json", state=True)  # still training (its state beside)
    _run(src, "budget-24k/runs/cifar10/rim_random_s0.json", weights=False)  # no weights yet
    _run(src, "budget-24k/runs/cifar10/rim_random_s1.json", text='{"status": "compl')  # being written
    _run(src, "budget-24k/runs/cifar10/rim_random_s2.json", status="stopped")  # not finished
    _run(src, "converged/runs/mnist/rim_s0.json")  # not a folder the long grid writes
    mine = _run(dst, "budget/runs/mnist/rim_s0.json", text='{"status": "completed", "mine": 1}')
    _run(src, "budget/runs/mnist/rim_s0.json")  # this checkout has it: never overwritten

    assert [str(p) for p in finished_runs(src)] == [
        "results/budget/runs/mnist/rim_all_s0.json", "results/budget/runs/mnist/rim_s0.json",
        "results/budget-24k/runs/fashion_mnist/rim_random_s3.json"]
    assert copy_new(src, dst, dry_run=True) and not (dst / "results/budget/runs/mnist/rim_all_s0.json").exists()
    new = copy_new(src, dst)
    assert [str(p) for p in new] == ["results/budget/runs/mnist/rim_all_s0.json",
                                    "results/budget-24k/runs/fashion_mnist/rim_random_s3.json"]
    for rel in new:
        assert (dst / rel).read_bytes() == (src / rel).read_bytes()
        assert (dst / rel.with_suffix(".safetensors")).read_bytes() == (src / rel.with_suffix(".safetensors")).read_bytes()
    assert json.loads(mine.read_text())["mine"] == 1
    assert copy_new(src, dst) == []  # once each


def test_a_wrong_source_gets_a_clear_message(tmp_path, capsys):
    assert main(["--from", str(tmp_path / "nowhere")]) == 2
    assert "no results/ folder there" in capsys.readouterr().err
    assert main(["--from", str(tmp_path), "--dry-run"]) == 2  # no results/ in it either


def test_regenerate_alone_regenerates_here_and_nothing_else_is_accepted_without_a_source(monkeypatch, capsys):
    import scripts.sync_grid as sync

    calls = []
    monkeypatch.setattr(sync, "regenerate", lambda data_dir: calls.append(data_dir))
    monkeypatch.setattr(sync, "copy_new", lambda *a, **k: calls.append("copied") or [])
    assert main(["--regenerate", "--data-dir", "/data"]) == 0
    assert calls == ["/data"]  # regenerated here, nothing copied
    for argv in ([], ["--dry-run"], ["--no-regenerate"], ["--regenerate", "--dry-run"]):
        assert main(argv) == 2, argv
        assert "give --from" in capsys.readouterr().err
    assert calls == ["/data"]


def test_make_reproduce_regenerates_through_sync_grid():
    from core.paths import ROOT

    recipe = ROOT.joinpath("Makefile").read_text().split("\nreproduce:", 1)[1].split("\n\n", 1)[0]
    lines = [ln.strip() for ln in recipe.splitlines()[1:]]
    assert lines.index("$(PY) -m scripts.long_grid") < next(
        i for i, ln in enumerate(lines) if ln.startswith("$(PY) -m scripts.sync_grid --regenerate"))
