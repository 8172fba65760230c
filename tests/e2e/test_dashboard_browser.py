"""The dashboard in a real browser: Debian's headless Chromium driven by Selenium (its own chromedriver, passed
explicitly, so Selenium Manager never downloads anything), over a real apiserver, scheduler, ProjectSet
controller, gc and an agent running projects on Docker.

Selenium is synchronous: every browser call runs in a worker thread so that the in-process servers on this event
loop keep answering. Screenshots go to $CARA_TEST_ARTIFACTS (default: test-artifacts/ in the repository).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from agent_harness import RunningAgent, StartAgent, bind

from caravanserai import meta, v1
from caravanserai.client import Client
from caravanserai.clock import SystemClock
from caravanserai.controller import Manager
from caravanserai.controllers.gc import app as gc_app
from caravanserai.controllers.gc.policy import GCConfig
from caravanserai.controllers.projectset import app as projectset_app
from caravanserai.controllers.scheduler import app as scheduler_app
from caravanserai.testing.apiserver import RunningApiServer
from caravanserai.testing.builders import project
from support.dashboard import dashboard

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
ARTIFACTS = Path(os.environ.get("CARA_TEST_ARTIFACTS", Path(__file__).resolve().parents[2] / "test-artifacts"))

webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (pip install -e '.[test]')")
from selenium.common.exceptions import TimeoutException, WebDriverException  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

Driver = Any


@pytest.fixture(scope="module")
def browser() -> Iterator[Driver]:
    """Headless Chromium (Debian packages chromium and chromium-driver, installed by scripts/setup.sh)."""
    missing = [path for path in (CHROMIUM, CHROMEDRIVER) if shutil.which(path) is None]
    if missing:
        pytest.skip(
            f"no browser for the dashboard tests: {', '.join(missing)} missing"
            " (apt-get install chromium chromium-driver)"
        )
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--window-size=1360,900",
        "--no-first-run",
        "--disable-extensions",
        "--disable-background-networking",
    ):
        options.add_argument(flag)
    service = webdriver.ChromeService(executable_path=CHROMEDRIVER)
    driver = webdriver.Chrome(service=service, options=options)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture
async def controllers(api: RunningApiServer) -> AsyncIterator[None]:
    """The real scheduler, ProjectSet controller and gc (removes Terminated projects after 0.5 s), in-process."""
    clock = SystemClock()
    async with Client(api.address) as client:
        manager = Manager(client, clock=clock, shutdown_timeout=5.0)
        scheduler_app.setup(manager, client, clock)
        projectset_app.setup(manager, client, clock)
        gc_app.setup(manager, client, clock, gc_app.GCOptions(config=GCConfig(terminated_delay=0.5)))
        task = asyncio.create_task(manager.run(), name="dashboard-test-controllers")
        try:
            yield
        finally:
            manager.stop()
            await asyncio.wait_for(task, 15)


@pytest.fixture
async def node(start_agent: StartAgent, controllers: None) -> RunningAgent:
    return await start_agent()


async def call(fn: Callable[..., Any], *args: Any) -> Any:
    return await asyncio.to_thread(fn, *args)


async def until(driver: Driver, what: str, condition: Callable[[Driver], Any], timeout: float = 20) -> Any:
    """Wait (in a thread) until `condition(driver)` is truthy; fail naming `what` and saving a screenshot."""
    try:
        return await call(
            WebDriverWait(driver, timeout, poll_frequency=0.1, ignored_exceptions=(WebDriverException,)).until,
            condition,
        )
    except TimeoutException:
        await screenshot(driver, f"failed-{what.replace(' ', '-')}")
        raise AssertionError(f"the page never showed {what}") from None


def text_of(driver: Driver, css: str) -> str:
    found = driver.find_elements(By.CSS_SELECTOR, css)
    return found[0].text if found else ""


async def screenshot(driver: Driver, name: str) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"dashboard-{name}.png"
    assert await call(driver.save_screenshot, str(path)), f"no screenshot written to {path}"
    return path


def manifest(name: str, image: str, *, selector: str = "") -> str:
    """A one-service project that logs `started <name>` and then a tick a second."""
    extra = f"  nodeSelector:\n    {selector}\n" if selector else ""
    script = f"echo started {name}; while true; do echo tick; sleep 1; done"
    return (
        f"apiVersion: caravanserai/v1\nkind: Project\nmetadata:\n  name: {name}\n  labels:\n    app: {name}\n"
        f"spec:\n{extra}  services:\n  - name: main\n    image: {image}\n    command: [sh, -c, '{script}']\n"
        f"    resources:\n      requests:\n        cpu: 250m\n        memory: 64Mi\n"
    )


def set_manifest(name: str, image: str) -> str:
    """A ProjectSet of one replica that sleeps."""
    return (
        f"apiVersion: caravanserai/v1\nkind: ProjectSet\nmetadata:\n  name: {name}\nspec:\n  replicas: 1\n"
        f"  selector:\n    matchLabels:\n      app: {name}\n  template:\n    labels:\n      app: {name}\n"
        f"    spec:\n      services:\n      - name: main\n        image: {image}\n        command: [sleep, '3600']\n"
        f"        resources:\n          requests:\n            cpu: 100m\n            memory: 32Mi\n"
    )


async def apply_through_page(driver: Driver, text: str) -> str:
    area = await call(driver.find_element, By.ID, "apply-text")
    await call(area.clear)
    await call(driver.execute_script, "arguments[0].value = arguments[1];", area, text)
    await call((await call(driver.find_element, By.ID, "apply-button")).click)
    return str(
        await until(
            driver, "the apply result", lambda d: (r := text_of(d, "#apply-result")) not in ("", "applying…") and r
        )
    )


# Records (in the page, on the machine's clock) when the phase cell of a project first shows something else.
WATCH_PHASE = """
    const [name, from] = arguments;
    window.__phaseChangedAt = null;
    new MutationObserver((_, observer) => {
      const cell = document.querySelector(`tr[data-name="${name}"] .phase`);
      if (cell && cell.textContent.trim() !== from) { window.__phaseChangedAt = Date.now(); observer.disconnect(); }
    }).observe(document.getElementById("main"), {childList: true, subtree: true, characterData: true});
"""


async def test_dashboard_live_in_a_browser(
    browser: Driver, api: RunningApiServer, client: Client, node: RunningAgent, image: str
) -> None:
    web, waiting, shop = f"web-{uuid.uuid4().hex[:6]}", f"queued-{uuid.uuid4().hex[:6]}", f"shop-{uuid.uuid4().hex[:6]}"
    async with dashboard(api.address) as d:
        await call(browser.get, d.login_url + "#/cluster")  # the first visit: its cookie lets the later ones in
        # The cluster page shows the agent's node, Ready, with its resource bars.
        card = f'.node[data-name="{node.node}"]'
        await until(browser, "the node card", lambda b: "Ready" in text_of(b, card))
        assert browser.find_elements(By.CSS_SELECTOR, f'{card} .bar[data-resource="cpu"]')

        await call(browser.get, d.url + "#/projects")
        await until(browser, "the apply panel", lambda b: b.find_elements(By.ID, "apply-text"))
        await call(browser.execute_script, "window.__notReloaded = true;")
        # Applied through the page, the project appears and turns Running without a reload.
        assert await apply_through_page(browser, manifest(web, image)) == f"project/{web} created"
        assert await apply_through_page(browser, set_manifest(shop, image)) == f"projectset/{shop} created"
        phase = f'tr[data-name="{web}"] .phase'
        await until(browser, f"{web} Running", lambda b: text_of(b, phase) == "Running", timeout=60)
        # A project no node can take stays Pending and says why, inline.
        assert (
            await apply_through_page(browser, manifest(waiting, image, selector="zone: nowhere"))
            == f"project/{waiting} created"
        )
        reason = f'tr[data-name="{waiting}"] .reason'
        await until(browser, "the Unschedulable reason", lambda b: "Unschedulable" in text_of(b, reason))
        assert text_of(browser, f'tr[data-name="{waiting}"] .phase') == "Pending"
        assert await call(browser.execute_script, "return window.__notReloaded === true;")
        await screenshot(browser, "projects")

        # A phase change made elsewhere shows on the page within a second (bound by hand, as a scheduler would).
        await call(browser.execute_script, WATCH_PHASE, waiting, "Pending")
        changed = time.time()
        await bind(client, waiting, node.node)
        seen_at = await until(
            browser, "the phase change", lambda b: b.execute_script("return window.__phaseChangedAt;")
        )
        assert seen_at / 1000 - changed < 1.0, f"the page showed the change after {seen_at / 1000 - changed:.2f} s"

        # The project page: its services, conditions and a live log tail from the node's agent.
        await call(browser.get, d.url + f"#/project/{web}")
        await until(browser, "the service's log", lambda b: f"started {web}" in text_of(b, "#logs"), timeout=30)
        assert "main" in text_of(browser, "#services-table")
        ticks = text_of(browser, "#logs").count("tick")
        await until(browser, "more log lines, followed", lambda b: text_of(b, "#logs").count("tick") > ticks + 1)
        await screenshot(browser, "project")

        await call(browser.get, d.url + "#/cluster")
        await until(browser, f"{web} on the node card", lambda b: web in text_of(b, card))
        await screenshot(browser, "cluster")

        # The ProjectSet applied above: listed with its counts, revision and Progressing condition; its page lists
        # the replica the controller made and the scheduler placed.
        await call(browser.get, d.url + "#/projectsets")
        row = f'#projectsets-table tr[data-name="{shop}"]'
        await until(browser, f"{shop} ready", lambda b: text_of(b, f"{row} .ready") == "1/1", timeout=30)
        assert "NewRevisionAvailable" in text_of(browser, f"{row} .condition")
        assert text_of(browser, f"{row} .revision").startswith("1 ")
        await screenshot(browser, "projectsets")
        await call((await call(browser.find_element, By.CSS_SELECTOR, f"{row} a")).click)
        await until(browser, "the set's page", lambda b: f"ProjectSet {shop}" in text_of(b, "h1"))
        replica = "#replicas-table tbody tr"
        await until(browser, "its replica Running", lambda b: text_of(b, f"{replica} .phase") == "Running")
        assert text_of(browser, replica).startswith(f"{shop}-") and node.node in text_of(browser, replica)
        summary = text_of(browser, "#projectset-summary")
        assert "1 desired · 1 ready · 1 up-to-date · 1 available · revision 1" in summary
        await screenshot(browser, "projectset")

        # Events (filtered by object) and the generic table of any kind.
        await call(browser.get, d.url + f"#/events?object=project%2F{web}")
        await until(browser, f"the events of {web}", lambda b: f"project/{web}" in text_of(b, "#events-table tbody"))
        await call(browser.get, d.url + "#/kinds/nodes")
        await until(
            browser,
            "the node in the generic table",
            lambda b: b.find_elements(By.CSS_SELECTOR, f'#kind-table tr[data-name="{node.node}"]'),
        )

        # Deleting it through the page removes it (Terminating, stopped by the agent, then collected).
        await call(browser.get, d.url + "#/projects")
        button = await until(
            browser,
            "the delete button",
            lambda b: b.find_elements(By.CSS_SELECTOR, f'button.delete[data-name="{web}"]'),
        )
        await call(button[0].click)
        await call(browser.switch_to.alert.accept)
        await until(
            browser, f"{web} gone", lambda b: not b.find_elements(By.CSS_SELECTOR, f'tr[data-name="{web}"]'), timeout=60
        )
        assert await call(browser.execute_script, "return window.__notReloaded === true;")


async def test_read_only_dashboard_refuses_actions(browser: Driver, api: RunningApiServer) -> None:
    async with dashboard(api.address, "--read-only") as d:
        await call(browser.get, d.login_url + "#/projects")
        await until(browser, "the read-only badge", lambda b: b.find_element(By.ID, "read-only").is_displayed())
        panel = await call(browser.find_element, By.ID, "apply-panel")
        assert not await call(panel.is_displayed), "the apply panel is hidden"
        # Even a request made from the page itself is refused by the server.
        status = await call(
            browser.execute_async_script,
            """
            const done = arguments[arguments.length - 1];
            fetch('/api/v1/apply', {method: 'POST', headers: {'Content-Type': 'application/json'},
                                    body: JSON.stringify({manifest: 'kind: Project'})})
              .then(async (r) => done([r.status, (await r.json()).error]));""",
        )
        assert status == [403, "the dashboard is read-only (started with --read-only)"]


async def test_project_page_shows_each_volumes_last_backup_against_its_every(
    browser: Driver, api: RunningApiServer, client: Client
) -> None:
    name = f"wiki-{uuid.uuid4().hex[:6]}"
    wiki = project(name)
    data = wiki.spec.volumes.add(name="data", type=v1.VOLUME_PERSISTENT)
    data.backup.repository, data.backup.every, data.backup.keep.last = "offsite", "5m", 3
    wiki.spec.volumes.add(name="files", type=v1.VOLUME_PERSISTENT)
    stored = await client.projects.create(wiki)
    now = SystemClock().now()
    status = stored.status.volumes.add(name="data", last_error="Fatal: unable to open repository")
    status.last_backup.id, status.last_backup.time.seconds = "4f1c2a9b" + "0" * 56, int(now - 900)
    meta.set_condition(
        stored.status.conditions, v1.CONDITION_BACKUP_OVERDUE, v1.TRUE, reason="Late", message="", now=now
    )
    await client.projects.update_status(stored)
    async with dashboard(api.address) as d:
        await call(browser.get, d.login_url + f"#/project/{name}")
        row = '#volumes-table tr[data-name="data"]'
        await until(browser, "the data volume's backup age", lambda b: "15m ago (every 5m)" in text_of(b, row))
        assert "Overdue" in text_of(browser, f"{row} .backup-age")
        assert "Fatal: unable to open repository" in text_of(browser, row)
        files = text_of(browser, '#volumes-table tr[data-name="files"]')
        assert "no backup: the data stays on its node when the project moves" in files
        await screenshot(browser, "volumes")
