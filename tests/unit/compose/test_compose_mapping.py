"""Each Compose service key to its Project field, in Compose's meaning, or the line that says it has none."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest

from caravanserai import v1
from caravanserai.apiserver.kinds import validate_object
from caravanserai.compose import ComposeError, Conversion, convert_text
from caravanserai.text.manifest import to_dict


def convert(body: str, tmp_path: Path, environ: dict[str, str] | None = None) -> Conversion:
    """The conversion of a file whose services are `body` (YAML under `services:`)."""
    text = "services:\n" + textwrap.indent(textwrap.dedent(body), "  ")
    return convert_text(text, source="compose.yaml", directory=str(tmp_path), environ=environ or {})


def service(body: str, tmp_path: Path, environ: dict[str, str] | None = None) -> dict[str, Any]:
    """The first converted service as protobuf JSON."""
    return to_dict(convert(body, tmp_path, environ).project)["spec"]["services"][0]  # type: ignore[no-any-return]  # to_dict is typed Any


def notes(body: str, tmp_path: Path) -> list[str]:
    return [str(n).removeprefix("warning: compose.yaml: ") for n in convert(body, tmp_path).notes]


def refusal(body: str, tmp_path: Path) -> str:
    with pytest.raises(ComposeError) as caught:
        convert(body, tmp_path)
    return str(caught.value).removeprefix("compose.yaml: ")


def test_entrypoint_is_command_and_command_is_args(tmp_path: Path) -> None:
    web = service(
        """
        web:
          image: x
          entrypoint: /bin/sh -c
          command: 'echo "hello world" && sleep 1'
        """,
        tmp_path,
    )
    assert web["command"] == ["/bin/sh", "-c"]
    assert web["args"] == ["echo", "hello world", "&&", "sleep", "1"]
    assert service("web: {image: x, command: [a, 'b c']}", tmp_path)["args"] == ["a", "b c"]


@pytest.mark.parametrize(
    "environment",
    ["{A: '1', B: 2, C: true, D: null, E:}", "['A=1', 'B=2', 'C=true', 'D', 'E']"],
)
def test_environment_list_and_map(environment: str, tmp_path: Path) -> None:
    web = service(f"web: {{image: x, environment: {environment}}}", tmp_path, {"D": "from-shell"})
    assert web["env"] == [
        {"name": "A", "value": "1"},
        {"name": "B", "value": "2"},
        {"name": "C", "value": "true"},
        {"name": "D", "value": "from-shell"},
    ]


def test_env_file_then_environment(tmp_path: Path) -> None:
    (tmp_path / "web.env").write_text("A=from-file\nB=from-file\n")
    web = service("web: {image: x, env_file: web.env, environment: {B: override}}", tmp_path)
    assert web["env"] == [{"name": "A", "value": "from-file"}, {"name": "B", "value": "override"}]
    body = "web: {image: x, env_file: [{path: missing.env, required: false}]}"
    assert "env" not in service(body, tmp_path)
    assert refusal("web: {image: x, env_file: missing.env}", tmp_path) == (
        "services.web.env_file[0]: file missing.env not found"
    )


def test_ports_short_and_long(tmp_path: Path) -> None:
    web = service(
        """
        web:
          image: x
          ports:
            - "8080:80"
            - "127.0.0.1:8443:443"
            - "[::1]:5300:53/udp"
            - "9000-9001:7000-7001"
            - {target: 6000, published: "6001", protocol: udp, host_ip: 10.0.0.1, name: metrics}
          expose: ["80", "3000"]
        """,
        tmp_path,
    )
    assert web["ports"] == [
        {"containerPort": 80, "hostPort": 8080, "protocol": "TCP"},
        {"containerPort": 443, "hostPort": 8443, "protocol": "TCP", "hostIp": "127.0.0.1"},
        {"containerPort": 53, "hostPort": 5300, "protocol": "UDP", "hostIp": "::1"},
        {"containerPort": 7000, "hostPort": 9000, "protocol": "TCP"},
        {"containerPort": 7001, "hostPort": 9001, "protocol": "TCP"},
        {"containerPort": 6000, "hostPort": 6001, "protocol": "UDP", "hostIp": "10.0.0.1", "name": "metrics"},
        {"containerPort": 3000, "protocol": "TCP"},
    ]


def test_port_without_host_port_is_said(tmp_path: Path) -> None:
    assert notes("web: {image: x, ports: ['80']}", tmp_path) == [
        "services.web.ports[0]: container port 80 is published by Compose on a random host port; here it is "
        "reachable on the project network only (write HOST:CONTAINER to publish it)"
    ]


@pytest.mark.parametrize(
    ("ports", "problem"),
    [
        ("['8000-8010:80']", "a host port range for one container port"),
        ("['8000-8001:80-82']", "a host port range must be as long as the container port range"),
        ("['80/sctp']", "protocol 'sctp' is not supported"),
        ("['a:b']", "is not a port mapping"),
        ("['70000:80']", "is not a port or port range"),
    ],
)
def test_bad_ports_name_the_entry(ports: str, problem: str, tmp_path: Path) -> None:
    assert refusal(f"web: {{image: x, ports: {ports}}}", tmp_path).startswith(f"services.web.ports[0]: {problem}")


def test_volumes_named_anonymous_bind_and_tmpfs(tmp_path: Path) -> None:
    text = textwrap.dedent(
        """\
        services:
          web:
            image: x
            volumes:
              - db_data:/data
              - /cache
              - ./html:/usr/share/html:ro
              - {type: bind, source: /srv/shared, target: /shared, read_only: true}
              - {type: tmpfs, target: /scratch, tmpfs: {size: 16m, mode: 1777}}
            tmpfs: [/run:size=64m]
          other:
            image: x
            volumes: ["./html:/html", "db_data:/db"]
        volumes:
          db_data: {}
        """
    )
    project = to_dict(convert_text(text, source="compose.yaml", directory=str(tmp_path)).project)
    web, other = project["spec"]["services"]
    assert web["volumeMounts"] == [
        {"name": "db-data", "mountPath": "/data"},
        {"name": "web-data", "mountPath": "/cache"},
        {"name": "html", "mountPath": "/usr/share/html", "readOnly": True},
        {"name": "shared", "mountPath": "/shared", "readOnly": True},
    ]
    assert web["tmpfs"] == [
        {"mountPath": "/scratch", "size": "16Mi", "mode": 0o1777},
        {"mountPath": "/run", "size": "64Mi"},
    ]
    assert other["volumeMounts"] == [{"name": "html", "mountPath": "/html"}, {"name": "db-data", "mountPath": "/db"}]
    assert project["spec"]["volumes"] == [
        {"name": "db-data", "type": "Persistent"},
        {"name": "web-data", "type": "Ephemeral"},
        {"name": "html", "type": "HostPath", "hostPath": str(tmp_path / "html")},
        {"name": "shared", "type": "HostPath", "hostPath": "/srv/shared"},
    ]


def test_undeclared_named_volume(tmp_path: Path) -> None:
    assert refusal("web: {image: x, volumes: ['data:/data']}", tmp_path) == (
        "services.web.volumes[0]: volume 'data' is not declared under the top-level volumes:"
    )


def test_depends_on_list_and_conditions(tmp_path: Path) -> None:
    web = service(
        """
        web:
          image: x
          depends_on:
            db: {condition: service_healthy}
            migrate: {condition: service_completed_successfully}
            cache: {condition: service_started, required: false}
        db: {image: x}
        migrate: {image: x}
        cache: {image: x}
        """,
        tmp_path,
    )
    assert web["dependsOn"] == [
        {"service": "db", "condition": "healthy"},
        {"service": "migrate", "condition": "completed"},
        {"service": "cache", "condition": "started"},
    ]
    listed = service("web: {image: x, depends_on: [db]}\ndb: {image: x}", tmp_path)
    assert listed["dependsOn"] == [{"service": "db", "condition": "started"}]
    assert refusal("web: {image: x, depends_on: [nope]}", tmp_path).startswith("services.web.depends_on.nope:")


@pytest.mark.parametrize(
    ("test", "command"),
    [
        ("[CMD, pg_isready, -U, pg]", ["pg_isready", "-U", "pg"]),
        ("[CMD-SHELL, 'curl -f http://localhost || exit 1']", ["/bin/sh", "-c", "curl -f http://localhost || exit 1"]),
        ("'wget -q -O- localhost'", ["/bin/sh", "-c", "wget -q -O- localhost"]),
    ],
)
def test_healthcheck_forms(test: str, command: list[str], tmp_path: Path) -> None:
    body = f"web: {{image: x, healthcheck: {{test: {test}, interval: 5s, retries: 5, start_period: 1m30s}}}}"
    assert service(body, tmp_path)["healthcheck"] == {
        "exec": {"command": command},
        "interval": "5s",
        "timeout": "30s",
        "retries": 5,
        "startPeriod": "90s",
    }


def test_healthcheck_none_and_disable(tmp_path: Path) -> None:
    assert "healthcheck" not in service("web: {image: x, healthcheck: {test: [NONE]}}", tmp_path)
    assert "healthcheck" not in service("web: {image: x, healthcheck: {disable: true}}", tmp_path)


@pytest.mark.parametrize(
    ("restart", "policy"),
    [
        ("", "Never"),
        ("restart: 'no'", "Never"),
        ("restart: always", "Always"),
        ("restart: unless-stopped", "Always"),
        ("restart: on-failure", "OnFailure"),
        ("restart: on-failure:3", "OnFailure"),
        ("deploy: {restart_policy: {condition: any}}", "Always"),
    ],
)
def test_restart(restart: str, policy: str, tmp_path: Path) -> None:
    body = f"web: {{image: x{', ' + restart if restart else ''}}}"
    assert service(body, tmp_path)["restartPolicy"] == policy


def test_working_dir_user_and_resources(tmp_path: Path) -> None:
    web = service(
        """
        web:
          image: x
          working_dir: /app
          user: "1000:1000"
          deploy:
            resources:
              limits: {cpus: "1.5", memory: 1g}
              reservations: {cpus: "0.25", memory: 256M}
        """,
        tmp_path,
    )
    assert (web["workingDir"], web["user"]) == ("/app", "1000:1000")
    assert web["resources"] == {
        "limits": {"cpu": "1.5", "memory": "1Gi"},
        "requests": {"cpu": "0.25", "memory": "256Mi"},
    }
    assert service("web: {image: x, cpus: 2, mem_limit: 64m}", tmp_path)["resources"] == {
        "limits": {"cpu": "2", "memory": "64Mi"}
    }


def test_container_settings_of_the_spec(tmp_path: Path) -> None:
    web = service(
        """
        web:
          image: x
          cap_add: [NET_ADMIN]
          cap_drop: [ALL]
          privileged: true
          devices: ["/dev/fuse", "/dev/snd:/dev/audio:r", {source: /dev/kvm, target: /dev/kvm, permissions: rw}]
          shm_size: 64m
          stop_signal: SIGINT
          stop_grace_period: 1m
          init: true
          extra_hosts: ["db.internal:10.0.0.5", "v6=[::1]"]
          network_mode: host
          labels: {com.example.team: web, tier: 1}
          ulimits: {nofile: {soft: 1024, hard: 4096}, nproc: 512}
          sysctls: [net.core.somaxconn=1024]
          logging: {driver: json-file, options: {max-size: 10m, max-file: 3}}
        """,
        tmp_path,
    )
    expected = {
        "capAdd": ["NET_ADMIN"],
        "capDrop": ["ALL"],
        "privileged": True,
        "devices": [
            {"hostPath": "/dev/fuse"},
            {"hostPath": "/dev/snd", "containerPath": "/dev/audio", "permissions": "r"},
            {"hostPath": "/dev/kvm", "containerPath": "/dev/kvm", "permissions": "rw"},
        ],
        "shmSize": "64Mi",
        "stopSignal": "SIGINT",
        "stopGracePeriod": "60s",
        "init": True,
        "extraHosts": [{"hostname": "db.internal", "ip": "10.0.0.5"}, {"hostname": "v6", "ip": "::1"}],
        "networkMode": "host",
        "labels": {"com.example.team": "web", "tier": "1"},
        "ulimits": [{"name": "nofile", "soft": 1024, "hard": 4096}, {"name": "nproc", "soft": 512, "hard": 512}],
        "sysctls": {"net.core.somaxconn": "1024"},
        "logging": {"driver": "json-file", "options": {"max-size": "10m", "max-file": "3"}},
    }
    assert {k: web[k] for k in expected} == expected


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        ("web: {image: x, network_mode: none}", "services.web.network_mode: network_mode none has no equivalent"),
        ("web: {image: x, network_mode: 'service:db'}", "services.web.network_mode: network_mode 'service:db'"),
        ("web: {image: x, shm_size: lots}", "services.web.shm_size: is not a size"),
        ("web: {image: x, stop_grace_period: soon}", "services.web.stop_grace_period: is not a duration"),
        ("web: {image: x, privileged: maybe}", "services.web.privileged: is not a boolean"),
        ("web: {image: x, extra_hosts: [nohost]}", "services.web.extra_hosts[0]: is not HOST:IP"),
        ("web: {image: x, restart: sometimes}", "services.web.restart: must be no, always"),
        ("web: {image: x, restart: 'on-failure:abc'}", "services.web.restart: must be no, always"),
        ("web: {image: x, healthcheck: {test: [CMD, 'true'], retries: abc}}", "services.web.healthcheck.retries:"),
        ("web: {image: x, tmpfs: ['/run:mode=abc']}", "services.web.tmpfs[0]: is not an octal file mode"),
    ],
)
def test_bad_values_name_the_key(body: str, problem: str, tmp_path: Path) -> None:
    assert refusal(body, tmp_path).startswith(problem)


def test_secrets_mount_one_secret_at_run_secrets(tmp_path: Path) -> None:
    text = textwrap.dedent(
        """\
        name: shop
        services:
          db: {image: x, secrets: [db_password]}
        secrets:
          db_password: {file: ./db_password.txt}
        """
    )
    conversion = convert_text(text, source="compose.yaml", directory=str(tmp_path))
    project = to_dict(conversion.project)
    assert project["spec"]["services"][0]["volumeMounts"] == [
        {"name": "secrets", "mountPath": "/run/secrets", "readOnly": True}
    ]
    assert project["spec"]["volumes"] == [{"name": "secrets", "type": "Secret", "secret": "shop-secrets"}]
    assert [str(n) for n in conversion.notes] == [
        "warning: compose.yaml: secrets.db_password: not read from ./db_password.txt: create Secret shop-secrets "
        "with the key db_password (its content) before applying; services read /run/secrets/db_password as in Compose"
    ]


def test_keys_without_equivalent_get_one_line_each(tmp_path: Path) -> None:
    text = textwrap.dedent(
        """\
        version: "3.9"
        services:
          web:
            image: x
            deploy:
              replicas: 3
              placement: {constraints: ["node.labels.disk == ssd", "node.role == manager"]}
            networks: [front]
            read_only: true
            dns: 1.1.1.1
            configs: [nginx_conf]
        networks:
          front: {}
        configs:
          nginx_conf: {file: ./nginx.conf}
        """
    )
    conversion = convert_text(text, source="compose.yaml", directory=str(tmp_path))
    assert dict(conversion.project.spec.node_selector) == {"disk": "ssd"}
    lines = [str(n).removeprefix("warning: compose.yaml: ") for n in conversion.notes]
    assert lines == [
        "version: is obsolete in Compose and ignored",
        "services.web.read_only: a read-only root file system has no equivalent yet: the container's file system "
        "is writable",
        "services.web.dns: DNS servers cannot be set: the container uses Docker's resolver (services by name, then "
        "the node's)",
        "services.web.configs: configs are not converted: see the line of the top-level configs",
        "services.web.networks: services of a project share one network: every service reaches every other",
        "services.web.deploy.replicas: 3 replicas need a replicated project (not yet): one container runs",
        "services.web.deploy.placement.constraints[1]: only node.labels.KEY==VALUE has an equivalent "
        "(spec.nodeSelector): left out",
        "networks.front: is not made: the services of a project share one network and reach each other by service name",
        "configs.nginx_conf: not converted: make a Config of ./nginx.conf (caractrl apply -f a Config manifest) and "
        "mount it with a Config volume (a directory with one file per key)",
    ]


def test_service_names_become_dns_labels_and_say_so(tmp_path: Path) -> None:
    conversion = convert("my_db: {image: x}\nweb: {image: x, depends_on: [my_db]}", tmp_path)
    assert [s.name for s in conversion.project.spec.services] == ["my-db", "web"]
    assert conversion.project.spec.services[1].depends_on[0].service == "my-db"
    assert [str(n) for n in conversion.notes] == [
        "warning: compose.yaml: services.my_db: is named 'my-db' (a DNS label): other services reach it as my-db, "
        "not my_db"
    ]
    assert refusal("a_b: {image: x}\na.b: {image: x}", tmp_path).startswith("services.a.b: two services")


def test_result_is_a_project_message(tmp_path: Path) -> None:
    project = convert("web: {image: x}", tmp_path).project
    assert isinstance(project, v1.Project)
    assert (project.api_version, project.kind, project.metadata.name) == (
        "caravanserai/v1",
        "Project",
        tmp_path.name.lower().replace("_", "-"),
    )


def test_every_mapped_key_passes_the_apiservers_validation(tmp_path: Path) -> None:
    body = textwrap.dedent(
        """
        web:
          image: x
          entrypoint: [/bin/sh, -c]
          command: "echo hi"
          environment: [A=1]
          ports: ["8080:80", "127.0.0.1:5353:53/udp"]
          volumes: ["data:/data", "/cache", "./html:/html:ro"]
          tmpfs: ["/run:size=64m,mode=1777"]
          depends_on: {db: {condition: service_healthy}}
          healthcheck: {test: [CMD-SHELL, "true"], interval: 1m30s, timeout: 500ms, start_period: 10s}
          restart: on-failure
          working_dir: /srv
          user: "1000:1000"
          cap_add: [NET_ADMIN]
          cap_drop: [MKNOD]
          privileged: true
          devices: ["/dev/fuse"]
          shm_size: 64m
          stop_signal: SIGINT
          stop_grace_period: 1m
          init: true
          extra_hosts: ["db.internal:10.0.0.5"]
          labels: {com.example.team: web}
          ulimits: {nofile: {soft: 1024, hard: 4096}}
          sysctls: {net.core.somaxconn: 1024}
          logging: {driver: json-file, options: {max-size: 10m}}
          deploy: {resources: {limits: {cpus: "0.5", memory: 128M}, reservations: {memory: 64M}}}
          secrets: [token]
        db: {image: x, healthcheck: {test: [CMD, "true"]}}
        """
    )
    text = "services:\n" + textwrap.indent(body, "  ") + "volumes:\n  data: {}\nsecrets:\n  token: {file: ./token}\n"
    conversion = convert_text(text, source="compose.yaml", directory=str(tmp_path), environ={})
    validate_object("projects", conversion.project)


def test_host_network_discards_published_ports_as_docker_does(tmp_path: Path) -> None:
    body = "web: {image: x, network_mode: host, ports: ['8080:80', '9000:9000']}"
    web = service(body, tmp_path)
    assert (web["networkMode"], web["ports"]) == (
        "host",
        [{"containerPort": 80, "protocol": "TCP"}, {"containerPort": 9000, "protocol": "TCP"}],
    )
    assert notes(body, tmp_path) == [
        "services.web.ports: published ports are discarded with network_mode: host (as Docker does): the container "
        "listens on the node's own ports"
    ]


def test_a_host_folder_named_secrets_does_not_take_the_secrets_volume(tmp_path: Path) -> None:
    text = textwrap.dedent(
        """\
        name: app
        services:
          web: {image: x, secrets: [token], volumes: ["./secrets:/config"]}
        secrets:
          token: {file: ./token}
        """
    )
    volumes = convert_text(text, source="compose.yaml", directory=str(tmp_path)).project.spec.volumes
    assert [(v.name, v.type) for v in volumes] == [("secrets", "Secret"), ("secrets-2", "HostPath")]
    named = text.replace('["./secrets:/config"]', '["secrets:/config"]') + "volumes:\n  secrets: {}\n"
    with pytest.raises(ComposeError, match="volume name 'secrets' is taken by the project's Secret volume"):
        convert_text(named, source="compose.yaml", directory=str(tmp_path))
