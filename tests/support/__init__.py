"""The project's own test support, importable as `support` in the suite (`pythonpath` in pyproject.toml) and
type-checked with the product (`files` of mypy): what only works from a source checkout and so is not shipped in
`caravanserai.testing`.

* `fleet`: the root-only fleet harness (network-namespace hosts, each with its own dockerd and agent, a
  three-member etcd, two apiservers and controller managers over mutual TLS from `deploy/certs.sh`).
* `customkinds`: the example WebFarm kind of `examples/webfarm/`.
* `dashboard`: an in-process `cara-dashboard` (built from the dashboard's own `__main__`).
* `processes`: `cara-apiserver` as a real process that can be SIGKILLed and restarted on its address.
"""
