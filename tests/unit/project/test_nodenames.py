"""The Docker volume names clients show: a `default` project's as before namespaces, another namespace's apart."""

from __future__ import annotations

import pytest

from caravanserai.project.nodenames import project_part, volume_name


def test_a_default_project_keeps_its_names() -> None:
    assert volume_name("web", "data", "n1") == volume_name("default/web", "data", "n1") == "cara_web_data_n1"
    assert project_part("default/web") == "web"


def test_another_namespace_gets_one_part_more() -> None:
    assert volume_name("team-a/web", "data", "n1") == "cara_team-a_web_data_n1"
    assert volume_name("team-b/web", "data", "n1") != volume_name("team-a/web", "data", "n1")
    assert project_part("team-a/web") == "team-a_web"


@pytest.mark.parametrize("key", ["team_a/web", "team-a/", "default/"])
def test_parts_that_cannot_be_read_back_are_refused(key: str) -> None:
    with pytest.raises(ValueError, match="DNS name"):
        project_part(key)
