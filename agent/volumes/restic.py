"""restic as a subprocess of the agent, against one repository.

    restic = Restic(repository, clock=clock)
    summary = await restic.backup(mountpoint, host="node-a", tags=[...])

Guarantees:

* **Credentials only in the environment.** restic's environment is a few variables of the agent's own (PATH,
  HOME, TMPDIR, locale, certificates; never an inherited `RESTIC_*`) plus the repository's Secret's keys and
  `RESTIC_REPOSITORY`; its arguments name no repository and hold no secret, stdin is closed (restic never waits
  for a password), and logs show the subcommand only.
* **One clear error.** A failed command raises `ResticError` from `resticerrors.classify` (one line); output that
  is not what restic should print is a `FAILED` error too; a missing restic binary says so.
* **Bounded.** Each command has a timeout (`ResticSettings.timeout` for backups and restores, `quick_timeout` for
  the others, measured on the injected clock); past it, and when the caller is cancelled, restic is stopped with
  the process kit's `stop_process` (SIGTERM, then SIGKILL) and is gone before the error (or the cancellation)
  propagates.
* **Waits for a locked repository** (another agent pruning, say) for up to `lock_wait` seconds, retrying every
  `lock_retry` seconds; then the `LOCKED` error.
* **Initialises on demand**: a command that finds the repository not initialised runs `restic init` once when
  the BackupRepository allows it (`spec.initialize`) and is then repeated; otherwise the `NOT_INITIALISED` error.
"""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar
from urllib.parse import quote

import structlog

from caravanserai.agent.volumes import resticjson
from caravanserai.agent.volumes.repository import Repository
from caravanserai.agent.volumes.resticerrors import (
    FAILED,
    LOCKED,
    NOT_INITIALISED,
    TIMEOUT,
    ResticError,
    classify,
    redact,
)
from caravanserai.agent.volumes.resticjson import BackupSummary, Snapshot
from caravanserai.clock import Clock, run_within
from caravanserai.process.subprocesses import dies_with_parent, stop_process
from caravanserai.text.durations import format_duration

log = structlog.get_logger(__name__)

PASSED_THROUGH = ("PATH", "HOME", "TMPDIR", "XDG_CACHE_HOME", "LANG", "LC_ALL", "SSL_CERT_FILE", "SSL_CERT_DIR")
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class ResticSettings:
    """How restic is run: the binary, the timeouts (seconds) and how long a locked repository is waited for."""

    binary: str = "restic"
    cache_dir: str = ""  # restic's cache (--cache-dir); "": restic's default, under the agent's home
    timeout: float = 6 * 3600.0  # backup and restore
    quick_timeout: float = 300.0  # init, snapshots, forget --prune, stats
    lock_wait: float = 60.0
    lock_retry: float = 1.5  # seconds between attempts on a locked repository
    stop_grace: float = 5.0


REST_USER, REST_PASSWORD = "RESTIC_REST_USERNAME", "RESTIC_REST_PASSWORD"


def environment(repository: Repository, base: Mapping[str, str]) -> dict[str, str]:
    """restic's environment: `PASSED_THROUGH` variables of `base`, the Secret's keys, `RESTIC_REPOSITORY`.

    A REST repository's credentials (the Secret's RESTIC_REST_USERNAME and RESTIC_REST_PASSWORD) go into
    `RESTIC_REPOSITORY` as the URL's user info, the form every restic reads (0.14 ignores the two variables);
    they stay in the environment, never in arguments or logs."""
    env = {key: base[key] for key in PASSED_THROUGH if key in base}
    env.update(repository.env)
    user, password = env.pop(REST_USER, ""), env.pop(REST_PASSWORD, "")
    env["RESTIC_REPOSITORY"] = with_rest_credentials(repository.url, user, password)
    return env


def with_rest_credentials(url: str, user: str, password: str) -> str:
    """`url` with `user:password@` in front of its host when it is a rest: URL and a user is given (quoted)."""
    scheme, sep, rest = url.partition("://")
    if not user or not scheme.startswith("rest:") or not sep:
        return url
    auth = quote(user, safe="") + (":" + quote(password, safe="") if password else "")
    return f"{scheme}://{auth}@{rest}"


class Restic:
    """restic commands against `repository` (see the module docstring)."""

    def __init__(
        self,
        repository: Repository,
        *,
        clock: Clock,
        settings: ResticSettings | None = None,
        base_env: Mapping[str, str] | None = None,
    ) -> None:
        self.repository = repository
        self._clock = clock
        self._settings = settings or ResticSettings()
        self._env = environment(repository, os.environ if base_env is None else base_env)

    async def run(self, args: Sequence[str], *, cwd: str | None = None, long: bool = False) -> str:
        """Run `restic ARGS` (initialising the repository first when needed and allowed, waiting out locks);
        its stdout. `long`: the command may take `timeout` rather than `quick_timeout`."""
        try:
            return await self._run_locked(args, cwd=cwd, long=long)
        except ResticError as exc:
            if exc.kind != NOT_INITIALISED or not self.repository.initialize or args[0] == "init":
                raise
        await self.init()
        return await self._run_locked(args, cwd=cwd, long=long)

    async def init(self) -> None:
        """`restic init`; a repository initialised meanwhile (by another agent) is fine."""
        log.info("initialising restic repository", repository=self.repository.name, url=redact(self.repository.url))
        try:
            await self._exec(["init"], cwd=None, timeout=self._settings.quick_timeout)
        except ResticError as exc:
            if "already" not in exc.message and "exists" not in exc.message:
                raise

    async def _run_locked(self, args: Sequence[str], *, cwd: str | None, long: bool) -> str:
        settings = self._settings
        waited = 0.0
        while True:
            try:
                return await self._exec(args, cwd=cwd, timeout=settings.timeout if long else settings.quick_timeout)
            except ResticError as exc:
                if exc.kind != LOCKED or waited >= settings.lock_wait:
                    raise
            log.info("restic repository locked; waiting", repository=self.repository.name, command=args[0])
            await self._clock.sleep(settings.lock_retry)
            waited += settings.lock_retry

    async def _exec(self, args: Sequence[str], *, cwd: str | None, timeout: float) -> str:
        """One run of restic; stdout, or the classified `ResticError`."""
        action = args[0]
        cache = ["--cache-dir", self._settings.cache_dir] if self._settings.cache_dir else []
        binary = shutil.which(self._settings.binary)
        if binary is None:
            raise ResticError(FAILED, f"restic {action}: cannot run {self._settings.binary}: No such file or directory")
        try:
            proc = await asyncio.create_subprocess_exec(
                *dies_with_parent([binary, *cache, *args]),  # a killed agent leaves no restic running
                cwd=cwd,
                env=self._env,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )
        except OSError as exc:
            raise ResticError(FAILED, f"restic {action}: cannot run {self._settings.binary}: {exc.strerror}") from None
        try:
            out, err = await run_within(self._clock, proc.communicate(), timeout)
        except TimeoutError:
            raise ResticError(TIMEOUT, f"restic {action} did not finish within {format_duration(timeout)}") from None
        finally:
            if proc.returncode is None:
                await stop_process(proc, grace=self._settings.stop_grace)
        if proc.returncode != 0:
            raise classify(err.decode(errors="replace"), url=self.repository.url, action=action)
        return out.decode(errors="replace")

    # ---- the commands the agent uses ---------------------------------------------------------------------

    async def backup(self, cwd: str, *, host: str, tags: Sequence[str]) -> BackupSummary:
        """Back up the directory `cwd` (as path `.`: its files at the snapshot's root) with `host` and `tags`."""
        args = ["backup", ".", "--json", "--quiet", "--host", host, *(f"--tag={t}" for t in tags)]
        return _parsed("backup", resticjson.backup_summary, await self.run(args, cwd=cwd, long=True))

    async def forget(self, selector: str, keep: Sequence[str]) -> None:
        """Forget the snapshots tagged `selector` beyond `keep` (restic's --keep-* flags), all in one group, and
        prune the data only they used."""
        await self.run(["forget", "--tag", selector, "--group-by", "", *keep, "--prune", "--quiet"], long=True)

    async def snapshots(self, selector: str) -> list[Snapshot]:
        """The snapshots tagged `selector` (every tag of the comma-separated list), newest first."""
        return _parsed("snapshots", resticjson.snapshots, await self.run(["snapshots", "--json", "--tag", selector]))

    async def restore_size(self, snapshot_id: str) -> int:
        """The bytes a restore of `snapshot_id` writes."""
        out = await self.run(["stats", "--json", "--mode", "restore-size", snapshot_id])
        return _parsed("stats", resticjson.restore_size, out)

    async def restore(self, snapshot_id: str, target: str) -> None:
        """Restore `snapshot_id` into the directory `target` (its files land at `target`'s root)."""
        await self.run(["restore", snapshot_id, "--target", target, "--quiet"], long=True)


def _parsed(action: str, parse: Callable[[str], T], stdout: str) -> T:
    """`parse(stdout)`; output restic should not print is a `FAILED` error naming the command."""
    try:
        return parse(stdout)
    except ValueError as exc:
        raise ResticError(FAILED, f"restic {action}: unexpected output ({exc})") from None


__all__ = ["PASSED_THROUGH", "Restic", "ResticSettings", "environment"]
