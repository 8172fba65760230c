"""Package discovery for the mapped folders; all metadata lives in pyproject.toml.

`src/caravanserai/` is the library; `controllers/`, `agent/` and `cli/` at the top of the repository install as
`caravanserai.controllers`, `caravanserai.agent` and `caravanserai.cli`.
"""

from setuptools import find_packages, setup

MAPPED = {"caravanserai.controllers": "controllers", "caravanserai.agent": "agent", "caravanserai.cli": "cli"}

packages = find_packages("src", include=["caravanserai", "caravanserai.*"])
package_dir = {"": "src"}
for name, folder in MAPPED.items():
    packages.append(name)
    package_dir[name] = folder
    for sub in find_packages(folder):
        packages.append(f"{name}.{sub}")
        package_dir[f"{name}.{sub}"] = f"{folder}/{sub.replace('.', '/')}"

setup(packages=packages, package_dir=package_dir)
