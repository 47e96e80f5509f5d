"""``python -m core.train``: the training CLI (core.training.cli)."""

if __name__ == "__main__":
    from core.training.cli import main

    raise SystemExit(main())
