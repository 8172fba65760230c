"""The routes controller: derives one Route per project that declares an ingress (`caravanserai.project.routing`)
from the project and the nodes it names, so that a node's ingress reads Routes instead of every project and node
(`reconciler`), run by `cara-controller-manager --controllers routes`."""
