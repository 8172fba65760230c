"""cara-autoscaler: grows node groups when projects cannot fit and shrinks them when nodes sit idle.

cara-autoscaler [--server HOST:PORT] [--expander least-waste|priority|random] [--scan-interval 5s]
                [--no-leader-elect] [--metrics-port 10254]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from caravanserai.controllers.autoscaler import app
from caravanserai.controllers.process import process_parser, run_process


def parser() -> argparse.ArgumentParser:
    """The process's flags: every controller's (`controllers.process`) and the autoscaler's (`app`)."""
    built = process_parser(
        "cara-autoscaler", description=__doc__.splitlines()[0], lease=app.COMPONENT, metrics_port=10254
    )
    app.add_arguments(built)
    return built


def main(argv: Sequence[str] | None = None) -> None:
    sys.exit(run_process(parser(), app.setup_from_args, argv))


if __name__ == "__main__":
    main()
