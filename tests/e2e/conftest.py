"""The harness of the dashboard's browser tests: the real `shortlink` debug binary on a random
port with a temporary SQLite database, a workspace and key made with its CLI, and the system's
Chromium driven by Playwright. Screenshots go to target/e2e-screenshots/."""

import http.client
import json
import os
import socket
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest
from playwright.sync_api import expect, sync_playwright

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(os.environ.get("SHORTLINK_BIN", ROOT / "target" / "debug" / "shortlink"))
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
AXE = Path(__file__).parent / "node_modules" / "axe-core" / "axe.min.js"
SCREENSHOTS = ROOT / "target" / "e2e-screenshots"
FIGURES = ROOT / "target" / "e2e-figures.txt"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run",
]
WIDTHS = {"desktop": 1280, "mobile": 375}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """A running `shortlink serve`, with one workspace and its key."""

    def __init__(self, workdir: Path):
        self.env = {**os.environ, "DATABASE_URL": f"sqlite://{workdir}/e2e.db", "RUST_LOG": "warn"}
        subprocess.run([BIN, "workspace", "create", "e2e", "--rate-limit", "10000"],
                       env=self.env, check=True, capture_output=True)
        self.key = self.cli("key", "create", "--workspace", "e2e")
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.log = open(workdir / "server.log", "w")
        # At info, every request is logged: the test then checks the key appears in none of it.
        self.process = subprocess.Popen(
            [BIN, "serve", "--listen", f"127.0.0.1:{self.port}", "--webhook-allow-private-targets"],
            env={**self.env, "RUST_LOG": "info"}, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(f"{self.base}/healthz", timeout=1)
                break
            except OSError:
                assert self.process.poll() is None, "the server exited at start"
                assert time.monotonic() < deadline, "the server did not answer /healthz in 30 s"
                time.sleep(0.05)

    def cli(self, *args):
        out = subprocess.run([BIN, *args], env=self.env, check=True, capture_output=True, text=True)
        return out.stdout.strip()

    def api(self, method, path, body=None):
        """A call to the API with the key; (status, envelope)."""
        request = urllib.request.Request(
            f"{self.base}/api/v1{path}", method=method,
            data=None if body is None else json.dumps(body).encode(),
            headers={"Authorization": f"Bearer {self.key}", "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return response.status, json.loads(response.read() or b"null")
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read() or b"null")

    def visit(self, code, user_agent, referer=None):
        """A visitor's GET of a short link; the redirect's status (not followed)."""
        headers = {"User-Agent": user_agent} | ({"Referer": referer} if referer else {})
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        connection.request("GET", f"/{code}", headers=headers)
        status = connection.getresponse().status
        connection.close()
        return status

    def stop(self):
        self.process.terminate()
        self.process.wait(timeout=15)
        self.log.close()


@pytest.fixture(scope="session")
def server():
    assert BIN.exists(), f"build the server first: cargo build -p shortlink-server ({BIN})"
    with tempfile.TemporaryDirectory() as workdir:
        s = Server(Path(workdir))
        yield s
        s.stop()
        log = (Path(workdir) / "server.log").read_text()
        assert "panicked" not in log, log
        assert "/api/v1/links" in log, "the server logged its requests"
        assert s.key not in log and s.key[3:15] not in log, "the API key appeared in the server's log"


@pytest.fixture(scope="session")
def browser():
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


class Dashboard:
    """One browser tab on the dashboard, with what it wrote to its console."""

    def __init__(self, context, server):
        self.context = context
        self.server = server
        self.page = context.new_page()
        self.problems = []
        self.page.on("console", self._console)
        self.page.on("pageerror", lambda e: self.problems.append(f"uncaught: {e}"))

    def _console(self, message):
        # A failed fetch logs "Failed to load resource": the pages show those as messages, and
        # the tests ask for some (a 404, a 400). Anything else is a problem, CSP reports first.
        if message.type in ("error", "warning") and "Failed to load resource" not in message.text:
            self.problems.append(f"{message.type}: {message.text}")

    def open(self, hash_="#/links"):
        self.page.goto(f"{self.server.base}/{hash_}")
        return self.page

    def sign_in(self, key=None):
        page = self.open()
        page.get_by_label("API key").fill(key or self.server.key)
        page.get_by_role("button", name="Sign in").click()
        expect(page.get_by_role("heading", name="Links", exact=True)).to_be_visible()
        return page

    def check_accessibility(self, name):
        """axe-core in the page: no serious or critical violation."""
        # Evaluated through the DevTools protocol, which the page's policy does not govern: the
        # policy stays on for everything the dashboard itself does.
        if not self.page.evaluate("typeof axe !== 'undefined'"):
            self.page.evaluate(AXE.read_text() + "\n;void 0")
        result = self.page.evaluate("async () => await axe.run(document, {resultTypes: ['violations']})")
        bad = [f"{v['id']} ({v['impact']}): {v['help']} at {[n['target'] for n in v['nodes']][:3]}"
               for v in result["violations"] if v["impact"] in ("serious", "critical")]
        assert not bad, f"{name}: " + "; ".join(bad)

    def screenshots(self, name):
        """The page at 1280 and at 375 px wide, full height."""
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        for label, width in WIDTHS.items():
            self.page.set_viewport_size({"width": width, "height": 900})
            self.page.screenshot(path=SCREENSHOTS / f"{name}-{width}.png", full_page=True)
            scroll = self.page.evaluate("document.documentElement.scrollWidth")
            assert scroll <= width + 1, f"{name} scrolls sideways at {width} px ({scroll} px wide)"
        self.page.set_viewport_size({"width": 1280, "height": 900})


@pytest.fixture
def dashboard(browser, server):
    context = browser.new_context(viewport={"width": 1280, "height": 900}, accept_downloads=True)
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=server.base)
    d = Dashboard(context, server)
    yield d
    context.close()
    assert not d.problems, d.problems


@pytest.fixture(scope="session")
def report():
    """Writes a measured figure to the terminal and to target/e2e-figures.txt."""
    FIGURES.parent.mkdir(parents=True, exist_ok=True)
    FIGURES.write_text("")

    def write(line):
        print(f"\n{line}")
        with FIGURES.open("a") as out:
            out.write(line + "\n")

    return write
