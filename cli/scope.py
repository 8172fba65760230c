"""The options `-n/--namespace NS` and `-A/--all-namespaces` of caractrl, typed before or after the command, and the
client of a kind that every command uses (bound to the command's namespace, or to none with `-A`).

`hoist` moves the options from wherever they were typed to before the command, up to a `--` (what follows it,
`exec`'s command line, is never touched), so that the root command parses them. Cluster-wide kinds ignore both, as
kubectl's do.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import click

from caravanserai import meta
from caravanserai.client import Client, ResourceClient
from caravanserai.text.selectors import validate_dns_label

_WITH_VALUE = ("-n", "--namespace")
_FLAGS = ("-A", "--all-namespaces")


def hoist(args: Sequence[str]) -> list[str]:
    """`args` with every `-n NS`, `-nNS`, `--namespace[=]NS`, `-A` and `--all-namespaces` moved to the front (in
    their order), so that the root command parses them wherever they were typed; nothing after `--` moves."""
    moved: list[str] = []
    kept: list[str] = []
    items = list(args)
    i = 0
    while i < len(items):
        arg = items[i]
        if arg == "--":
            kept.extend(items[i:])
            break
        if arg in _WITH_VALUE:  # with its value (the root command reports one that is missing)
            moved += items[i : i + 2]
            i += 2
            continue
        if arg in _FLAGS or arg.startswith("--namespace=") or (arg.startswith("-n") and not arg.startswith("--")):
            moved.append(arg)
        else:
            kept.append(arg)
        i += 1
    return moved + kept


def scoped(client: Client, kind: str | meta.Kind, *, all_namespaces: bool = False) -> ResourceClient[Any]:
    """The client of `kind` a command uses: bound to the client's namespace (`-n`, the config's, or "default"), or,
    with `all_namespaces`, to none (its listings span every namespace). A cluster-wide kind's is never bound."""
    plural = kind.plural if isinstance(kind, meta.Kind) else kind
    return client.resource(plural, namespace=None if all_namespaces else client.namespace)


def nothing_found(client: Client, kind: meta.Kind, *, all_namespaces: bool = False) -> str:
    """kubectl's line for an empty listing: it names the namespace looked in ("No resources found in team-a
    namespace.") unless the kind is cluster-wide or every namespace was looked in."""
    if kind.cluster_scoped or all_namespaces:
        return "No resources found."
    return f"No resources found in {client.namespace} namespace."


def check_namespace(value: str | None) -> str | None:
    """A `-n` value: a DNS-1123 label (kubectl's rule for namespace names)."""
    if value is None:
        return None
    problem = validate_dns_label(value)
    if problem:
        raise click.BadParameter(f"{value!r}: {problem}", param_hint="'-n' / '--namespace'")
    return value


__all__ = ["check_namespace", "nothing_found", "hoist", "scoped"]
