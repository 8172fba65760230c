"""A project's placement language, read off its spec: node affinity, project (anti-)affinity, spread constraints.

The scheduler filters and scores with these records, the apiserver validates the spec against the same operator
sets, and placement upkeep re-checks required node affinity after a spec change: one home for what the fields
mean (docs/scheduling.md is the user's side of it).

Semantics (Kubernetes' nodeAffinity, podAffinity/podAntiAffinity and topologySpreadConstraints):

* **Node requirements** (`Requirement` over node labels): `In` (the label is present with one of the values),
  `NotIn` (absent, or present with none of them), `Exists`, `DoesNotExist`, `Gt`/`Lt` (present, an integer, and
  greater/less than the single integer value; a label that is not an integer never matches).
* **Node terms**: a term is the AND of its requirements; `required` terms are ORed (the node must match one; a
  term without requirements matches no node); a `preferred` term adds its weight to every node it matches.
* **Project selectors** (`ProjectSelector`): every `matchLabels` pair and every `matchExpressions` requirement
  (In, NotIn, Exists, DoesNotExist) must hold; the empty selector selects every project. As in Kubernetes, a
  project's affinity, anti-affinity and spread terms select projects of **the project's own namespace** only
  (`placement_of(spec, namespace=...)` gives its selectors that namespace; the projects they are matched against
  carry theirs as the pseudo-label `NAMESPACE_LABEL`, see `labels_of`). A selector without a namespace (records
  built without one) selects projects of every namespace.
* **Topology**: a term's `topologyKey` names a node label; projects count in the *domain* of their node, the
  value of that label there. `caravanserai.io/hostname` falls back to the node's name on a node without the
  label, so per-node rules work on nodes registered without it.

Everything here is pure and hashable: records are frozen, built once per project generation.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from caravanserai import v1

IN, NOT_IN, EXISTS, DOES_NOT_EXIST, GT, LT = "In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"
LABEL_OPERATORS = (IN, NOT_IN, EXISTS, DOES_NOT_EXIST)
"""The operators of a project label selector."""
NODE_OPERATORS = (*LABEL_OPERATORS, GT, LT)
"""The operators of a node selector requirement."""
DO_NOT_SCHEDULE, SCHEDULE_ANYWAY = "DoNotSchedule", "ScheduleAnyway"
WHEN_UNSATISFIABLE = (DO_NOT_SCHEDULE, SCHEDULE_ANYWAY)
HOSTNAME_KEY = "caravanserai.io/hostname"
ZONE_KEY = "caravanserai.io/zone"
MIN_WEIGHT, MAX_WEIGHT = 1, 100
NAMESPACE_LABEL = "(namespace)"
"""The pseudo-label under which `labels_of` carries a project's namespace (not a valid label key, so no project
label and no selector a user writes can name it)."""


def as_integer(text: str) -> int | None:
    """`text` as Gt/Lt read it (a decimal integer, optionally signed), or None."""
    try:
        return int(text, 10)
    except ValueError:
        return None


@dataclass(frozen=True, slots=True)
class Requirement:
    """`key operator values` over a label map (see the module docstring for each operator)."""

    key: str
    operator: str
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        value = labels.get(self.key)
        operator = self.operator
        if operator == IN:
            return value is not None and value in self.values
        if operator == NOT_IN:
            return value is None or value not in self.values
        if operator == EXISTS:
            return value is not None
        if operator == DOES_NOT_EXIST:
            return value is None
        if value is None or len(self.values) != 1:
            return False
        have, bound = as_integer(value), as_integer(self.values[0])
        if have is None or bound is None:
            return False
        return have > bound if operator == GT else have < bound if operator == LT else False

    def __str__(self) -> str:
        if self.operator in (EXISTS, DOES_NOT_EXIST):
            return f"{self.key} {self.operator}"
        return f"{self.key} {self.operator} ({','.join(self.values)})"


@dataclass(frozen=True, slots=True)
class NodeTerm:
    """An AND of requirements over node labels; a term without requirements matches no node."""

    requirements: tuple[Requirement, ...]

    def matches(self, labels: Mapping[str, str]) -> bool:
        return bool(self.requirements) and all(r.matches(labels) for r in self.requirements)


@dataclass(frozen=True, slots=True)
class ProjectSelector:
    """A label selector over projects: `match_labels` pairs and `expressions`, all of which must hold."""

    match_labels: tuple[tuple[str, str], ...] = ()
    expressions: tuple[Requirement, ...] = ()
    namespace: str = ""  # only projects of this namespace ("": of every namespace)

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether a project with `labels` (as `labels_of` gives them: its namespace included) is selected."""
        if self.namespace and labels.get(NAMESPACE_LABEL) != self.namespace:
            return False
        for key, value in self.match_labels:
            if labels.get(key) != value:
                return False
        return all(r.matches(labels) for r in self.expressions)

    def __str__(self) -> str:
        parts = [f"{key}={value}" for key, value in self.match_labels] + [str(r) for r in self.expressions]
        return ",".join(parts) or "(every project)"


@dataclass(frozen=True, slots=True)
class ProjectTerm:
    """Projects matching `selector`, counted per value of the node label `topology_key`."""

    selector: ProjectSelector
    topology_key: str


@dataclass(frozen=True, slots=True)
class SpreadConstraint:
    """At most `max_skew` more matching projects in a domain of `topology_key` than in the least loaded one."""

    max_skew: int
    topology_key: str
    when_unsatisfiable: str
    selector: ProjectSelector

    @property
    def term(self) -> ProjectTerm:
        return ProjectTerm(self.selector, self.topology_key)

    @property
    def hard(self) -> bool:
        """True for DoNotSchedule (a filter), False for ScheduleAnyway (a score)."""
        return self.when_unsatisfiable != SCHEDULE_ANYWAY


@dataclass(frozen=True, slots=True)
class Placement:
    """Everything a project says about where it goes, besides nodeSelector and tolerations."""

    node_required: tuple[NodeTerm, ...] = ()
    node_preferred: tuple[tuple[int, NodeTerm], ...] = ()
    affinity_required: tuple[ProjectTerm, ...] = ()
    affinity_preferred: tuple[tuple[int, ProjectTerm], ...] = ()
    anti_required: tuple[ProjectTerm, ...] = ()
    anti_preferred: tuple[tuple[int, ProjectTerm], ...] = ()
    spread: tuple[SpreadConstraint, ...] = ()

    def node_matches(self, labels: Mapping[str, str]) -> bool:
        """Whether a node with `labels` satisfies the required node affinity (True when there is none)."""
        return not self.node_required or any(term.matches(labels) for term in self.node_required)

    @property
    def inter_project(self) -> bool:
        """Whether any rule depends on other projects (affinity, anti-affinity, spread)."""
        return bool(
            self.affinity_required or self.affinity_preferred or self.anti_required or self.anti_preferred
        ) or bool(self.spread)


NO_PLACEMENT = Placement()


def topology_value(node: str, labels: Mapping[str, str], key: str) -> str | None:
    """The domain of node `node` (with `labels`) for `key`: the label's value; for `caravanserai.io/hostname`
    the node's name when the label is missing; None when the node has no such label."""
    value = labels.get(key)
    if value is None and key == HOSTNAME_KEY:
        return node
    return value


def short_key(key: str) -> str:
    """A topology key for a sentence: `caravanserai.io/zone` → "zone"."""
    return key.rpartition("/")[2]


def _requirements(
    items: Iterable[v1.NodeSelectorRequirement] | Iterable[v1.LabelSelectorRequirement],
) -> tuple[Requirement, ...]:
    return tuple(Requirement(r.key, r.operator, tuple(r.values)) for r in items)


def selector_of(selector: v1.LabelSelector, namespace: str = "") -> ProjectSelector:
    """The record of a LabelSelector message (match_labels sorted, so equal selectors are equal records), selecting
    projects of `namespace` ("": of every namespace)."""
    return ProjectSelector(
        tuple(sorted(selector.match_labels.items())), _requirements(selector.match_expressions), namespace
    )


def labels_of(labels: Mapping[str, str], namespace: str) -> dict[str, str]:
    """A project's labels as selectors match them: its own, and its namespace under `NAMESPACE_LABEL` (when it has
    one)."""
    out = dict(labels)
    if namespace:
        out[NAMESPACE_LABEL] = namespace
    return out


def _term(term: v1.ProjectAffinityTerm, namespace: str) -> ProjectTerm:
    return ProjectTerm(selector_of(term.label_selector, namespace), term.topology_key)


def _project_rules(
    rules: v1.ProjectAffinity, namespace: str
) -> tuple[tuple[ProjectTerm, ...], tuple[tuple[int, ProjectTerm], ...]]:
    required = tuple(_term(t, namespace) for t in rules.required)
    return required, tuple((p.weight, _term(p.term, namespace)) for p in rules.preferred)


def placement_of(spec: v1.ProjectSpec, namespace: str = "") -> Placement:
    """The placement rules of a project spec (`NO_PLACEMENT` when it has none); its project selectors select
    projects of `namespace`, the project's own ("": every namespace)."""
    if not spec.HasField("affinity") and not spec.topology_spread_constraints:
        return NO_PLACEMENT
    affinity = spec.affinity
    nodes = affinity.node_affinity
    affinity_required, affinity_preferred = _project_rules(affinity.project_affinity, namespace)
    anti_required, anti_preferred = _project_rules(affinity.project_anti_affinity, namespace)
    spread = tuple(
        SpreadConstraint(
            c.max_skew,
            c.topology_key,
            c.when_unsatisfiable or DO_NOT_SCHEDULE,
            selector_of(c.label_selector, namespace),
        )
        for c in spec.topology_spread_constraints
    )
    return Placement(
        node_required=tuple(NodeTerm(_requirements(t.match_expressions)) for t in nodes.required),
        node_preferred=tuple(
            (p.weight, NodeTerm(_requirements(p.preference.match_expressions))) for p in nodes.preferred
        ),
        affinity_required=affinity_required,
        affinity_preferred=affinity_preferred,
        anti_required=anti_required,
        anti_preferred=anti_preferred,
        spread=spread,
    )


__all__ = [
    "DOES_NOT_EXIST",
    "DO_NOT_SCHEDULE",
    "EXISTS",
    "GT",
    "HOSTNAME_KEY",
    "IN",
    "LABEL_OPERATORS",
    "LT",
    "MAX_WEIGHT",
    "MIN_WEIGHT",
    "NODE_OPERATORS",
    "NOT_IN",
    "NAMESPACE_LABEL",
    "NO_PLACEMENT",
    "NodeTerm",
    "Placement",
    "ProjectSelector",
    "ProjectTerm",
    "Requirement",
    "SCHEDULE_ANYWAY",
    "SpreadConstraint",
    "WHEN_UNSATISFIABLE",
    "ZONE_KEY",
    "as_integer",
    "labels_of",
    "placement_of",
    "selector_of",
    "short_key",
    "topology_value",
]
