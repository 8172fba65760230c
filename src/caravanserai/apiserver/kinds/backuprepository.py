"""BackupRepositories: where the restic backups of Persistent volumes go (the repository's URL, the Secret that
opens it). Not confidential: the password and the backend's credentials are in the Secret. A node reads only the
repositories that a project bound to it uses (`spec.volumes[].backup.repository`; the node authorizer's rule, see
`apiserver.auth` and `kinds.nodegraph`), and through them their Secrets.

Rules:

* `spec.url` is required and is a repository as restic names it: a local absolute path (`/srv/backups`, or
  `local:/srv/backups`), or one of the backends `rest:http(s)://HOST/…`, `sftp:…`, `s3:…`, `b2:…`, `azure:…`,
  `gs:…`, `swift:…`, `rclone:…` followed by a location. Nothing else is accepted; control characters never are.
  A REST URL must not carry a password (`user:password@`): every reader of the repository would see it and it
  would reach restic's arguments; credentials belong in the Secret.
* `spec.secret` is required, a Secret's name (DNS subdomain). Whether the Secret exists is not checked (as
  Kubernetes does not check references): the agent reports a missing one on the volume's status.
* `spec.initialize` is a bool (lets an agent run `restic init`).
"""

from __future__ import annotations

from urllib.parse import urlsplit

from caravanserai import meta, v1
from caravanserai.apiserver import validation
from caravanserai.apiserver.kinds.base import KindStrategy
from caravanserai.text.selectors import validate_dns_subdomain
from caravanserai.text.violations import Violations, quote

KIND = meta.KINDS["backuprepositories"]

BACKENDS = ("rest:", "sftp:", "s3:", "b2:", "azure:", "gs:", "swift:", "rclone:")
"""The restic backends a URL may name besides a local path (`local:` or an absolute path)."""

_FORMS = (
    "a local absolute path (/srv/backups), rest:http(s)://host/path, sftp:user@host:/path, s3:host/bucket/path, "
    "b2:bucket:path, azure:container:path, gs:bucket:path, swift:container:path or rclone:remote:path"
)


def _rest_problem(location: str) -> str | None:
    """Why `location` (what follows `rest:`) is not an http(s) URL restic can use, or None."""
    wanted = f"a rest: repository is rest:http://HOST[:PORT]/[PATH] or rest:https://…, not {quote('rest:' + location)}"
    try:
        parts = urlsplit(location)
        parts.port  # noqa: B018  # raises ValueError for a port that is not a number in range
    except ValueError:
        return wanted
    if parts.password is not None:  # checked first: a refusal never echoes a password
        return "must not carry a password (user:password@): put the credentials in the Secret"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return wanted
    return None


def url_problem(url: str) -> str | None:
    """Why `url` is not a restic repository this server accepts (see the module docstring), or None."""
    if any(ord(c) < 32 or ord(c) == 127 for c in url):
        return "must not contain control characters"
    if url.startswith("/"):
        return None
    if url.startswith("local:"):
        path = url.removeprefix("local:")
        return None if path.startswith("/") else f"a local repository needs an absolute path, not {quote(url)}"
    backend = next((b for b in BACKENDS if url.startswith(b)), None)
    if backend is None:
        return f"must be a restic repository: {_FORMS}; not {quote(url)}"
    location = url.removeprefix(backend)
    if not location.strip():
        return f"names the {backend[:-1]} backend but no location: {quote(url)}"
    return _rest_problem(location) if backend == "rest:" else None


def repository_spec(errors: Violations, spec: v1.BackupRepositorySpec) -> None:
    """The rules of `spec` (module docstring), every violation naming its field."""
    if errors.required("spec.url", spec.url):
        errors.check("spec.url", url_problem(spec.url))
    if errors.required("spec.secret", spec.secret):
        errors.check("spec.secret", validate_dns_subdomain(spec.secret))


class BackupRepositoryStrategy(KindStrategy[v1.BackupRepository]):
    """Generic behaviour plus the rules above; nodes read the repositories their bound projects use."""

    node_reads_referenced = True

    def validate(self, obj: v1.BackupRepository) -> None:
        validation.check_object(obj, kind=KIND.kind, name_rule=validate_dns_subdomain, spec_rule=repository_spec)

    def validate_status(self, obj: v1.BackupRepository) -> None:
        validation.check_status(obj, kind=KIND.kind, status_rule=validation.no_rules)


STRATEGY = BackupRepositoryStrategy(KIND)

__all__ = ["BACKENDS", "KIND", "STRATEGY", "BackupRepositoryStrategy", "repository_spec", "url_problem"]
