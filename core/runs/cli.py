"""The run store's command line: ``python -m core.runs {list,pump,stop,resume,worker}``."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys

from .. import paths
from ..errors import RimscopeError


def main(argv=None) -> int:
    from .store import RunStore
    from .worker import run_worker

    p = argparse.ArgumentParser(prog="python -m core.runs", description="The RIMscope run store.")
    sub = p.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("worker", help="run one queued run (started by pump())")
    w.add_argument("run_dir")
    sub.add_parser("list", help="list the runs")
    sub.add_parser("pump", help="start queued runs and mark dead workers")
    s = sub.add_parser("stop", help="ask a run to stop")
    s.add_argument("run_id")
    r = sub.add_parser("resume", help="continue an interrupted or stopped run from its last training state")
    r.add_argument("run_id")
    args = p.parse_args(argv)
    try:
        if args.cmd == "worker":
            with contextlib.suppress(OSError, AttributeError):
                os.nice(paths.worker_nice())
            status = run_worker(args.run_dir, install_signals=True)
            print(f"worker {os.getpid()} finished: {status}", flush=True)
            return 0
        store = RunStore()
        if args.cmd == "list":
            for r in store.list_runs():
                print(f"{r.run_id}  {r.status:<11} {r.dataset:<13} {r.model:<13} seed {r.seed}  "
                      f"{r.iteration}/{r.total}  {r.message}")
        elif args.cmd == "pump":
            print("started:", ", ".join(store.pump()) or "none")
        elif args.cmd == "stop":
            print(store.request_stop(args.run_id))
        elif args.cmd == "resume":
            store.resume(args.run_id)
            started = args.run_id in store.pump()
            print("running" if started else "queued")
    except RimscopeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0
