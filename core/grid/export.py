"""Shipping a grid's models: one seed of every cell copied into pretrained/ with its manifest."""
from __future__ import annotations

import json
from pathlib import Path

from ..fileio import finite
from ..training.config import PROTOCOLS


def protocol_text(name: str) -> str:
    """One line on a protocol for the manifest, from its settings (``PROTOCOLS``), e.g. "SGD lr 0.1,
    batch 100, 1,000 iterations (paper protocol)"."""
    if name not in PROTOCOLS:
        return name
    p = PROTOCOLS[name]
    parts = [f"{p['optimizer'].upper() if p['optimizer'] == 'sgd' else p['optimizer'].capitalize()} lr {p['lr']:g}"]
    if p.get("schedule", "none") != "none":
        parts.append(p["schedule"])
    parts.append(f"batch {p['batch_size']}")
    stops = bool(p.get("patience"))
    parts.append(f"{'up to ' if stops else ''}{p['iterations']:,} iterations")
    if p.get("val_images"):
        parts.append(f"best of a {p['val_images']:,}-image validation split")
    if stops:
        parts.append("early stopping")
    return f"{', '.join(parts)} ({name} protocol)"


def export_pretrained(out: Path, seed: int, dest: Path, protocol: str = "paper", datasets=None) -> dict:
    """Copy seed ``seed`` of every cell of one protocol to ``dest/<folder>/<dataset>/<model>.*``
    (folder: none for the paper protocol, ``converged/`` for the converged one) and write the
    manifest, which lists both protocols' models; each entry says which protocol it follows."""
    import shutil

    dest = Path(dest)
    sub = "" if protocol == "paper" else f"{protocol}/"
    old = {}
    if (dest / "manifest.json").is_file():
        try:
            old = json.loads((dest / "manifest.json").read_text())
        except (OSError, json.JSONDecodeError):
            old = {}
    kept = [m for m in old.get("models", []) if m.get("protocol", "paper") != protocol
            or (datasets and m.get("dataset") not in datasets)]
    manifest = {"models": kept, "protocols": {**old.get("protocols", {}), protocol: protocol_text(protocol)},
                "rebuild": "make pretrained"}
    for p in sorted((Path(out) / "runs").glob(f"*/*_s{seed}.json")):
        meta = json.loads(p.read_text())
        w = p.with_suffix(".safetensors")
        if meta.get("status") != "completed" or not w.is_file() or meta.get("variant"):
            continue
        if meta.get("protocol", "paper") != protocol or (datasets and meta["dataset"] not in datasets):
            continue
        target = dest / sub.rstrip("/") / meta["dataset"] / f"{meta['model']}" if sub else dest / meta["dataset"] / meta["model"]
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(w, target.with_suffix(".safetensors"))
        shutil.copyfile(p, target.with_suffix(".json"))
        m = meta["metrics"]
        manifest["models"].append({
            "dataset": meta["dataset"], "model": meta["model"], "seed": meta["seed"],
            "protocol": protocol,
            "weights": f"{sub}{meta['dataset']}/{meta['model']}.safetensors",
            "metadata": f"{sub}{meta['dataset']}/{meta['model']}.json",
            "parameters": m.get("parameters"), "test_accuracy": m.get("test_accuracy"),
            "test_error": m.get("test_error"), "noisy_test_error": m.get("noisy_test_error"),
            "noise_var": m.get("noise_var"), "iterations": meta["train_config"]["iterations"],
            "data_source": meta["data_source"]["train"].split(" (")[0],
            "class_weighting": m.get("class_weighting"),
            "holdout": meta["data_source"].get("note", ""),
        })
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "manifest.json").write_text(json.dumps(finite(manifest), indent=1))
    return manifest
