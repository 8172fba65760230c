"""The ProjectSet controller: spec.replicas projects from a template, rolling updates, revisions (docs/replicas.md).

* `plan`: the pure next step (scale, RollingUpdate within maxSurge/maxUnavailable, Recreate), tested with tables;
* `progress`: the status (counts, revisions, the Progressing and Available conditions, the progress deadline);
* `templates`: replicas made from a revision's template (names, labels, owner reference, the default spread);
* `expectations`: what the last step still waits to see in the cache;
* `reconciler`: the controller; `app`: its wiring in `cara-controller-manager`.
"""
