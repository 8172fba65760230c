"""Every Python code block of docs/*.md runs, against a real etcd and apiserver.

The blocks of one page run in order in one namespace (so later blocks use what earlier ones defined), with
top-level `await` allowed. The namespace starts with `client` (a connected `Client` of a fresh apiserver with its
own key prefix), and `cara_client`, `cara_apiserver`, `cara_etcd`, `fake_clock`, `fake_client` (the plugin's
fixtures). After a block, each `test_…` coroutine function it defined is called with the fixtures its parameters
name. The directories of examples/ttl_controller and examples/backup-operator are importable.

A comment on the line before a block changes what happens to it:

* `<!-- docs-test: skip (why) -->`: not run; the reason is required.
* `<!-- docs-test: excerpt PATH -->`: a shortened quote of the file PATH (relative to the repository): each of its
  lines, without trailing `# comments`, must occur in that file in the same order.
"""

from __future__ import annotations

import ast
import inspect
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from caravanserai.client import Client
from caravanserai.testing.apiserver import RunningApiServer
from caravanserai.testing.clock import FakeClock
from caravanserai.testing.etcd import EtcdServer
from caravanserai.testing.fakeclient import FakeClient

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted((ROOT / "docs").glob("*.md"))
FENCE = re.compile(r"^```python\s*$")
MARKER = re.compile(r"^<!-- docs-test: (?P<what>skip|excerpt) ?(?P<arg>.*?) ?-->$")


@dataclass(frozen=True)
class Block:
    page: Path
    line: int  # of the first code line, 1-based
    code: str
    marker: str = ""  # "", "skip" or "excerpt"
    argument: str = ""


def blocks(page: Path) -> list[Block]:
    """The ```python blocks of a page, with the marker on the line before each."""
    lines = page.read_text(encoding="utf-8").splitlines()
    found: list[Block] = []
    index = 0
    while index < len(lines):
        if not FENCE.match(lines[index]):
            index += 1
            continue
        end = next(i for i in range(index + 1, len(lines)) if lines[i].startswith("```"))
        before = lines[index - 1].strip() if index else ""
        marker = MARKER.match(before)
        if before.startswith("<!-- docs-test") and marker is None:
            raise AssertionError(f"{page.name}:{index}: unknown docs-test marker {before!r}")
        code = "\n".join(lines[index + 1 : end]) + "\n"
        what, arg = (marker["what"], marker["arg"]) if marker else ("", "")
        found.append(Block(page, index + 2, code, what, arg))
        index = end + 1
    return found


def _normalized(line: str) -> str:
    return re.sub(r"\s+#.*$", "", line).strip()


def check_excerpt(block: Block) -> None:
    source = [_normalized(line) for line in (ROOT / block.argument).read_text(encoding="utf-8").splitlines()]
    position = 0
    for line in filter(None, (_normalized(line) for line in block.code.splitlines())):
        try:
            position = source.index(line, position) + 1
        except ValueError:
            raise AssertionError(f"{block.page.name}:{block.line}: {line!r} is not in {block.argument}") from None


async def run_block(block: Block, namespace: dict[str, Any], fixtures: dict[str, Any]) -> None:
    before = set(namespace)
    code = compile(block.code, f"{block.page.name}:{block.line}", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    result = eval(code, namespace)  # noqa: S307 - the docs' own code
    if inspect.iscoroutine(result):
        await result
    for name in sorted(set(namespace) - before):
        function = namespace[name]
        if name.startswith("test_") and inspect.iscoroutinefunction(function):
            wanted = inspect.signature(function).parameters
            await function(**{parameter: fixtures[parameter] for parameter in wanted})


def test_every_page_has_been_looked_at() -> None:
    assert PAGES, "no docs/*.md found"
    skipped = [b for page in PAGES for b in blocks(page) if b.marker == "skip"]
    assert all(b.argument.startswith("(") and b.argument.endswith(")") and len(b.argument) > 2 for b in skipped), (
        "a skipped block needs its reason: <!-- docs-test: skip (why) -->"
    )


@pytest.mark.parametrize("page", [p for p in PAGES if blocks(p)], ids=lambda p: p.name)
async def test_python_blocks_of_the_docs_run(
    page: Path,
    cara_etcd: EtcdServer,
    cara_apiserver: RunningApiServer,
    cara_client: Client,
    fake_clock: FakeClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.syspath_prepend(str(ROOT / "examples" / "ttl_controller"))
    monkeypatch.syspath_prepend(str(ROOT / "examples" / "backup-operator"))
    fixtures = {
        "cara_etcd": cara_etcd,
        "cara_apiserver": cara_apiserver,
        "cara_client": cara_client,
        "fake_clock": fake_clock,
        "fake_client": FakeClient(clock=fake_clock),
    }
    namespace: dict[str, Any] = {"__name__": f"docs.{page.stem}", "client": cara_client, **fixtures}
    ran = 0
    for block in blocks(page):
        if block.marker == "skip":
            continue
        if block.marker == "excerpt":
            check_excerpt(block)
            continue
        await run_block(block, namespace, fixtures)
        ran += 1
    assert ran or all(b.marker for b in blocks(page))
    sys.modules.pop("ttl_controller", None)
