"""cara-node-health: marks nodes NotReady when their Lease lapses and moves work off them.

cara-node-health [--server HOST:PORT] [--heartbeat-timeout 90s] [--grace-period 3m] [--terminating-timeout 10m]
                 [--startup-grace-period 60s] [--no-leader-elect] [--metrics-port 10252]
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from caravanserai.controllers.nodehealth import app
from caravanserai.controllers.process import process_parser, run_process


def main(argv: Sequence[str] | None = None) -> None:
    parser = process_parser(
        "cara-node-health", description=__doc__.splitlines()[0], lease=app.COMPONENT, metrics_port=10252
    )
    app.add_arguments(parser)
    sys.exit(run_process(parser, app.setup_from_args, argv))


if __name__ == "__main__":
    main()
