"""A tiny W3C WebDriver client over ``requests`` (no selenium) for headless Chromium.

The session records the browser's console (``goog:loggingPrefs``): :meth:`Browser.browser_log`
reads and clears it (console messages, uncaught errors, failed page requests).
"""

from __future__ import annotations

import base64
import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import requests

ELEMENT = "element-6066-11e4-a52e-4f735466cecf"
CHROME_ARGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--window-size=1100,800",  # a laptop screen: a long answer outgrows it
]


def find_browser() -> tuple[str, str] | None:
    """(chromium, chromedriver) paths, or None when either is missing."""
    chrome = (
        os.environ.get("CHROME_BIN") or shutil.which("chromium") or shutil.which("chromium-browser")
    )
    driver = os.environ.get("CHROMEDRIVER") or shutil.which("chromedriver")
    if not chrome or not driver:
        return None
    return chrome, driver


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class WebDriverError(RuntimeError):
    pass


class Browser:
    """chromedriver + one headless Chromium session."""

    def __init__(self, chrome: str, driver: str) -> None:
        self.port = _free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self._profile = tempfile.mkdtemp(prefix="ck-chrome-")
        self._proc = subprocess.Popen(
            [driver, f"--port={self.port}"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self.session = ""
        try:
            deadline = time.monotonic() + 20
            while True:
                try:
                    if requests.get(f"{self.base}/status", timeout=2).json()["value"]["ready"]:
                        break
                except (requests.RequestException, ValueError, KeyError):
                    pass
                if time.monotonic() > deadline or self._proc.poll() is not None:
                    raise WebDriverError("chromedriver did not start")
                time.sleep(0.05)
            caps = {
                "capabilities": {
                    "alwaysMatch": {
                        "browserName": "chrome",
                        "goog:loggingPrefs": {"browser": "ALL"},
                        "goog:chromeOptions": {
                            "binary": chrome,
                            "args": [*CHROME_ARGS, f"--user-data-dir={self._profile}"],
                        },
                    }
                }
            }
            value = self._raw("POST", "/session", caps, timeout=60)
            self.session = value["sessionId"]
        except BaseException:
            self.close()
            raise

    def _raw(self, method: str, path: str, body: Any = None, timeout: float = 30) -> Any:
        response = requests.request(method, self.base + path, json=body, timeout=timeout)
        data = response.json()
        value = data.get("value")
        if response.status_code >= 400:
            raise WebDriverError(f"{method} {path}: {value}")
        return value

    def cmd(self, method: str, path: str, body: Any = None) -> Any:
        return self._raw(method, f"/session/{self.session}{path}", body)

    # -- commands ---------------------------------------------------------------------------
    def get(self, url: str) -> None:
        self.cmd("POST", "/url", {"url": url})

    def find(self, css: str) -> str:
        value = self.cmd("POST", "/element", {"using": "css selector", "value": css})
        return str(value[ELEMENT])

    def find_all(self, css: str) -> list[str]:
        value = self.cmd("POST", "/elements", {"using": "css selector", "value": css})
        return [str(v[ELEMENT]) for v in value]

    def click(self, element: str) -> None:
        self.cmd("POST", f"/element/{element}/click", {})

    def send_keys(self, element: str, text: str) -> None:
        self.cmd("POST", f"/element/{element}/value", {"text": text})

    def text(self, element: str) -> str:
        return str(self.cmd("GET", f"/element/{element}/text"))

    def script(self, source: str, *args: Any) -> Any:
        return self.cmd("POST", "/execute/sync", {"script": source, "args": list(args)})

    def find_js(self, source: str, *args: Any) -> str:
        """The element a script returns (``return document.querySelector(...)``)."""
        value = self.script(source, *args)
        if not isinstance(value, dict) or ELEMENT not in value:
            raise WebDriverError(f"the script returned no element: {value!r}")
        return str(value[ELEMENT])

    def browser_log(self) -> list[dict[str, Any]]:
        """The console entries since the last call (``level``, ``source``, ``message``):
        console calls, uncaught errors and failed requests; reading clears them."""
        return list(self.cmd("POST", "/se/log", {"type": "browser"}))

    def severe_errors(self) -> list[dict[str, Any]]:
        """The console entries of level SEVERE since the last read (uncaught errors,
        ``console.error``, failed requests); reading clears the log."""
        return [entry for entry in self.browser_log() if entry.get("level") == "SEVERE"]

    def open_playground(self, url: str) -> None:
        """Load the playground page at ``url`` and wait for its first poll; what an
        earlier page left in the console is dropped first (it is not this page's)."""
        self.browser_log()
        self.get(url + "/")
        self.wait_js("return document.body.dataset.version !== undefined", "the first poll")

    def send_message(self, text: str) -> None:
        """Type ``text`` into the playground's composer and press Send."""
        self.send_keys(self.find("#composer"), text)
        self.click(self.find("#send"))

    def screenshot(self, path: Path) -> Path:
        data = self.cmd("GET", "/screenshot")
        path.write_bytes(base64.b64decode(data))
        return path

    def wait_js(self, source: str, what: str, timeout: float = 15.0, *args: Any) -> Any:
        """Poll a JS expression (``return ...``) until truthy or the deadline."""
        deadline = time.monotonic() + timeout
        while True:
            value = self.script(source, *args)
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}")
            time.sleep(0.05)

    def close(self) -> None:
        if self.session:
            try:
                self._raw("DELETE", f"/session/{self.session}", timeout=10)
            except (requests.RequestException, WebDriverError, ValueError):
                pass
            self.session = ""
        if self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait(5)
        shutil.rmtree(self._profile, ignore_errors=True)
