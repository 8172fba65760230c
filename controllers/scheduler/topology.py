"""Where the placed projects are, counted per topology domain: the index behind affinity, anti-affinity and spread.

A project's inter-project rules ask "how many projects matching selector S run in the domain (the value of node
label K) of this node?". Scanning every placed project per node searched would cost O(projects × nodes) per
decision; `TopologyIndex` answers from counts kept up to date as projects are placed and removed:

* **Counts per selector.** For every selector some decision asked about (registered on first use by one scan of
  the placed projects, then maintained), the number of matching placed projects per node and, for every topology
  key asked with it, per domain. Placing or removing a project touches each registered selector once.
* **Required anti-affinity of placed projects** (the symmetric rule: a project may not go where a placed project's
  required anti-affinity would then be violated) is counted per (term, domain of its owner's node).
* **Domains.** Per registered topology key, the number of nodes in each domain (spread constraints compare a
  domain with the least loaded one, including domains that hold no matching project yet).
* **Placed** means bound as the informer shows it, or assumed by this scheduler (`ClusterState` decides which;
  this index only files what it is told). A node's label change moves its counts to its new domains.
* **Bounded.** At most `MAX_SELECTORS` selectors stay registered; the least recently used are dropped (and
  registered again, by one scan, if asked again).
* **Filed by label.** Registered selectors and placed required anti-affinity terms are filed under one label pair
  their selector requires (`LabelFiling`), so placing a project, or asking which placed terms refuse a project,
  looks only at the selectors that ask for one of its labels (plus those that ask for none), not at all of them.

**The what-if seam (for preemption).** Filters and scores read the index only through `TopologyView`
(`FilterContext.topology`). `TopologyIndex.without(names)` returns a view of the same counts with the projects
`names` taken out — "would the preemptor pass every filter on node N if projects V were removed?" — computed from
those few projects' records, without copying or rebuilding the index. Views are read-only and valid until the
index next changes (a decision never awaits, so within one decision they always are).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Hashable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar

from caravanserai.controllers.scheduler.snapshot import ProjectInfo
from caravanserai.project.affinity import ProjectSelector, ProjectTerm, topology_value

MAX_SELECTORS = 1024
K = TypeVar("K", bound=Hashable)
NO_LABELS: Mapping[str, str] = {}


@dataclass(frozen=True, slots=True)
class Placed:
    """A placed project as the index files it: its node, labels and required anti-affinity terms."""

    node: str
    labels: Mapping[str, str]
    anti_required: tuple[ProjectTerm, ...] = ()


class TopologyView(Protocol):
    """What inter-project filters and scores may ask (see the module docstring)."""

    def domain_counts(self, term: ProjectTerm) -> Mapping[str, int]:
        """Domain (value of `term.topology_key`) → placed projects matching `term.selector` there (no zeros)."""
        ...

    def matching(self, selector: ProjectSelector) -> int:
        """Placed projects matching `selector`, in the whole cluster."""
        ...

    def anti_affinity_against(self, labels: Mapping[str, str]) -> list[tuple[str, Mapping[str, int]]]:
        """For every required anti-affinity term of a placed project whose selector matches `labels`: (its
        topology key, domain → placed projects holding that term there). A project with `labels` may not go to a
        node whose domain has a count there."""
        ...

    def domains(self, key: str, node_filter: Callable[[str, Mapping[str, str]], bool] | None = None) -> Collection[str]:
        """The domains of `key` over every node (or over the nodes `node_filter(name, labels)` accepts)."""
        ...


@dataclass(slots=True)
class _SelectorCounts:
    selector: ProjectSelector
    per_node: dict[str, int] = field(default_factory=dict)
    per_domain: dict[str, dict[str, int]] = field(default_factory=dict)  # topology key → domain → count

    def add(self, node: str, labels: Mapping[str, str], sign: int) -> None:
        _bump(self.per_node, node, sign)
        for key, counts in self.per_domain.items():
            value = topology_value(node, labels, key)
            if value is not None:
                _bump(counts, value, sign)


def _bump(counts: dict[str, int], key: str, sign: int) -> None:
    updated = counts.get(key, 0) + sign
    if updated > 0:
        counts[key] = updated
    else:
        counts.pop(key, None)


class LabelFiling(Generic[K]):
    """Keys (selectors, or terms) filed with their selector under the first label pair it requires (`matchLabels`),
    or apart when it requires none: `matching(labels)` walks only the keys whose selector may match `labels`."""

    def __init__(self) -> None:
        self._by_pair: dict[tuple[str, str], dict[K, ProjectSelector]] = {}
        self._any: dict[K, ProjectSelector] = {}  # selectors without matchLabels (expressions only, or empty)

    def add(self, key: K, selector: ProjectSelector) -> None:
        bucket = self._by_pair.setdefault(selector.match_labels[0], {}) if selector.match_labels else self._any
        bucket[key] = selector

    def remove(self, key: K, selector: ProjectSelector) -> None:
        if not selector.match_labels:
            self._any.pop(key, None)
            return
        bucket = self._by_pair.get(selector.match_labels[0])
        if bucket is not None:
            bucket.pop(key, None)
            if not bucket:
                del self._by_pair[selector.match_labels[0]]

    def matching(self, labels: Mapping[str, str]) -> Iterator[K]:
        """The filed keys whose selector matches `labels`."""
        for key, selector in self._any.items():
            if selector.matches(labels):
                yield key
        by_pair = self._by_pair
        if by_pair:
            for pair in labels.items():
                bucket = by_pair.get(pair)
                if bucket is not None:
                    for key, selector in bucket.items():
                        if selector.matches(labels):
                            yield key


class TopologyIndex:
    """The live index (see the module docstring). Changed only by `ClusterState`, between decisions."""

    def __init__(self) -> None:
        self._placed: dict[str, Placed] = {}
        self._on_node: dict[str, set[str]] = {}  # node → names placed there
        self._node_labels: dict[str, Mapping[str, str]] = {}
        self._selectors: dict[ProjectSelector, _SelectorCounts] = {}  # in order of last use
        self._domains: dict[str, dict[str, int]] = {}  # topology key → domain → nodes
        self._anti: dict[ProjectTerm, dict[str, int]] = {}  # placed required anti terms → domain → count
        self._selectors_filed: LabelFiling[ProjectSelector] = LabelFiling()  # `_selectors`, by label
        self._anti_filed: LabelFiling[ProjectTerm] = LabelFiling()  # `_anti`, by label

    # ---- changes ------------------------------------------------------------------------------------------------

    def place(self, name: str, placed: Placed | None) -> None:
        """File `name` as `placed` (None: not placed any more)."""
        old = self._placed.get(name)
        if old == placed:
            return
        if old is not None:
            del self._placed[name]
            self._on_node[old.node].discard(name)
            self._apply(old, -1)
        if placed is not None:
            self._placed[name] = placed
            self._on_node.setdefault(placed.node, set()).add(name)
            self._apply(placed, 1)

    def _apply(self, placed: Placed, sign: int) -> None:
        node, labels = placed.node, placed.labels
        node_labels = self._node_labels.get(node, NO_LABELS)
        selectors = self._selectors
        for selector in self._selectors_filed.matching(labels):
            selectors[selector].add(node, node_labels, sign)
        for term in placed.anti_required:
            value = topology_value(node, node_labels, term.topology_key)
            if value is not None:
                counts = self._anti.get(term)
                if counts is None:
                    counts = self._anti[term] = {}
                    self._anti_filed.add(term, term.selector)
                _bump(counts, value, sign)

    def set_node(self, name: str, labels: Mapping[str, str]) -> None:
        """Record a node's labels (a change moves its projects' counts to its new domains)."""
        old = self._node_labels.get(name)
        if old == labels:
            return
        here = [self._placed[n] for n in self._on_node.get(name, ())]
        for placed in here:
            self._apply(placed, -1)
        self._move_node_domains(name, old, -1)
        self._node_labels[name] = dict(labels)
        self._move_node_domains(name, labels, 1)
        for placed in here:
            self._apply(placed, 1)

    def delete_node(self, name: str) -> None:
        old = self._node_labels.pop(name, None)
        self._move_node_domains(name, old, -1)

    def _move_node_domains(self, name: str, labels: Mapping[str, str] | None, sign: int) -> None:
        if labels is None:
            return
        for key, counts in self._domains.items():
            value = topology_value(name, labels, key)
            if value is not None:
                _bump(counts, value, sign)

    # ---- reading (TopologyView) ---------------------------------------------------------------------------------

    def domain_counts(self, term: ProjectTerm) -> Mapping[str, int]:
        counts = self._selector(term.selector)
        per_domain = counts.per_domain.get(term.topology_key)
        if per_domain is None:
            per_domain = counts.per_domain[term.topology_key] = {}
            key, node_labels = term.topology_key, self._node_labels
            for node, count in counts.per_node.items():
                value = topology_value(node, node_labels.get(node, NO_LABELS), key)
                if value is not None:
                    per_domain[value] = per_domain.get(value, 0) + count
        return per_domain

    def matching(self, selector: ProjectSelector) -> int:
        return sum(self._selector(selector).per_node.values())

    def anti_affinity_against(self, labels: Mapping[str, str]) -> list[tuple[str, Mapping[str, int]]]:
        anti = self._anti
        return [(term.topology_key, anti[term]) for term in self._anti_filed.matching(labels) if anti[term]]

    def domains(self, key: str, node_filter: Callable[[str, Mapping[str, str]], bool] | None = None) -> Collection[str]:
        if node_filter is not None:
            nodes = self._node_labels.items()
            found = (topology_value(n, labels, key) for n, labels in nodes if node_filter(n, labels))
            return {value for value in found if value is not None}
        counts = self._domains.get(key)
        if counts is None:
            counts = self._domains[key] = {}
            for node, labels in self._node_labels.items():
                value = topology_value(node, labels, key)
                if value is not None:
                    counts[value] = counts.get(value, 0) + 1
        return counts.keys()

    def _selector(self, selector: ProjectSelector) -> _SelectorCounts:
        counts = self._selectors.pop(selector, None)
        if counts is None:
            counts = _SelectorCounts(selector)
            for placed in self._placed.values():
                if selector.matches(placed.labels):
                    _bump(counts.per_node, placed.node, 1)
            if len(self._selectors) >= MAX_SELECTORS:
                for stale in list(self._selectors)[: MAX_SELECTORS // 2]:
                    del self._selectors[stale]
                    self._selectors_filed.remove(stale, stale)
            self._selectors_filed.add(selector, selector)
        self._selectors[selector] = counts  # most recently used last
        return counts

    # ---- what-if ------------------------------------------------------------------------------------------------

    def without(self, names: Iterable[str]) -> TopologyView:
        """A view of the counts with the placed projects `names` taken out (unknown names are ignored)."""
        return _Without(self, [self._placed[n] for n in names if n in self._placed])

    def placed(self, name: str) -> Placed | None:
        return self._placed.get(name)

    def __len__(self) -> int:
        return len(self._placed)


@dataclass(frozen=True, slots=True)
class _Without:
    """`TopologyIndex.without`: the base counts minus those of `removed`, worked out per question."""

    base: TopologyIndex
    removed: list[Placed]

    def domain_counts(self, term: ProjectTerm) -> Mapping[str, int]:
        counts = self.base.domain_counts(term)
        gone = [p for p in self.removed if term.selector.matches(p.labels)]
        return _subtract(counts, gone, term.topology_key, self.base) if gone else counts

    def matching(self, selector: ProjectSelector) -> int:
        return self.base.matching(selector) - sum(1 for p in self.removed if selector.matches(p.labels))

    def anti_affinity_against(self, labels: Mapping[str, str]) -> list[tuple[str, Mapping[str, int]]]:
        out: list[tuple[str, Mapping[str, int]]] = []
        for term, counts in self.base._anti.items():
            if not counts or not term.selector.matches(labels):
                continue
            gone = [p for p in self.removed if term in p.anti_required]
            left = _subtract(counts, gone, term.topology_key, self.base) if gone else counts
            if left:
                out.append((term.topology_key, left))
        return out

    def domains(self, key: str, node_filter: Callable[[str, Mapping[str, str]], bool] | None = None) -> Collection[str]:
        return self.base.domains(key, node_filter)


def _subtract(counts: Mapping[str, int], gone: list[Placed], key: str, base: TopologyIndex) -> dict[str, int]:
    left = dict(counts)
    for placed in gone:
        value = topology_value(placed.node, base._node_labels.get(placed.node, NO_LABELS), key)
        if value is not None:
            _bump(left, value, -1)
    return left


def node_rules(project: ProjectInfo) -> Callable[[str, Mapping[str, str]], bool] | None:
    """Whether a node (name, labels) passes the project's nodeSelector and required node affinity; None when the
    project has neither (every node does)."""
    selector, placement = project.node_selector, project.placement
    if not selector and not placement.node_required:
        return None

    def passes(name: str, labels: Mapping[str, str]) -> bool:
        return all(labels.get(k) == v for k, v in selector.items()) and placement.node_matches(labels)

    return passes


def least_loaded(counts: Mapping[str, int], domains: Collection[str]) -> int:
    """The fewest matching projects in one of `domains` (`counts` holds no zeros; 0 when some domain is empty)."""
    covered = sum(1 for value in counts if value in domains)
    if not domains or covered < len(domains):
        return 0
    return min(counts[value] for value in domains)


EMPTY_TOPOLOGY: TopologyView = TopologyIndex()
"""A view with no projects and no nodes (the default of `FilterContext.topology`)."""


__all__ = [
    "EMPTY_TOPOLOGY",
    "LabelFiling",
    "MAX_SELECTORS",
    "Placed",
    "TopologyIndex",
    "TopologyView",
    "least_loaded",
    "node_rules",
]
