"""deploy/: the Prometheus scrape configuration and the Grafana dashboard name metrics that exist."""

from __future__ import annotations

import json
import re
from pathlib import Path

from ruamel.yaml import YAML

from caravanserai.apiserver import metrics as apiserver_metrics
from caravanserai.controller import metrics as controller_metrics

DEPLOY = Path(__file__).resolve().parents[3] / "deploy"


def test_prometheus_config_scrapes_the_default_addresses() -> None:
    config = YAML(typ="safe").load((DEPLOY / "prometheus.yml").read_text())
    targets = {job["job_name"]: job["static_configs"][0]["targets"] for job in config["scrape_configs"]}
    assert targets["cara-apiserver"] == ["127.0.0.1:7423"]
    assert targets["cara-agent"] == ["127.0.0.1:7422"]


def test_grafana_dashboard_queries_known_metrics() -> None:
    dashboard = json.loads((DEPLOY / "grafana-dashboard.json").read_text())
    queries = [t["expr"] for panel in dashboard["panels"] for t in panel["targets"]]
    used = {
        re.sub(r"_(bucket|count|sum|total)$", "", name) for q in queries for name in re.findall(r"caravanserai_\w+", q)
    }
    sources = Path(apiserver_metrics.__file__).read_text() + Path(controller_metrics.__file__).read_text()
    for name in used:
        assert name.removeprefix("caravanserai_apiserver_") in sources or name in sources, f"{name} is not exported"
    assert len(dashboard["panels"]) >= 8
