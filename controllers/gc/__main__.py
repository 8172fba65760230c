"""cara-gc: deletes Terminated and expired projects, rescues projects bound to deleted nodes, collects dependents.

cara-gc [--server HOST:PORT] [--terminated-delay 5s] [--owner-resync 2s] [--no-leader-elect] [--metrics-port 10253]
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from caravanserai.controllers.gc import app
from caravanserai.controllers.process import process_parser, run_process


def main(argv: Sequence[str] | None = None) -> None:
    parser = process_parser("cara-gc", description=__doc__.splitlines()[0], lease=app.COMPONENT, metrics_port=10253)
    app.add_arguments(parser)
    sys.exit(run_process(parser, app.setup_from_args, argv))


if __name__ == "__main__":
    main()
