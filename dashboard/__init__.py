"""`cara-dashboard`: a live web dashboard of a Caravanserai cluster (one more client process, like the agent).

An aiohttp server keeps shared informers of every kind the client knows and serves a plain HTML/CSS/JS page
(package data under `static/`, no CDN, no build step) plus the JSON endpoints the page reads, documented in
docs/dashboard.md; server-sent events tell the page what changed. Actions (apply a manifest, delete a project,
cordon/uncordon/drain a node) are made with the dashboard's own identity; `--read-only` refuses them.
"""
