"""`caractrl logs PROJECT[/SERVICE]`: container output, streamed from the agent of the project's node.

    caractrl logs web                 # every service; lines prefixed `[service] ` when there are several
    caractrl logs web/api -f          # one service, following
    caractrl logs web -c api --tail 20 --timestamps

The API server does not relay logs: caractrl calls `caravanserai.v1.Agent/Logs` on the agent of the project's node,
through `caravanserai.client.agentlogs` (how the agent is found is written there).
"""

from __future__ import annotations

import sys
from typing import IO

import click

from caravanserai import v1
from caravanserai.cli.agents import check_service
from caravanserai.cli.common import complete_names, pass_settings, run
from caravanserai.cli.config import Settings
from caravanserai.cli.errors import CommandError
from caravanserai.cli.resources import get_object
from caravanserai.cli.tables import project_reason
from caravanserai.client.agentlogs import agent_logs
from caravanserai.errors import ApiError, FailedPrecondition, Forbidden, Unauthenticated, Unavailable


def check_scheduled(project: v1.Project, service: str) -> None:
    """Refuse projects not bound to a node and services the project does not have."""
    name = project.metadata.name
    if not project.status.node_ref:
        cond = project_reason(project)
        why = f": {cond.message}" if cond is not None and cond.message else ""
        raise CommandError(f'error: project "{name}" is not on a node (phase {project.status.phase}){why}')
    check_service(project, service)


async def stream_logs(
    settings: Settings, node: v1.Node, request: v1.LogsRequest, *, prefix: bool, out: IO[str]
) -> None:
    """Copy the lines of the agent of `node` to `out` (`[service] ` first when `prefix`)."""
    lines = agent_logs(node, request, credentials=settings.credentials(), token=settings.bearer_token())
    try:
        async for line in lines:
            text = line.data.decode("utf-8", errors="replace").rstrip("\n")
            out.write(f"[{line.service}] {text}\n" if prefix else f"{text}\n")
            if request.follow:
                out.flush()
    except (FailedPrecondition, Unavailable) as err:
        raise CommandError(f"error: {err.message}") from err
    except (Forbidden, Unauthenticated) as err:
        raise CommandError(f"error: the agent of node/{node.metadata.name} refused: {err.message}") from err
    except ApiError as err:
        raise CommandError(f"Error from agent ({type(err).__name__}): {err.message}") from err
    finally:
        out.flush()


async def _logs(settings: Settings, request: v1.LogsRequest) -> None:
    async with settings.client() as client:
        project = await get_object(client.projects, request.project)
        check_scheduled(project, request.service)
        request.namespace = project.metadata.namespace  # the agent finds the containers by namespace and name
        node = await get_object(client.nodes, project.status.node_ref)
    prefix = not request.service and len(project.spec.services) > 1
    await stream_logs(settings, node, request, prefix=prefix, out=sys.stdout)


@click.command("logs")
@click.argument("target", metavar="PROJECT[/SERVICE]", shell_complete=complete_names)
@click.option("-c", "--service", default="", help="Only this service (same as PROJECT/SERVICE).")
@click.option("-f", "--follow", is_flag=True, help="Keep streaming new output.")
@click.option("--tail", type=int, default=-1, show_default=True, help="Lines to show from the end; -1 for all.")
@click.option("--timestamps", is_flag=True, help="Prefix each line with its RFC 3339 time.")
@pass_settings
def logs(settings: Settings, target: str, service: str, follow: bool, tail: int, timestamps: bool) -> None:
    """Print the container output of a project's services."""
    project, _, from_target = target.partition("/")
    if from_target and service and from_target != service:
        raise click.UsageError(f"service given twice: {from_target!r} and {service!r}")
    if not project:
        raise click.UsageError("PROJECT must not be empty")
    service = from_target or service
    run(
        _logs(
            settings, v1.LogsRequest(project=project, service=service, follow=follow, tail=tail, timestamps=timestamps)
        )
    )


# a mark on the click command, read by cli/common.py with getattr (click declares no such attribute)
logs.fixed_resource = "projects"  # type: ignore[attr-defined]  # a mark read by cli/common.py with getattr; click declares no such attribute

__all__ = ["check_scheduled", "logs", "stream_logs"]
