"""`caractrl completion bash|zsh|fish`: the shell script that enables tab completion (click's completion).

    source <(caractrl completion bash)                       # bash, current shell
    caractrl completion zsh > "${fpath[1]}/_caractrl"         # zsh
    caractrl completion fish > ~/.config/fish/completions/caractrl.fish

Commands, options, resource types and — asking the server — object names are completed.
"""

from __future__ import annotations

import click
from click.shell_completion import get_completion_class

SHELLS = ("bash", "zsh", "fish")


def completion_script(root: click.Command, shell: str, prog_name: str) -> str:
    """The completion script for `shell`, bound to the program name the user typed (caractrl or caractl)."""
    complete_class = get_completion_class(shell)
    if complete_class is None:
        raise click.BadParameter(f"unsupported shell {shell!r}")
    complete_var = "_{}_COMPLETE".format(prog_name.replace("-", "_").replace(".", "_").upper())
    return complete_class(root, {}, prog_name, complete_var).source()


@click.command("completion")
@click.argument("shell", type=click.Choice(SHELLS))
@click.pass_context
def completion(ctx: click.Context, shell: str) -> None:
    """Print the shell completion script for SHELL (bash, zsh or fish)."""
    root = ctx.find_root()
    click.echo(completion_script(root.command, shell, root.info_name or "caractrl"))


__all__ = ["SHELLS", "completion", "completion_script"]
