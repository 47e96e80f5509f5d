"""The current benchmark figures as Markdown tables, one per file of ``bench/results/``.

Run from the repository root::

    .venv/bin/python -m bench.report           # print the tables
    .venv/bin/python -m bench.report --write   # put them into bench/README.md (between its markers)

Each table says the machine its file records (CPU, cores, torch, load average at the start, the
time stamp the benchmark wrote). A file this script does not know is shown as a flat list of its
numbers, so a new benchmark appears without a change here.
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Callable
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"
README = Path(__file__).resolve().parent / "README.md"
BEGIN, END = "<!-- bench:generated -->", "<!-- /bench:generated -->"
MODEL_NAMES = {"rim": "RIM", "parallel_lstm": "parallel LSTMs", "entnet": "EntNet", "rmc": "RMC", "indrnn": "IndRNN"}


def _s(x, digits: int = 2, unit: str = " s") -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    return f"{x:.{digits}f}{unit}"


def _label(key: str) -> str:
    return key.replace("_", " ")


def _table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def machine_line(data: dict) -> str:
    m = data.get("machine", {})
    parts = []
    if m.get("cpu"):
        parts.append(str(m["cpu"]))
    if m.get("cores"):
        parts.append(f"{m['cores']} cores")
    if m.get("torch"):
        parts.append(f"torch {m['torch']}")
    load = m.get("load_average_start")
    if load:
        parts.append(f"load average {load[0]:.1f} at the start")
    if m.get("date"):
        parts.append(f"stamp {m['date'][:16].replace('T', ' ')} UTC")
    return "Machine: " + (", ".join(parts) if parts else "not recorded") + "."


def models_table(d: dict) -> str:
    runs = {r["threads"]: r for r in d["runs"]}
    threads = sorted(runs)
    shapes = sorted({s["shape"] for r in d["runs"] for s in r["steps"]})
    header = ["model"] + [f"train step {sh}, {t} thread{'s' * (t > 1)}" for sh in shapes for t in threads]
    header += [f"paper protocol, {t} thread{'s' * (t > 1)}" for t in threads if runs[t].get("protocol")]
    header += ["trace of one input (1 thread)"] if runs[threads[0]].get("trace") else []
    models = [m for m in MODEL_NAMES if any(s["model"] == m for r in d["runs"] for s in r["steps"])]
    rows = []
    for m in models:
        row = [MODEL_NAMES[m]]
        for sh in shapes:
            for t in threads:
                step = next((s for s in runs[t]["steps"] if s["model"] == m and s["shape"] == sh), None)
                row.append(f"{step['train']['ratio']:.2f}x" if step else "-")
        for t in threads:
            if runs[t].get("protocol"):
                p = next((p for p in runs[t]["protocol"] if p["model"] == m), None)
                row.append(_s(p["wall_s"], 0) if p else "-")
        if runs[threads[0]].get("trace"):
            tr = next((p for p in runs[threads[0]]["trace"] if p["model"] == m), None)
            row.append(_s(tr["median_ms"], 1, " ms") if tr else "-")
        rows.append(row)
    iters = d.get("settings", {}).get("protocol_iterations", "?")
    ref = d.get("settings", {}).get("reference", "the reference")
    return (_table(header, rows) + f"\n\nTrain step: time per training step (batch 100) over {ref}, measured side by "
            f"side (medians of the per-pair ratios). Paper protocol: wall time of {iters} iterations.")


def pages_table(d: dict) -> str:
    settings = d["settings"]
    names = list(next(iter(settings.values())))
    scripts = any(_s(v.get("script_median_s")) != "-" for k in settings for v in settings[k].values())

    def cell(v: dict) -> str:
        return f"{_s(v['median_s'])} ({_s(v.get('script_median_s'))})" if scripts else _s(v["median_s"])

    header = ["interaction"] + [f"GC {k}: median" + (" (script)" if scripts else "") for k in settings]
    rows = [[_label(n)] + [cell(settings[k][n]) if n in settings[k] else "-" for k in settings] for n in names]
    return (_table(header, rows) + f"\n\nFrom the input event to the page's last change, medians of {d.get('reps', '?')}"
            + ("; in brackets the server's script run" if scripts else "")
            + ". GC off: `runner.postScriptGC = false` (as shipped).")


def first_view_table(d: dict) -> str:
    cols = [("fresh_server_s", "first view, fresh server"), ("warm_server_new_session_s", "warm server, new session"),
            ("revisit_s", "revisit")]
    pages = list(d["fresh_server_s"])
    rows = [[p] + [_s(d.get(k, {}).get(p)) for k, _ in cols] for p in pages]
    samples = d.get("direct_first_page_samples_s", {})
    extra = ", ".join(f"{p} as the first page of a fresh server {_s(v)}"
                      + (f" (median of {len(samples[p])} fresh servers, {min(samples[p]):.2f} to {max(samples[p]):.2f} s)"
                         if samples.get(p) else "")
                      for p, v in d.get("direct_first_page_s", {}).items())
    ready = d.get("server_ready_s")
    note = ("\n\n" + (f"The server answered its health check {_s(ready)} after its start (the clock of every "
                        f"fresh-server figure starts there). " if ready is not None else "")
            + f"Server RSS {d.get('server_rss_mb', '?')} MB" + (f"; {extra}" if extra else "") + ".")
    return _table(["page"] + [c for _, c in cols], rows) + note


def load_table(d: dict) -> str:
    phases = d["phases"]
    actions = list(phases[0]["per_action"])
    header = ["action (p50 / p95)"] + [f"{p['sessions']} session{'s' * (p['sessions'] > 1)}" for p in phases]
    rows = [[_label(a)] + [f"{_s(p['per_action'][a]['p50_s'])} / {_s(p['per_action'][a]['p95_s'])}" for p in phases]
            for a in actions]
    rows.append(["errors"] + [str(p["error_count"]) for p in phases])
    rows.append(["server CPU per action"] + [_s(p["server_cpu_s_per_action"], 3) for p in phases])
    rows.append(["server peak RSS"] + [_s(p["server_peak_rss_mb"], 0, " MB") for p in phases])
    return _table(header, rows) + f"\n\nEach session: {d.get('mix', 'the action mix')}."


def cpu_profile_table(d: dict) -> str:
    rows = [[_label(k), _s(v["median_cpu_s"]), _s(v["max_cpu_s"]), str(v["n"])] for k, v in d["profile"].items()]
    return _table(["script run", "median CPU", "max CPU", "n"], rows) + f"\n\n{d.get('what', '')}."


def generic_table(d: dict) -> str:
    rows: list[list[str]] = []

    def walk(x, path):
        if isinstance(x, dict):
            for k, v in x.items():
                if k != "machine":
                    walk(v, path + [str(k)])
        elif isinstance(x, int | float) and not isinstance(x, bool):
            rows.append([" / ".join(path), f"{x:.4g}"])

    walk(d, [])
    return _table(["quantity", "value"], rows[:60])


def _by_shape(d: dict) -> Callable[[dict], str]:
    """The renderer of a file this script has no entry for, from the keys it has."""
    if isinstance(d.get("settings"), dict) and all(isinstance(v, dict) for v in d["settings"].values()) \
            and any("median_s" in x for v in d["settings"].values() for x in v.values() if isinstance(x, dict)):
        return pages_table
    if "fresh_server_s" in d:
        return first_view_table
    if "phases" in d:
        return load_table
    if "profile" in d:
        return cpu_profile_table
    if isinstance(d.get("runs"), list) and d["runs"] and "steps" in d["runs"][0]:
        return models_table
    return generic_table


RENDERERS: dict[str, tuple[str, str, Callable[[dict], str]]] = {
    "latest.json": ("Models: training-step speed against a fused LSTM", "make bench", models_table),
    "pages.json": ("Pages: interaction latency in the browser", "make bench-pages", pages_table),
    "pages_explore.json": ("Mechanisms' set-wide and two-model views in the browser",
                           "python -m bench.bench_pages --sections explore --reps 5", pages_table),
    "pages_slow.json": ("The slow list in the browser: noise kind, protocol, data set, Make PNG, Mechanisms' set-wide tabs",
                        "python -m bench.bench_pages --sections slow --reps 3 --gc off --out bench/results/pages_slow.json",
                        pages_table),
    "pages_intervene.json": ("Mechanisms' Intervene tab in the browser: one LSTM taken out",
                             "python -m bench.bench_pages --sections intervene --reps 8 --gc off "
                             "--out bench/results/pages_intervene.json", pages_table),
    "interventions.json": ("Interventions: one input, the set-wide tables, one attribution (core, one thread)",
                           "python -m bench.bench_interventions --repeats 5 --out bench/results/interventions.json",
                           generic_table),
    "mechanisms_cpu.json": ("Mechanisms' script runs: CPU seconds (AppTest)",
                            "python -m bench.bench_pages --sections explore --cpu-profile", cpu_profile_table),
    "first_view.json": ("First views of every page", "python -m bench.bench_first_view", first_view_table),
    "load.json": ("One server, 1 and 8 browser sessions at once", "python -m bench.bench_load", load_table),
}


def render(results: Path = RESULTS) -> str:
    parts = []
    files = sorted(results.glob("*.json"), key=lambda p: (p.name not in RENDERERS, list(RENDERERS).index(p.name)
                                                           if p.name in RENDERERS else 0, p.name))
    for path in files:
        data = json.loads(path.read_text(encoding="utf-8"))
        title, command, fn = RENDERERS.get(path.name) or (path.stem.replace("_", " "), "", _by_shape(data))
        try:
            body = fn(data)
        except (KeyError, TypeError, IndexError, StopIteration):
            body = generic_table(data)
        cmd = f" (`{command}`)" if command else ""
        parts.append(f"### {title}\n\n`bench/results/{path.name}`{cmd}. {machine_line(data)}\n\n{body}\n")
    return "\n".join(parts)


def write(readme: Path = README, results: Path = RESULTS) -> None:
    text = readme.read_text(encoding="utf-8")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    readme.write_text(f"{head}{BEGIN}\n{render(results)}{END}{tail}", encoding="utf-8")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="replace the generated part of bench/README.md")
    args = parser.parse_args(argv)
    if args.write:
        write()
    else:
        print(render())


if __name__ == "__main__":
    main()
