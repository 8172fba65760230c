"""cara-scheduler: binds Pending projects to nodes.

cara-scheduler [--server HOST:PORT] [--strategy spread|binpack] [--no-leader-elect] [--metrics-port 10251]
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from caravanserai.controllers.process import process_parser, run_process
from caravanserai.controllers.scheduler import app


def main(argv: Sequence[str] | None = None) -> None:
    parser = process_parser(
        "cara-scheduler", description=__doc__.splitlines()[0], lease=app.COMPONENT, metrics_port=10251
    )
    app.add_arguments(parser)
    sys.exit(run_process(parser, app.setup_from_args, argv))


if __name__ == "__main__":
    main()
