"""What the results in results/ cost to compute: the training time of every run record, summed
per results folder (``collect``), as the table ``results/compute.md`` holds (``render``) and the
one line the documents give (``total_line``).

Reads ``metrics.train_time_s`` of every run JSON under ``results/<folder>/runs/`` (the training
loop's own clock, its periodic validation included; data loading and the final test evaluation
are not) and the thread count and device each run records.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from ..fileio import derived_from_json


def collect(results: Path) -> dict[str, dict]:
    """Per results folder: runs, summed training seconds, thread counts, devices, torch versions."""
    folders: dict[str, dict] = defaultdict(lambda: {"runs": 0, "seconds": 0.0, "threads": set(), "devices": set(),
                                                    "torch": set()})
    for path in sorted(results.rglob("runs/**/*.json")):
        rel = path.relative_to(results).as_posix()
        folder = rel.split("/runs/", 1)[0]
        cost = derived_from_json(path, _cost, "compute.cost")
        if cost is None:
            continue
        seconds, threads, device, torch = cost
        f = folders[folder]
        f["runs"] += 1
        f["seconds"] += seconds
        f["threads"].add(threads)
        f["devices"].add(device)
        if torch:
            f["torch"].add(torch)
    return dict(folders)


def _cost(record: dict) -> tuple | None:
    """(training seconds, threads, device, torch version) of one run record; None without a time."""
    seconds = (record.get("metrics") or {}).get("train_time_s")
    if not isinstance(seconds, int | float):
        return None
    torch = record.get("torch_version")
    return (float(seconds), (record.get("train_config") or {}).get("threads"),
            (record.get("metrics") or {}).get("device") or "cpu", torch.split("+")[0] if torch else None)


def _hours(seconds: float) -> str:
    return f"{seconds / 3600:.1f} h"


def _set(values) -> str:
    vals = sorted(str(v) for v in values if v is not None)
    return ", ".join(vals) if vals else "-"


def render(folders: dict[str, dict]) -> str:
    """The table; the device and torch columns only where folders differ (else said once above it)."""
    shared = {k: _set(set().union(*(f[k] for f in folders.values()))) for k in ("devices", "torch")}
    split = [k for k in ("devices", "torch") if any(_set(f[k]) != shared[k] for f in folders.values())]
    head = {"devices": "device", "torch": "torch"}
    rows = ["| results folder | runs | training time (sum) | torch threads per run |"
            + "".join(f" {head[k]} |" for k in split), "|---|---|---|---|" + "---|" * len(split)]
    for name, f in sorted(folders.items()):
        rows.append(f"| `results/{name}` | {f['runs']} | {_hours(f['seconds'])} | {_set(f['threads'])} |"
                    + "".join(f" {_set(f[k])} |" for k in split))
    total_runs, total_s = totals(folders)
    rows.append(f"| all | {total_runs} | {_hours(total_s)} | |" + " |" * len(split))
    same = [f"{head[k]} {shared[k]}" for k in ("devices", "torch") if k not in split]
    return ("Compute: the training time each run records (`metrics.train_time_s`), summed per folder by "
            "`python -m scripts.compute_cost`; CPU of 2-core x86_64 machines, two runs at a time, often beside "
            "other work (upper bounds); data loading and the final test evaluation come on top."
            + (f" Every run: {', '.join(same)}." if same else "") + "\n\n" + "\n".join(rows) + "\n")


def totals(folders: dict[str, dict]) -> tuple[int, float]:
    """Runs and training seconds over every folder."""
    return sum(f["runs"] for f in folders.values()), sum(f["seconds"] for f in folders.values())


def total_line(results: Path) -> str:
    """The documents' one line: every run's training time, with the per-folder table linked."""
    n, seconds = totals(collect(results))
    if not n:
        return "*No run records with a training time in `results/` yet.*"
    return (f"{n:,} run{'s' if n != 1 else ''}, {_hours(seconds)} of recorded training time on 2-core CPUs (upper "
            "bounds: two runs at a time, often beside other work); per results folder: "
            "[results/compute.md](results/compute.md).")
