"""The training CLI: ``python -m core.train`` (core/train.py launches :func:`main`).

::

    python -m core.train --dataset mnist --model rim --seed 0 --out runs/mnist_rim_s0
    python -m core.train --resume runs/mnist_rim_s0          # after a crash: continue (its --out stem or .ckpt folder)
"""
from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

from ..errors import WeightsError
from .config import TrainConfig, build_parser, config_from_args
from .lifecycle import finish_run, load_run_data
from .loop import train


def resolve_resume_path(arg) -> Path:
    """The training-state folder (or state file) a user means by ``arg``: the path itself, or the
    ``<stem>.ckpt`` folder beside a run's ``--out`` stem. Raises WeightsError naming every
    path tried when none exists (and where the finished model is, when the run completed)."""
    p = Path(arg)
    tried = [p] if p.suffix == ".ckpt" else [p, Path(f"{p}.ckpt")]
    for cand in tried:
        if cand.exists():
            return cand
    stem = str(p).removesuffix(".ckpt")
    done = Path(f"{stem}.safetensors")
    finished = f" The run finished: its model is at {done}, there is nothing to resume." if done.is_file() else ""
    raise WeightsError(f"No training state at {' or '.join(str(c) for c in tried)}.{finished}")


def main(argv=None) -> int:
    from tqdm import tqdm

    from ..errors import RimscopeError
    from .state import load_resume_source

    args = build_parser().parse_args(argv)
    state, state_dir = None, None
    try:
        if args.resume:
            state_dir = resolve_resume_path(args.resume)
            state = load_resume_source(state_dir)
            if state.path is not None and state_dir.is_file():
                state_dir = state.path.parent
            cfg = TrainConfig.from_dict(dict(state.train_config))
            if args.threads is not None:
                cfg = dataclasses.replace(cfg, threads=args.threads)
            cfg.validate()
            data_dir = args.data_dir or state.extra.get("data_dir")
            out = Path(args.out or state.extra.get("out") or str(state_dir).removesuffix(".ckpt"))
        else:
            cfg = config_from_args(args)
            data_dir = args.data_dir
            out = Path(args.out or f"runs/{cfg.dataset}_{cfg.model}_s{cfg.seed}")
            state_dir = Path(f"{out}.ckpt")
        cfg, train_data, test_data, note = load_run_data(cfg, data_dir)
        print(f"train: {train_data.source} ({len(train_data)} images); test: {test_data.source} ({len(test_data)})",
              file=sys.stderr)
        if note:
            print(note, file=sys.stderr)
        if state is not None:
            print(f"resuming from iteration {state.iteration} ({state.path})", file=sys.stderr)
        done = state.iteration if state is not None else 0
        bar = tqdm(total=cfg.iterations, initial=done, disable=args.quiet, desc=f"{cfg.model} on {cfg.dataset}",
                   unit="it")

        def cb(ev):
            if ev["kind"] == "iter":
                bar.update(1)
                bar.set_postfix(loss=f"{ev['loss']:.3f}", acc=f"{ev['batch_acc']:.2f}")
            elif ev["kind"] == "eval":
                bar.write(f"iteration {ev['iteration']}: test accuracy {ev['test_acc']:.4f} (subset)")
            elif ev["kind"] == "state" and not ev["ok"]:
                bar.write(f"warning: {ev['message']}")

        extra = {"data_dir": str(Path(data_dir).expanduser().resolve()) if data_dir else None,
                 "out": str(out.expanduser().resolve()), "note": note}
        result = train(cfg, train_data, test_data, callback=cb, state_dir=state_dir, resume_from=state,
                       state_extra=extra)
        bar.close()
    except RimscopeError as exc:
        print(f"error: {exc}" + (f"\n  reason: {exc.detail}" if exc.detail else ""), file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        hint = f"; continue with: python -m core.train --resume {state_dir}" if state_dir and state_dir.is_dir() else ""
        print(f"interrupted{hint}", file=sys.stderr)
        return 130
    try:
        finished = finish_run(cfg, result, train_data, test_data, note, stem=out, state_dir=state_dir,
                              keep_states=args.keep_states)
    except RimscopeError as exc:
        print(f"error: {exc}; the training state in {state_dir} is kept (resume with --resume)", file=sys.stderr)
        return 2
    if finished.status == "diverged":  # nothing to continue: it would diverge again
        print(f"DIVERGED: {finished.message}; no weights saved", file=sys.stderr)
        return 3
    path = finished.weights
    m = result.metrics
    noisy = f", noisy error {m['noisy_test_error']:.4f} (var {cfg.noise_var}, {cfg.noise_draws} draws)" if "noisy_test_error" in m else ""
    resumed = f" (resumed from iteration {result.resumed_from})" if result.resumed_from is not None else ""
    print(f"{cfg.model} on {cfg.dataset} seed {cfg.seed}: {result.status}, {m['iterations_done']} iterations "
          f"in {result.wall_time_s:.1f} s{resumed}; test accuracy {m['test_accuracy']:.4f} (error {m['test_error']:.4f}, "
          f"n={m['test_n']}){noisy}; {m['parameters']:,} parameters; saved {path}")
    return 0

