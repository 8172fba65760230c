"""Agent naming: deterministic, collision-free Docker names and label filters."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from caravanserai.agent.docker import naming

DNS_LABEL = st.from_regex(r"[a-z0-9]([a-z0-9-]{0,20}[a-z0-9])?", fullmatch=True)
DNS_NAME = st.lists(DNS_LABEL, min_size=1, max_size=3).map(".".join)
DOCKER_NAME = re.compile(r"[a-zA-Z0-9][a-zA-Z0-9_.-]+")
NAMESPACE = st.one_of(st.just("default"), DNS_LABEL)


def test_names_follow_the_scheme() -> None:
    assert naming.container_name("web", "db", "n1.example") == "cara_web_db_n1.example"
    assert naming.network_name("web", "n1") == "cara_web_n1"
    assert naming.volume_name("web", "data", "n1") == "cara_web_data_n1"


def test_hyphens_cannot_make_two_projects_collide() -> None:
    assert naming.container_name("a-b", "c", "n") != naming.container_name("a", "b-c", "n")
    assert naming.volume_name("a-b", "c", "n") != naming.volume_name("a", "b-c", "n")


def test_agents_sharing_an_engine_never_share_a_name() -> None:
    assert naming.container_name("web", "db", "n1") != naming.container_name("web", "db", "n2")
    assert naming.network_name("web", "n1") != naming.network_name("web", "n2")
    assert naming.volume_name("web", "data", "n1") != naming.volume_name("web", "data", "n2")


def test_default_projects_keep_their_names_and_other_namespaces_get_their_own() -> None:
    for default in ("web", "default/web"):  # a bare name is a `default` project's: names as before namespaces
        assert naming.container_name(default, "db", "n1") == "cara_web_db_n1"
        assert naming.network_name(default, "n1") == "cara_web_n1"
        assert naming.volume_name(default, "data", "n1") == "cara_web_data_n1"
        assert naming.project_part(default) == "web"
    assert naming.container_name("team-a/web", "db", "n1") == "cara_team-a_web_db_n1"
    assert naming.network_name("team-a/web", "n1") == "cara_team-a_web_n1"
    assert naming.volume_name("team-a/web", "data", "n1") == "cara_team-a_web_data_n1"
    names = {naming.container_name(f"{ns}/web", "db", "n1") for ns in ("default", "team-a", "team-b")}
    assert len(names) == 3


@given(NAMESPACE, DNS_LABEL, DNS_LABEL, DNS_NAME, NAMESPACE, DNS_LABEL, DNS_LABEL, DNS_NAME)
def test_container_names_are_injective_and_valid(
    ns1: str, p1: str, s1: str, n1: str, ns2: str, p2: str, s2: str, n2: str
) -> None:
    k1, k2 = f"{ns1}/{p1}", f"{ns2}/{p2}"
    first, second = naming.container_name(k1, s1, n1), naming.container_name(k2, s2, n2)
    assert (first == second) == ((k1, s1, n1) == (k2, s2, n2))
    assert DOCKER_NAME.fullmatch(first)
    assert naming.parse_container_name(first) == (k1, s1, n1)
    assert naming.parse_container_name("/" + first) == (k1, s1, n1)


@given(NAMESPACE, DNS_LABEL, DNS_LABEL, DNS_NAME, NAMESPACE, DNS_LABEL, DNS_LABEL, DNS_NAME)
def test_network_and_volume_names_are_injective(
    ns1: str, p1: str, v1: str, n1: str, ns2: str, p2: str, v2: str, n2: str
) -> None:
    k1, k2 = f"{ns1}/{p1}", f"{ns2}/{p2}"
    networks = naming.network_name(k1, n1), naming.network_name(k2, n2)
    assert (networks[0] == networks[1]) == ((k1, n1) == (k2, n2))
    volumes = naming.volume_name(k1, v1, n1), naming.volume_name(k2, v2, n2)
    assert (volumes[0] == volumes[1]) == ((k1, v1, n1) == (k2, v2, n2))


@pytest.mark.parametrize("name", ["web", "cara_web", "cara__x", "other_a_b_n", "cara_a_b", "cara_a__n", ""])
def test_parse_refuses_foreign_names(name: str) -> None:
    assert naming.parse_container_name(name) is None


@pytest.mark.parametrize(
    ("project", "service", "node"), [("a_b", "c", "n"), ("a", "", "n"), ("", "b", "n"), ("a", "b", "n_1")]
)
def test_parts_with_the_separator_or_empty_are_refused(project: str, service: str, node: str) -> None:
    with pytest.raises(ValueError, match="DNS name"):
        naming.container_name(project, service, node)


def test_owner_labels_and_filters() -> None:
    labels = naming.owner_labels(node="n1", project="default/web", project_uid="u-1")
    assert labels == {
        "caravanserai.io/managed": "true",
        "caravanserai.io/node": "n1",
        "caravanserai.io/project": "web",
        "caravanserai.io/namespace": "default",
        "caravanserai.io/project-uid": "u-1",
    }
    assert naming.node_filter("n1", project="default/web", volume_type="Ephemeral") == [
        "caravanserai.io/managed=true",
        "caravanserai.io/node=n1",
        "caravanserai.io/project=web",
        "caravanserai.io/volume-type=Ephemeral",
    ]


def test_labels_of_another_namespace_name_the_key_so_one_filter_finds_one_project() -> None:
    labels = naming.owner_labels(node="n1", project="team-a/web", project_uid="u-2")
    assert labels[naming.LABEL_PROJECT] == "team-a/web" and labels[naming.LABEL_NAMESPACE] == "team-a"
    assert "caravanserai.io/project=team-a/web" in naming.node_filter("n1", project="team-a/web")
    assert naming.labelled_project(labels) == "team-a/web"
    assert naming.labelled_project(naming.owner_labels(node="n1", project="web", project_uid="u")) == "default/web"


def test_objects_labelled_before_namespaces_belong_to_default() -> None:
    legacy = {naming.LABEL_MANAGED: "true", naming.LABEL_NODE: "n1", naming.LABEL_PROJECT: "web"}
    assert naming.labelled_project(legacy) == "default/web"
    assert naming.labelled_project({naming.LABEL_MANAGED: "true"}) == ""
    assert naming.parse_container_name("cara_web_db_n1") == ("default/web", "db", "n1")


def test_the_agent_service_reads_an_empty_namespace_as_default() -> None:
    assert naming.project_in("", "web") == "default/web"
    assert naming.project_in("team-a", "web") == "team-a/web"


@given(NAMESPACE, DNS_LABEL, DNS_NAME, st.from_regex(r"[a-z0-9]{1,12}", fullmatch=True))
def test_pool_network_names_never_pass_for_a_project_network(
    namespace: str, project: str, node: str, token: str
) -> None:
    pool, network = naming.pool_network_name(token, node), naming.network_name(f"{namespace}/{project}", node)
    assert DOCKER_NAME.fullmatch(pool)
    assert naming.is_pool_network(pool, node)
    assert pool != network
    assert not naming.is_pool_network(network, node)
    assert not naming.is_pool_network(pool, node + "x")  # another node's pool is not this node's


def test_pool_networks_carry_no_project() -> None:
    assert naming.pool_network_name("ab12", "n1") == "cara_pool.ab12_n1"
    assert naming.pool_labels("n1") == {
        naming.LABEL_MANAGED: "true",
        naming.LABEL_NODE: "n1",
        naming.LABEL_NETWORK_POOL: "true",
    }
    with pytest.raises(ValueError):
        naming.pool_network_name("a_b", "n1")


def test_messages_name_a_default_project_as_before() -> None:
    assert naming.shown("default/web") == naming.shown("web") == "web"
    assert naming.shown("team-a/web") == "team-a/web"
