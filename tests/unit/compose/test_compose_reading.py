"""Reading a Compose file: YAML anchors and merge keys, an alias bomb, the specification's schema (unknown keys by
path), and the keys refused with one line (extends, include, build without image)."""

from __future__ import annotations

from pathlib import Path

import pytest

from caravanserai.compose import ComposeError, convert_file, convert_text, looks_like_compose
from caravanserai.compose.schema import compose_schema
from caravanserai.compose.yamltext import MAX_VALUES, load_yaml


def convert(text: str, tmp_path: Path, **environ: str) -> object:
    return convert_text(text, source="compose.yaml", directory=str(tmp_path), environ=environ)


def refusal(text: str, tmp_path: Path) -> str:
    with pytest.raises(ComposeError) as caught:
        convert_text(text, source="compose.yaml", directory=str(tmp_path), environ={})
    return str(caught.value)


ANCHORS = """\
x-defaults: &defaults
  image: busybox
  restart: always
  environment: &env
    TZ: UTC
    MODE: base
x-extra: &extra
  working_dir: /srv
services:
  web:
    <<: [*defaults, *extra]
    environment:
      <<: *env
      MODE: web
  job:
    <<: *defaults
    restart: "no"
"""


def test_anchors_and_merge_keys_work_as_yaml_does(tmp_path: Path) -> None:
    conversion = convert_text(ANCHORS, source="compose.yaml", directory=str(tmp_path), environ={})
    web, job = conversion.project.spec.services
    assert (web.image, web.restart_policy, web.working_dir) == ("busybox", "Always", "/srv")
    assert {e.name: e.value for e in web.env} == {"TZ": "UTC", "MODE": "web"}
    assert (job.image, job.restart_policy) == ("busybox", "Never")
    assert conversion.notes == []


def test_alias_bomb_is_refused_within_the_budget() -> None:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 9)]
    with pytest.raises(ComposeError, match=f"too large: more than {MAX_VALUES} values"):
        load_yaml("\n".join(lines) + "\n", source="bomb.yaml")


def test_recursive_alias_is_refused() -> None:
    with pytest.raises(ComposeError, match=r"nested deeper than|too large"):
        load_yaml("a: &a [*a]\n", source="loop.yaml")


def test_yaml_syntax_error_names_the_line(tmp_path: Path) -> None:
    assert refusal("services:\n  web: [\n", tmp_path).startswith("compose.yaml: line 3, column 1: invalid YAML")


def test_no_is_a_string_as_in_compose(tmp_path: Path) -> None:
    text = "services:\n  web:\n    image: x\n    restart: no\n"
    assert convert_text(text, source="c", directory=str(tmp_path)).project.spec.services[0].restart_policy == "Never"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "services:\n  web:\n    image: x\n    imagee: y\n",
            'compose.yaml: services.web.imagee: unknown key (did you mean "image"?)',
        ),
        (
            "servics:\n  web: {image: x}\nservices: {}\n",
            'compose.yaml: servics: unknown key (did you mean "services"?)',
        ),
        (
            "services:\n  web:\n    image: x\n    healthcheck: {test: [CMD, true], intervall: 5s}\n",
            'compose.yaml: services.web.healthcheck.intervall: unknown key (did you mean "interval"?)',
        ),
        (
            "services:\n  web:\n    image: x\n    volumes: [{type: bind, sorce: ./a, target: /a}]\n",
            'compose.yaml: services.web.volumes[0].sorce: unknown key (did you mean "source"?)',
        ),
        (
            "services:\n  web:\n    image: x\n    environment: 3\n",
            "compose.yaml: services.web.environment: must be a mapping or a list, not 3",
        ),
        (
            "services:\n  web:\n    image: x\n    depends_on: {db: {condition: service_ready}}\n  db: {image: x}\n",
            "compose.yaml: services.web.depends_on.db.condition: 'service_ready' is not one of",
        ),
    ],
)
def test_the_specification_schema_names_the_path(text: str, message: str, tmp_path: Path) -> None:
    assert refusal(text, tmp_path).startswith(message)


def test_extension_keys_are_accepted(tmp_path: Path) -> None:
    text = "x-top: 1\nservices:\n  web:\n    image: x\n    x-mine: {any: thing}\n"
    assert convert_text(text, source="c", directory=str(tmp_path)).notes == []


def test_extends_is_refused_with_one_line(tmp_path: Path) -> None:
    text = "services:\n  base: {image: x}\n  web:\n    extends: base\n"
    assert refusal(text, tmp_path) == (
        "compose.yaml: services.web.extends: is not supported: copy the keys of the extended service into this one"
    )


def test_include_is_refused(tmp_path: Path) -> None:
    text = "include: [other.yaml]\nservices:\n  web: {image: x}\n"
    assert refusal(text, tmp_path).startswith("compose.yaml: include: is not supported")


def test_build_without_image_says_build_first(tmp_path: Path) -> None:
    text = "services:\n  web:\n    build: .\n"
    assert refusal(text, tmp_path) == (
        "compose.yaml: services.web.build: build the image first (docker build -t NAME .) and set image: NAME"
    )


def test_build_with_image_uses_the_image_and_says_so(tmp_path: Path) -> None:
    text = "services:\n  web:\n    build: {context: .}\n    image: shop/web:1\n"
    conversion = convert_text(text, source="compose.yaml", directory=str(tmp_path))
    assert conversion.project.spec.services[0].image == "shop/web:1"
    assert [str(n) for n in conversion.notes] == [
        "warning: compose.yaml: services.web.build: is not run: image shop/web:1 is used as it is (build it first)"
    ]


def test_service_without_image(tmp_path: Path) -> None:
    assert refusal("services:\n  web: {}\n", tmp_path).startswith("compose.yaml: services.web.image: is required")


def test_not_a_compose_file(tmp_path: Path) -> None:
    assert refusal("kind: Project\nservices: {}\n", tmp_path).startswith("compose.yaml: is not a Compose file")


def test_detection_by_content() -> None:
    assert looks_like_compose("services:\n  web: {image: x}\n")
    assert not looks_like_compose("apiVersion: caravanserai/v1\nkind: Project\nspec: {services: []}\n")
    assert not looks_like_compose("kind: Project\nservices: {}\n")
    assert not looks_like_compose("services: [\n")
    assert not looks_like_compose("a: 1\n---\nservices: {}\n")


def test_project_name_from_name_key_folder_or_caller(tmp_path: Path) -> None:
    folder = tmp_path / "My_Shop"
    folder.mkdir()
    (folder / "docker-compose.yml").write_text("services:\n  web: {image: x}\n")
    assert convert_file(str(folder), environ={}).project.metadata.name == "my-shop"
    assert convert_file(str(folder), name="other", environ={}).project.metadata.name == "other"
    (folder / "docker-compose.yml").write_text("name: named\nservices:\n  web: {image: x}\n")
    assert convert_file(str(folder), environ={}).project.metadata.name == "named"


def test_folder_without_compose_file(tmp_path: Path) -> None:
    with pytest.raises(ComposeError, match="no Compose file in this folder"):
        convert_file(str(tmp_path), environ={})


def test_vendored_schema_is_the_specification() -> None:
    schema = compose_schema()
    assert schema["title"] == "Compose Specification"
    assert "extends" in schema["definitions"]["service"]["properties"]
    notice = Path(__file__).parents[3] / "src" / "caravanserai" / "compose" / "schema" / "NOTICE"
    assert "Apache License, Version 2.0" in notice.read_text()


def test_override_file_is_refused_not_applied_as_a_project(tmp_path: Path) -> None:
    (tmp_path / "docker-compose.override.yml").write_text("services:\n  web: {image: x}\n")
    with pytest.raises(ComposeError, match="is an override file: Compose merges it into the main file"):
        convert_file(str(tmp_path / "docker-compose.override.yml"), environ={})


def test_a_file_without_services(tmp_path: Path) -> None:
    assert refusal("services: {}\n", tmp_path) == "compose.yaml: services: at least one service is required"
