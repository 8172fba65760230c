"""The topology index files selectors by label: what it finds for a project's labels is what a scan of every
selector finds, and its counts equal counts made from scratch after any sequence of placements."""

from __future__ import annotations

import random

from caravanserai.controllers.scheduler.topology import LabelFiling, Placed, TopologyIndex
from caravanserai.project.affinity import (
    DOES_NOT_EXIST,
    EXISTS,
    HOSTNAME_KEY,
    IN,
    NOT_IN,
    ZONE_KEY,
    ProjectSelector,
    ProjectTerm,
    Requirement,
)

KEYS, VALUES = ("app", "tier", "solo"), ("a", "b", "c")


def random_labels(rng: random.Random) -> dict[str, str]:
    return {key: rng.choice(VALUES) for key in KEYS if rng.random() < 0.6}


def random_selector(rng: random.Random) -> ProjectSelector:
    pairs = tuple(sorted({(rng.choice(KEYS), rng.choice(VALUES)) for _ in range(rng.randint(0, 2))}))
    operator = rng.choice((IN, NOT_IN, EXISTS, DOES_NOT_EXIST))
    values = (rng.choice(VALUES),) if operator in (IN, NOT_IN) else ()
    expressions = (Requirement(rng.choice(KEYS), operator, values),) if rng.random() < 0.4 else ()
    return ProjectSelector(pairs, expressions)


def test_the_filing_finds_what_a_scan_finds() -> None:
    rng = random.Random(5)
    filing: LabelFiling[ProjectSelector] = LabelFiling()
    selectors = {random_selector(rng) for _ in range(60)}
    for selector in selectors:
        filing.add(selector, selector)
    for selector in list(selectors)[:10]:
        filing.remove(selector, selector)
        selectors.discard(selector)
    for _ in range(300):
        labels = random_labels(rng)
        found = list(filing.matching(labels))
        assert len(found) == len(set(found))
        assert set(found) == {s for s in selectors if s.matches(labels)}


def test_counts_and_refusing_terms_equal_a_recount() -> None:
    rng = random.Random(9)
    index = TopologyIndex()
    nodes = {f"n{i}": {ZONE_KEY: f"z{i % 3}"} for i in range(8)}
    for name, labels in nodes.items():
        index.set_node(name, labels)
    terms = [ProjectTerm(random_selector(rng), rng.choice((ZONE_KEY, HOSTNAME_KEY))) for _ in range(12)]
    placed: dict[str, Placed] = {}
    for step in range(400):
        name = f"p{rng.randrange(40)}"
        if rng.random() < 0.25:
            placed.pop(name, None)
            index.place(name, None)
        else:
            anti = tuple(rng.sample(terms, rng.randint(0, 1)))
            placed[name] = Placed(rng.choice(list(nodes)), random_labels(rng), anti)
            index.place(name, placed[name])
        term = rng.choice(terms)
        recount: dict[str, int] = {}
        for p in placed.values():
            if term.selector.matches(p.labels):
                domain = p.node if term.topology_key == HOSTNAME_KEY else nodes[p.node][ZONE_KEY]
                recount[domain] = recount.get(domain, 0) + 1
        assert dict(index.domain_counts(term)) == recount, step
        labels = random_labels(rng)
        refusing: dict[str, dict[str, int]] = {}
        for p in placed.values():
            for own in p.anti_required:
                if own.selector.matches(labels):
                    domain = p.node if own.topology_key == HOSTNAME_KEY else nodes[p.node][ZONE_KEY]
                    per = refusing.setdefault(own.topology_key + str(own), {})
                    per[domain] = per.get(domain, 0) + 1
        got = sorted(sorted(dict(counts).items()) for _, counts in index.anti_affinity_against(labels))
        assert got == sorted(sorted(per.items()) for per in refusing.values()), step
