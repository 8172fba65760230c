"""`python -m caravanserai.cli`: the same as the `caractrl` console script."""

from caravanserai.cli.caractrl import main

if __name__ == "__main__":
    main()
