"""The viewer page in a real browser: Debian's chromium, headless, driven by
Selenium (chromium, chromium-driver, python3-selenium; scripts/deps). Checks
that the timeline canvas renders (pixels that are not background), that a
click on a moment lists exactly its live blocks, that no request leaves the
file (every resource the page loaded is file: or data:), and saves a
screenshot to build/artifacts/viewer.png (and viewer-snapshot.png).

Skips, saying why, when the browser, its driver or Selenium is missing;
fails instead when CUDAPOOL_REQUIRE_BROWSER=1 (.ci/run sets it: CI must not
pass by skipping). Waits are for a condition the page sets (body's
data-ready), never sleeps. Run by tests/python/run."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
BUILD = os.environ.get("CUDAPOOL_TEST_BUILD") or os.path.join(ROOT, "build")
ARTIFACTS = os.path.join(BUILD, "artifacts")
VIEW = os.path.join(ROOT, "scripts", "cudapool-view")
REQUIRED = os.environ.get("CUDAPOOL_REQUIRE_BROWSER") == "1"

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_viewer import SNAPSHOT, TRACE  # noqa: E402


def import_selenium():
    """Selenium, or the reason it cannot be had. The first python3 on PATH
    (pyenv, a virtualenv) may lack Debian's python3-selenium, which is pure
    Python: its folder is tried last."""
    try:
        from selenium import webdriver
    except ImportError:
        sys.path.append("/usr/lib/python3/dist-packages")
        try:
            from selenium import webdriver
        except ImportError as e:
            return None, "python3-selenium is not installed (%s)" % e
    return webdriver, None


def find_browser():
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    if not chromium:
        return None, None, "chromium is not installed (Debian: apt-get install chromium)"
    if not driver:
        return None, None, "chromedriver is not installed (Debian: apt-get install chromium-driver)"
    return chromium, driver, None


def busy_trace():
    """Three call sites' worth of steps: enough to see in a screenshot."""
    lines = ["Thread,Time,Action,Pointer,Size,Stream,Site"]
    t = 0.0
    lines.append("1,0.0,segment_alloc,0x10000000,268435456,(nil)")
    for step in range(40):
        live = []
        for k in range(12):
            t += 0.0005
            addr = 0x10000000 + k * (16 << 20)
            size = (k % 3 + 1) * (3 << 20)
            site = ("layer%d.forward" % (k % 3))
            lines.append("1,%.9f,allocate,0x%x,%d,(nil),%s" % (t, addr, size, site))
            live.append(addr)
        for addr in live[::-1]:
            t += 0.0003
            lines.append("1,%.9f,free,0x%x,0,(nil)" % (t, addr))
    return "\n".join(lines) + "\n"


class Browser(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        webdriver, why = import_selenium()
        chromium, driver, why2 = find_browser()
        why = why or why2
        cls.driver = None
        cls.why_not = why
        if why:
            if REQUIRED:
                raise AssertionError("CUDAPOOL_REQUIRE_BROWSER=1 but " + why)
            # Each test skips on its own (setUp): tests/python/run counts
            # skips among the tests run, which a class-level skip is not.
            return
        from selenium.webdriver.chrome.service import Service
        opts = webdriver.ChromeOptions()
        opts.binary_location = chromium
        for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                  "--window-size=1400,1100", "--no-first-run", "--disable-extensions"):
            opts.add_argument(a)
        cls.tmp = tempfile.mkdtemp(prefix="cudapool-browser-")
        opts.add_argument("--user-data-dir=" + os.path.join(cls.tmp, "profile"))
        cls.driver = webdriver.Chrome(service=Service(driver), options=opts)
        cls.driver.set_page_load_timeout(60)
        os.makedirs(ARTIFACTS, exist_ok=True)

    @classmethod
    def tearDownClass(cls):
        if cls.driver is not None:
            cls.driver.quit()
            shutil.rmtree(cls.tmp, ignore_errors=True)

    def setUp(self):
        if self.why_not:
            self.skipTest(self.why_not)

    def open_page(self, name, text):
        src = os.path.join(self.tmp, name)
        with open(src, "w") as f:
            f.write(text)
        out = src + ".html"
        subprocess.run([VIEW, src, "-o", out], check=True, stderr=subprocess.DEVNULL, timeout=60)
        self.driver.get("file://" + out)
        from selenium.webdriver.support.ui import WebDriverWait
        WebDriverWait(self.driver, 30).until(
            lambda d: d.execute_script("return document.body.dataset.ready === '1'"))
        errors = [e for e in self.driver.get_log("browser") if e.get("level") == "SEVERE"]
        self.assertEqual(errors, [])

    def inked(self, canvas_id):
        """Pixels of the canvas that are not the white background."""
        return self.driver.execute_script("""
            const c = document.getElementById(arguments[0]);
            const px = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
            let n = 0;
            for (let i = 0; i < px.length; i += 4)
              if (px[i] < 250 || px[i + 1] < 250 || px[i + 2] < 250) n++;
            return n;""", canvas_id)

    def click_at_fraction(self, canvas_id, fraction):
        from selenium.webdriver.common.action_chains import ActionChains
        from selenium.webdriver.common.by import By
        c = self.driver.find_element(By.ID, canvas_id)
        w = c.size["width"]
        # Selenium 4 measures offsets from the element's centre.
        ActionChains(self.driver).move_to_element_with_offset(c, int(w * fraction - w / 2), 0).click().perform()

    def moment(self):
        return self.driver.execute_script("""
            const m = document.getElementById('moment');
            return {allocated: +m.dataset.allocated, reserved: +m.dataset.reserved,
                    rows: [...document.querySelectorAll('#blockrows tr')].map(
                      r => [...r.children].slice(0, 4).map(td => td.textContent))};""")

    def assert_nothing_left_the_file(self):
        urls = self.driver.execute_script(
            "return performance.getEntriesByType('resource').map(e => e.name)"
            ".concat(performance.getEntriesByType('navigation').map(e => e.name));")
        self.assertTrue(urls, "the page's own load is not listed")
        self.assertEqual([u for u in urls if not (u.startswith("file:") or u.startswith("data:"))], [])

    def test_timeline_renders_and_a_click_lists_the_moments_blocks(self):
        self.open_page("small.csv", TRACE)
        self.assertGreater(self.inked("timeline"), 1000)
        self.assertGreater(self.inked("segmap"), 100)
        # The page opens at the peak: moment 2, two blocks.
        self.assertEqual(self.moment()["allocated"], 3145728)
        # 5.5 ms of the trace's 6 ms: moment 4 (after the 64 KiB allocate).
        self.click_at_fraction("timeline", 5.5 / 6)
        m = self.moment()
        self.assertEqual((m["allocated"], m["reserved"]), (2162688, 4194304))
        self.assertEqual(m["rows"], [["0x1100000", "2,097,152", "2,097,152", "allocated"],
                                     ["0x1300000", "65,536", "65,536", "allocated"]])
        self.assert_nothing_left_the_file()

    def test_busy_trace_screenshot(self):
        self.open_page("busy.csv", busy_trace())
        self.assertGreater(self.inked("timeline"), 20000)
        self.click_at_fraction("timeline", 0.52)
        self.assertGreater(len(self.moment()["rows"]), 0)
        self.assert_nothing_left_the_file()
        self.assertTrue(self.driver.save_screenshot(os.path.join(ARTIFACTS, "viewer.png")))

    def test_trace_without_segments(self):
        self.open_page("nosegs.csv", TRACE.replace("1,10.000000000,segment_alloc,0x1000000,4194304,(nil)\n", ""))
        self.assertGreater(self.inked("timeline"), 1000)
        m = self.moment()
        self.assertEqual((m["allocated"], len(m["rows"])), (3145728, 2))

    def test_snapshot_page(self):
        self.open_page("snap.json", json.dumps(SNAPSHOT))
        m = self.moment()
        self.assertEqual((m["allocated"], m["reserved"], len(m["rows"])), (4194304, 8388608, 3))
        self.assertGreater(self.inked("segmap"), 100)
        self.assert_nothing_left_the_file()
        self.assertTrue(self.driver.save_screenshot(os.path.join(ARTIFACTS, "viewer-snapshot.png")))


if __name__ == "__main__":
    unittest.main()
