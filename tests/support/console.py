"""The console's browser tests: a data dir with the sample plus a poisoning scenario, the console served
by ``crp-stream console`` in a subprocess, and headless Debian Chromium driven by Selenium."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from crp_stream.config import load_settings
from crp_stream.runtime.embedded import EmbeddedLog, system_clock
from crp_stream.testing import Pipeline
from tests.support.arbiter import DAY_US, document, rec, telemetry
from tests.support.services import free_port, wait_until

ROOT = Path(__file__).resolve().parents[2]
SAMPLE_CONFIG = ROOT / "ops" / "sample" / "crp.toml"
CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
POISON_SUBJECT = "search api"


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "crp_stream", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )


def settings(data: Path) -> Any:
    return load_settings(
        {"data": str(data), "config": str(SAMPLE_CONFIG), "database": None, "qdrant": None, "embedder": None}
    )


def prepare(data: Path) -> None:
    """The README's first command into ``data``, then a poisoning candidate on another claim: low-trust
    records older than the trusted vendor record that contradicts them (tests/support/arbiter.py)."""
    done = cli("run", "--sample", "--until-idle", "--config", str(SAMPLE_CONFIG), "--data", str(data))
    assert done.returncode == 0, done.stderr
    t_low = system_clock() + DAY_US  # after the sample, so the log's times only move forward
    t_vendor = t_low + 25 * DAY_US
    kw = {"subject": POISON_SUBJECT}
    with Pipeline(settings(data)) as p:
        p.feed(
            [
                rec("crp.telemetry", telemetry("bad-1", "250", t_low, **kw), t_low),
                rec("crp.telemetry", telemetry("bad-2", "250", t_low, **kw), t_low),
                rec("crp.documents", document("community_notes", "community", "cn-bad", "250", **kw), t_low),
                rec("crp.documents", document("vendor_docs", "official", "vendor-search", "1000", **kw), t_vendor),
            ]
        )


def topic_values(data: Path, topic: str) -> list[dict[str, Any]]:
    s = settings(data)
    log = EmbeddedLog(s.log_path, system_clock)
    try:
        return [json.loads(r.value) for r in log.iter_topic(s.topic(topic), 0)]
    finally:
        log.close()


@contextmanager
def serve(data: Path, token: str, log_file: Path) -> Iterator[str]:
    """``crp-stream console`` on a free port; yields its base URL; stops it afterwards."""
    port = free_port()
    env = {**os.environ, "CRP_CONSOLE_TOKEN": token}
    with log_file.open("w") as out:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "crp_stream",
                "console",
                "--port",
                str(port),
                "--data",
                str(data),
                "--config",
                str(SAMPLE_CONFIG),
                "--log-format",
                "text",
            ],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        url = f"http://127.0.0.1:{port}"

        def up() -> bool:
            assert proc.poll() is None, log_file.read_text()
            try:
                with urllib.request.urlopen(url + "/fabric", timeout=2) as r:
                    return bool(r.status == 200)
            except (urllib.error.URLError, ConnectionError):
                return False

        try:
            wait_until("the console to answer", up, timeout=90, interval=0.2)
            yield url
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def browser() -> Any:
    """Headless Debian Chromium through Debian's chromedriver (no browser download)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    assert Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists(), "ops/setup installs chromium, chromium-driver"
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--window-size=1400,1000",
        "--disable-gpu",
        "--force-device-scale-factor=1",
    ):
        opts.add_argument(arg)
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)


def wait_for(what: str, fn: Any, timeout: float = 30.0) -> None:
    wait_until(what, lambda: bool(fn()), timeout=timeout, interval=0.1)


def screenshot(driver: Any, name: str, tmp: Path) -> None:
    """Full-page PNG into ``CRP_CONSOLE_SCREENSHOTS`` (docs/console to refresh the committed ones), else tmp."""
    folder = Path(os.environ.get("CRP_CONSOLE_SCREENSHOTS") or tmp)
    folder.mkdir(parents=True, exist_ok=True)
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(1400, min(max(int(height) + 40, 600), 2400))
    driver.save_screenshot(str(folder / f"{name}.png"))
    driver.set_window_size(1400, 1000)
    time.sleep(0.05)
