"""``python -m core.reproduce``: the reproduction grid's CLI (core.grid.cli)."""

if __name__ == "__main__":
    from core.grid.cli import main

    raise SystemExit(main())
