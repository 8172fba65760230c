"""Package discovery for the mapped folders; all metadata lives in pyproject.toml.

`src/caravanserai/` is the library; `controllers/`, `agent/`, `cli/` and `dashboard/` at the top of the repository
install as `caravanserai.controllers`, `caravanserai.agent`, `caravanserai.cli` and `caravanserai.dashboard`.
"""

from setuptools import find_packages, setup

MAPPED = {
    "caravanserai.controllers": "controllers",
    "caravanserai.agent": "agent",
    "caravanserai.cli": "cli",
    "caravanserai.dashboard": "dashboard",
}

# src/caravanserai/{controllers,agent,cli,dashboard} are symlinks to the mapped folders so that tools which walk the
# source
# tree (import-linter, mypy) see one package; the mapping below is what installs them.
packages = [
    p
    for p in find_packages("src", include=["caravanserai", "caravanserai.*"])
    if not any(p == name or p.startswith(name + ".") for name in MAPPED)
]
package_dir = {"": "src"}
for name, folder in MAPPED.items():
    packages.append(name)
    package_dir[name] = folder
    for sub in find_packages(folder):
        packages.append(f"{name}.{sub}")
        package_dir[f"{name}.{sub}"] = f"{folder}/{sub.replace('.', '/')}"

setup(packages=packages, package_dir=package_dir)
