"""Tests of python/cudapool (the ctypes module) on the fake CUDA runtime.

cudapool must be preloaded when a process starts, so every case that needs
it runs a child Python with LD_PRELOAD=<build>/libcudapool.so (after the
sanitizer runtimes of $CUDAPOOL_TEST_SAN_PRELOAD, as tests/support/it_run.c
does) that loads build/fakecudart/libcudart.so.13 with RTLD_GLOBAL and calls
cudaMalloc/cudaFree through the process's global scope, where the preloaded
shim comes first. The child prints one JSON line; the parent checks it.
Run by tests/python/run (scripts/run-tests reads its closing line).
"""

import ctypes
import errno
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import unittest

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
BUILD = os.environ.get("CUDAPOOL_TEST_BUILD") or os.path.join(ROOT, "build")
LIB = os.path.join(BUILD, "libcudapool.so")
FAKE_RT = os.path.join(BUILD, "fakecudart", "libcudart.so.13")
PYDIR = os.path.join(ROOT, "python")
sys.path.insert(0, PYDIR)

import cudapool  # noqa: E402
from cudapool import _layout  # noqa: E402

MiB = 1 << 20

# Imported by every child: the fake runtime, and malloc/free through the
# global scope (the shim's cudaMalloc, not the fake's own).
PRELUDE = """
import ctypes, json, os, sys
import cudapool
rt = ctypes.CDLL(%r, mode=ctypes.RTLD_GLOBAL)
g = ctypes.CDLL(None)
g.cudaMalloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
g.cudaFree.argtypes = [ctypes.c_void_p]
def malloc(n):
    p = ctypes.c_void_p()
    rc = g.cudaMalloc(ctypes.byref(p), n)
    return p.value if rc == 0 else rc
def malloc_rc(n):
    p = ctypes.c_void_p()
    return g.cudaMalloc(ctypes.byref(p), n)
def free(p):
    assert g.cudaFree(p) == 0
def out(**kw):
    print("RESULT " + json.dumps(kw))
""" % FAKE_RT


def child_env(preload):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("CUDAPOOL_", "FAKECUDA_")) or k.startswith("CUDAPOOL_TEST_")}
    env.pop("LD_PRELOAD", None)
    env["PYTHONPATH"] = PYDIR
    # Exact figures after exact sequences: no reclaimer passes in between
    # (its own tests: tests/integration/runtime/reclaim_mt.c).
    env["CUDAPOOL_RECLAIM_INTERVAL"] = "0"
    san = os.environ.get("CUDAPOOL_TEST_SAN_PRELOAD", "").split()
    if san:
        # Python itself is not instrumented and keeps memory until exit.
        env["ASAN_OPTIONS"] = "detect_leaks=0:" + env.get("ASAN_OPTIONS", "")
    parts = san + ([LIB] if preload else [])
    if parts:
        env["LD_PRELOAD"] = ":".join(parts)
    return env


def run_child(code, preload=True, extra_env=None):
    env = child_env(preload)
    env.update(extra_env or {})
    return subprocess.run([sys.executable, "-c", PRELUDE + textwrap.dedent(code)], env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                          timeout=120)


class Child(unittest.TestCase):
    def result(self, code, **kw):
        p = run_child(code, **kw)
        self.assertEqual(p.returncode, 0, "child failed:\n" + p.stdout + p.stderr)
        lines = [l for l in p.stdout.splitlines() if l.startswith("RESULT ")]
        self.assertEqual(len(lines), 1, p.stdout + p.stderr)
        return json.loads(lines[0][len("RESULT "):])


class BeforeCuda(unittest.TestCase):
    def test_stats_before_any_cuda_call_are_zeros(self):
        # No CUDA runtime in the process yet (a framework not imported): zeros,
        # as documented, and the pool still serves once the runtime is there.
        code = textwrap.dedent("""
            import ctypes, json, cudapool
            before = cudapool.stats(0)
            rt = ctypes.CDLL(%r, mode=ctypes.RTLD_GLOBAL)
            g = ctypes.CDLL(None)
            g.cudaMalloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
            p = ctypes.c_void_p()
            rc = g.cudaMalloc(ctypes.byref(p), 1 << 20)
            after = cudapool.stats(0)
            print("RESULT " + json.dumps(dict(device=before["device"], num_alloc=before["num_alloc"],
                                              reserved=before["reserved_bytes"], rc=rc,
                                              served=after["num_alloc"])))
        """ % FAKE_RT)
        p = subprocess.run([sys.executable, "-c", code], env=child_env(True), stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, universal_newlines=True, timeout=120)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        line = [l for l in p.stdout.splitlines() if l.startswith("RESULT ")][0]
        r = json.loads(line[len("RESULT "):])
        self.assertEqual(r, {"device": 0, "num_alloc": 0, "reserved": {"current": 0, "peak": 0}, "rc": 0,
                             "served": 1})


class NotLoaded(Child):
    def test_without_preload(self):
        r = self.result("""
            errs = {}
            for name, call in (("stats", lambda: cudapool.stats()),
                               ("empty_cache", lambda: cudapool.empty_cache()),
                               ("set_limit", lambda: cudapool.set_limit("8G")),
                               ("reset_peak", lambda: cudapool.reset_peak()),
                               ("memory_summary", lambda: cudapool.memory_summary()),
                               ("push_tag", lambda: cudapool.push_tag("x")),
                               ("pop_tag", lambda: cudapool.pop_tag())):
                try:
                    call()
                    errs[name] = None
                except RuntimeError as e:
                    errs[name] = str(e)
            out(loaded=cudapool.is_loaded(), version=cudapool.version(), errs=errs)
        """, preload=False)
        self.assertIs(r["loaded"], False)
        self.assertIsNone(r["version"])
        for name, msg in r["errs"].items():
            self.assertIsNotNone(msg, name)
            self.assertIn("LD_PRELOAD", msg, name)
            self.assertIn("python -m cudapool", msg, name)

    def test_tag_without_preload_does_nothing(self):
        r = self.result("""
            with cudapool.tag("forward") as t:
                inside = True
            out(inside=inside, pushed=t._pushed)
        """, preload=False)
        self.assertEqual(r, {"inside": True, "pushed": False})

    def test_this_process_is_not_preloaded(self):
        if "libcudapool" in os.environ.get("LD_PRELOAD", ""):
            self.skipTest("the test runner itself runs under the preload")
        self.assertFalse(cudapool.is_loaded())
        self.assertIsNone(cudapool.version())
        self.assertRaises(cudapool.NotLoadedError, cudapool.stats)


def header_version():
    """X.Y.Z of include/cudapool.h, the version's one home."""
    with open(os.path.join(ROOT, "include", "cudapool.h")) as f:
        text = f.read()
    import re
    return ".".join(re.search(r"#define CUDAPOOL_VERSION_%s (\d+)" % k, text).group(1)
                    for k in ("MAJOR", "MINOR", "PATCH"))


class Loaded(Child):
    def test_version(self):
        r = self.result("out(loaded=cudapool.is_loaded(), version=cudapool.version())")
        self.assertIs(r["loaded"], True)
        self.assertEqual(r["version"], header_version())

    def test_exact_stats_after_an_exact_sequence(self):
        # 1 MiB: small pool, a 2 MiB segment (miss); freed and asked again by
        # the same thread with no streams: reused at once (hit). 3 MiB: large
        # pool, a 20 MiB segment (miss), then freed. docs/DESIGN.md.
        r = self.result("""
            a = malloc(1 << 20); free(a)
            b = malloc(1 << 20)
            c = malloc(3 << 20); free(c)
            s = cudapool.stats(0)
            # The library's own JSON report, for the names and the values.
            libc = ctypes.CDLL("libc.so.6")
            libc.fopen.restype = ctypes.c_void_p
            libc.fopen.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
            libc.fclose.argtypes = [ctypes.c_void_p]
            g.cudapool_print_stats.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
            path = sys.argv[0] if False else "/tmp/cudapool-pytest-%d.json" % os.getpid()
            f = libc.fopen(path.encode(), b"w")
            rc = g.cudapool_print_stats(f, b"json"); libc.fclose(f)
            with open(path) as fh: report = json.load(fh)
            os.unlink(path)
            out(stats=s, rc=rc, report=report)
        """)
        s = r["stats"]
        self.assertEqual(s["num_alloc"], 3)
        self.assertEqual(s["num_free"], 2)
        self.assertEqual(s["hits"], 1)
        self.assertEqual(s["misses"], 2)
        self.assertEqual(s["num_immediate_reuse"], 1)
        self.assertEqual(s["num_device_alloc"], 2)
        self.assertEqual(s["num_device_free"], 0)
        self.assertEqual(s["num_ooms"], 0)
        self.assertEqual(s["allocated_bytes"], {"current": 1 * MiB, "peak": 4 * MiB})
        self.assertEqual(s["allocated_blocks"], {"current": 1, "peak": 2})
        self.assertEqual(s["reserved_bytes"], {"current": 22 * MiB, "peak": 22 * MiB})
        self.assertEqual(s["segments"], {"current": 2, "peak": 2})
        self.assertEqual(s["cached_bytes"]["current"], 21 * MiB)
        # The freed 3 MiB block merges with the rest of its segment into one
        # pending 20 MiB block (nothing synchronised since): still active, not
        # reusable by every stream. The largest block reusable now is the
        # other half of the small segment.
        self.assertEqual(s["pending_bytes"]["current"], 20 * MiB)
        self.assertEqual(s["active_bytes"]["current"], 21 * MiB)
        self.assertEqual(s["largest_free_block"], 1 * MiB)
        self.assertEqual(s["utilization"], round(4 / 22, 4))
        # Every name of the exit report, with the same values.
        self.assertEqual(r["rc"], 0)
        self.assertEqual(len(r["report"]["devices"]), 1)
        self.assertEqual(s, r["report"]["devices"][0])

    def test_regions_through_tag_and_push_pop_with_exact_figures(self):
        # As tests/integration/runtime/regions.c: 1 MiB live before the first
        # tag; "forward" { 2 MiB; "attention" { 3 MiB, freed }; 512 KiB };
        # "attention" { 1 MiB }.
        r = self.result("""
            w = malloc(1 << 20)
            with cudapool.tag("forward"):
                a = malloc(2 << 20)
                with cudapool.tag("attention"):
                    free(malloc(3 << 20))
                c = malloc(1 << 19)
            cudapool.push_tag(b"attention"); d = malloc(1 << 20); cudapool.pop_tag()
            try:
                cudapool.pop_tag(); err = None
            except OSError as e:
                err = e.errno
            libc = ctypes.CDLL("libc.so.6")
            libc.fopen.restype = ctypes.c_void_p
            libc.fopen.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
            libc.fclose.argtypes = [ctypes.c_void_p]
            g.cudapool_print_stats.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
            path = "/tmp/cudapool-pytest-regions-%d.json" % os.getpid()
            f = libc.fopen(path.encode(), b"w")
            rc = g.cudapool_print_stats(f, b"json"); libc.fclose(f)
            with open(path) as fh: report = json.load(fh)
            os.unlink(path)
            out(err=err, rc=rc, regions=report["regions"])
        """)
        self.assertEqual(r["err"], errno.EINVAL)
        self.assertEqual(r["rc"], 0)
        self.assertEqual(r["regions"], [
            {"name": "forward", "peak_bytes": 6 * MiB, "allocated_bytes": 5 * MiB + MiB // 2, "allocations": 3,
             "entries": 1, "open": 0},
            {"name": "attention", "peak_bytes": 6 * MiB, "allocated_bytes": 4 * MiB, "allocations": 2,
             "entries": 2, "open": 0}])

    def test_tag_refuses_a_name_that_is_no_string(self):
        r = self.result("""
            try:
                cudapool.push_tag(3); what = None
            except TypeError as e:
                what = str(e)
            out(what=what)
        """)
        self.assertEqual(r["what"], "a region's name is a str or bytes, not 3")

    def test_empty_cache_releases_reserved_bytes(self):
        r = self.result("""
            a = malloc(1 << 20); c = malloc(3 << 20); free(a); free(c)
            before = cudapool.stats(0)
            cudapool.empty_cache(0)
            after_one = cudapool.stats(0)
            d = malloc(1 << 20); free(d)
            cudapool.empty_cache()
            after_all = cudapool.stats(0)
            out(before=before, after_one=after_one, after_all=after_all)
        """)
        self.assertEqual(r["before"]["reserved_bytes"]["current"], 22 * MiB)
        self.assertEqual(r["after_one"]["reserved_bytes"], {"current": 0, "peak": 22 * MiB})
        self.assertEqual(r["after_one"]["segments"]["current"], 0)
        self.assertEqual(r["after_one"]["num_device_free"], 2)
        self.assertEqual(r["after_all"]["reserved_bytes"]["current"], 0)
        self.assertEqual(r["after_all"]["num_device_free"], 3)

    def test_set_limit_makes_a_too_large_malloc_fail(self):
        r = self.result("""
            cudapool.set_limit("4M", 0)           # before any allocation: creates the pool
            big = malloc_rc(8 << 20)
            small = malloc(1 << 20)
            s = cudapool.stats(0)
            cudapool.set_limit(0)                 # no limit, every device
            again = malloc(8 << 20)
            cudapool.set_limit(1 << 30, device=0)
            out(big=big, small_ok=small > 4096, ooms=s["num_ooms"], again_ok=again > 4096,
                reserved=s["reserved_bytes"]["current"])
        """)
        self.assertEqual(r["big"], 2)  # cudaErrorMemoryAllocation
        self.assertTrue(r["small_ok"])
        self.assertEqual(r["ooms"], 1)
        self.assertLessEqual(r["reserved"], 4 * MiB)
        self.assertTrue(r["again_ok"])

    def test_reset_peak(self):
        r = self.result("""
            a = malloc(4 << 20); free(a)
            before = cudapool.stats(0)
            cudapool.reset_peak(0)
            one = cudapool.stats(0)
            b = malloc(1 << 20); free(b)
            cudapool.reset_peak()
            out(before=before, one=one, all=cudapool.stats(0))
        """)
        self.assertEqual(r["before"]["allocated_bytes"], {"current": 0, "peak": 4 * MiB})
        self.assertEqual(r["one"]["allocated_bytes"], {"current": 0, "peak": 0})
        self.assertEqual(r["one"]["reserved_bytes"], {"current": 20 * MiB, "peak": 20 * MiB})
        self.assertEqual(r["all"]["allocated_bytes"], {"current": 0, "peak": 0})
        self.assertEqual(r["all"]["allocated_blocks"], {"current": 0, "peak": 0})
        self.assertEqual(r["all"]["num_alloc"], 2)  # counters are not peaks

    def test_memory_summary(self):
        r = self.result("""
            a = malloc(1 << 20); free(a); b = malloc(1 << 20); c = malloc(3 << 20); free(c)
            out(text=cudapool.memory_summary(), default=cudapool.memory_summary(0))
        """)
        text = r["text"]
        self.assertEqual(text, r["default"])
        lines = text.splitlines()
        self.assertIn("device 0", lines[1])

        def row(name):
            hit = [l for l in lines if l.startswith("| " + name + " ")]
            self.assertEqual(len(hit), 1, name + " in\n" + text)
            return [c.strip() for c in hit[0].strip("|").split("|")]

        self.assertEqual(row("Allocated memory")[1:], ["1.00 MiB", "4.00 MiB"])
        self.assertEqual(row("Active memory")[1:], ["21.00 MiB", "21.00 MiB"])
        self.assertEqual(row("Pending memory")[1:], ["20.00 MiB", "20.00 MiB"])
        self.assertEqual(row("Reserved memory")[1:], ["22.00 MiB", "22.00 MiB"])
        self.assertEqual(row("Cached memory")[1:], ["21.00 MiB", "21.00 MiB"])
        self.assertEqual(row("Cache hits / misses")[1:], ["1 / 2"])
        self.assertEqual(row("Hit rate")[1:], ["33.3%"])
        self.assertEqual(row("Barriers")[1:], ["0"])
        self.assertEqual(row("OOMs")[1:], ["0"])
        self.assertEqual(row("Allocations / frees")[1:], ["3 / 2"])
        self.assertEqual(row("Largest free block")[1:], ["1.00 MiB"])
        self.assertEqual(row("Utilization (peak alloc/res)")[1:], ["18.2%"])
        self.assertEqual(len({len(l) for l in lines}), 1, "ragged table:\n" + text)

    def test_device_out_of_int_range_refused(self):
        # ctypes would cut these to a C int: 2**32 is device 0, 2**32 - 1 is -1 (every device).
        r = self.result("""
            p = malloc(1 << 20)
            res = {}
            for name, call in (("stats", lambda: cudapool.stats(2 ** 32)),
                               ("set_limit", lambda: cudapool.set_limit("1M", device=2 ** 32)),
                               ("empty_cache", lambda: cudapool.empty_cache(2 ** 32 - 1)),
                               ("reset_peak", lambda: cudapool.reset_peak(-2 ** 31 - 1)),
                               ("summary", lambda: cudapool.memory_summary(2 ** 40))):
                try:
                    call(); res[name] = None
                except ValueError as e:
                    res[name] = str(e)
            free(p)
            q = malloc(3 << 20)
            out(res=res, limit_untouched=isinstance(q, int) and q > 1000,
                reserved=cudapool.stats(0)["reserved_bytes"]["current"])
        """)
        self.assertEqual(r["res"]["stats"], "device 4294967296 is out of range (a device number, or -1 for "
                         "every device)")
        for name in ("set_limit", "empty_cache", "reset_peak", "summary"):
            self.assertIsNotNone(r["res"][name], name)
            self.assertIn("is out of range", r["res"][name], name)
        self.assertTrue(r["limit_untouched"], "device 0 got the limit meant for 2**32")
        # empty_cache(2**32 - 1) did not empty device 0: its 2 MiB segment is still there.
        self.assertGreaterEqual(r["reserved"], 2 << 20)

    def test_errors_name_the_errno(self):
        r = self.result("""
            import errno
            res = {}
            for name, call in (("stats", lambda: cudapool.stats(99)),
                               ("reset_peak", lambda: cudapool.reset_peak(99)),
                               ("empty_cache", lambda: cudapool.empty_cache(-5)),
                               ("set_limit", lambda: cudapool.set_limit("1G", 99)),
                               ("set_limit_absent", lambda: cudapool.set_limit("1G", 1)),
                               ("summary", lambda: cudapool.memory_summary(99))):
                try:
                    call(); res[name] = None
                except OSError as e:
                    res[name] = [errno.errorcode[e.errno], str(e)]
            for name, call in (("str_device", lambda: cudapool.stats("0")),
                               ("bad_size", lambda: cudapool.set_limit("8Q")),
                               ("percent", lambda: cudapool.set_limit("80%"))):
                try:
                    call(); res[name] = None
                except (TypeError, ValueError) as e:
                    res[name] = [type(e).__name__, str(e)]
            out(res=res)
        """)
        res = r["res"]
        for name in ("stats", "reset_peak", "set_limit", "summary"):
            self.assertEqual(res[name][0], "ENODEV", name)
            self.assertIn("ENODEV", res[name][1], name)
            self.assertIn("device=99", res[name][1], name)
        # The fake has one device: device 1 does not exist (no pool is made).
        self.assertEqual(res["set_limit_absent"][0], "ENODEV")
        self.assertEqual(res["empty_cache"][0], "EINVAL")
        self.assertIn("cudapool_empty_cache(device=-5) failed: EINVAL", res["empty_cache"][1])
        self.assertEqual(res["str_device"][0], "TypeError")
        self.assertEqual(res["bad_size"][0], "ValueError")
        self.assertIn("8Q", res["bad_size"][1])
        self.assertEqual(res["percent"][0], "ValueError")


class Sizes(unittest.TestCase):
    def test_parse_size(self):
        P = cudapool.parse_size
        self.assertEqual(P("8G"), 8 << 30)
        self.assertEqual(P("8GiB"), 8 << 30)
        self.assertEqual(P("8gb"), 8 << 30)
        self.assertEqual(P(" 64K "), 64 << 10)
        self.assertEqual(P("1.5G"), 1610612736)
        self.assertEqual(P("512B"), 512)
        self.assertEqual(P("512"), 512)
        self.assertEqual(P(4096), 4096)
        self.assertEqual(P("0"), 0)
        self.assertEqual(P("16777215T"), 16777215 << 40)
        for bad in ("1.5", "8 G", "8Q", "-1", "80%", "", "0x10", "1e9", "16777216T"):
            self.assertRaises(ValueError, P, bad)
        self.assertRaises(ValueError, P, -1)
        self.assertRaises(ValueError, P, 1 << 64)
        self.assertRaises(TypeError, P, True)
        self.assertRaises(TypeError, P, 1.5)


class Layout(Child):
    def test_library_says_the_headers_lists(self):
        r = self.result("""
            from cudapool import _layout
            lists, source = _layout.load(ctypes.CDLL(None))
            S = _layout.make_struct(lists)
            out(lists=lists, source=source, size=ctypes.sizeof(S), align=ctypes.alignment(S))
        """)
        self.assertEqual(r["source"], "library")
        with open(os.path.join(ROOT, "include", "cudapool.h")) as f:
            self.assertEqual(r["lists"], _layout.parse_header(f.read()))
        lists = r["lists"]
        want = 16 + 16 * len(lists["GAUGES"]) + 8 * (len(lists["COUNTERS"]) + len(lists["SNAPSHOT"]))
        self.assertEqual(r["size"], want)
        self.assertEqual(r["align"], 8)

    def test_without_the_library_function_the_source_trees_header_is_read(self):
        lists, source = _layout.load(None)
        self.assertEqual(os.path.realpath(source), os.path.realpath(os.path.join(ROOT, "include", "cudapool.h")))
        self.assertEqual(lists["GAUGES"][0], "allocated_bytes")

    def test_neither_library_nor_header_is_a_clear_error(self):
        old = os.environ.get("CUDAPOOL_HEADER")
        os.environ["CUDAPOOL_HEADER"] = "/nonexistent/cudapool.h"
        try:
            with self.assertRaises(_layout.LayoutError) as cm:
                _layout.load(None)
            self.assertIn("set CUDAPOOL_HEADER", str(cm.exception))
        finally:
            if old is None:
                del os.environ["CUDAPOOL_HEADER"]
            else:
                os.environ["CUDAPOOL_HEADER"] = old

    def test_a_malformed_library_answer_is_refused(self):
        for bad in ("", "version=1", "version=x;gauges a;counters b;snapshot c",
                    "version=1;counters a;gauges b;snapshot c"):
            self.assertRaises(ValueError, _layout.parse_library, bad)
        self.assertEqual(_layout.parse_library("version=2;gauges a b;counters;snapshot c"),
                         {"version": 2, "GAUGES": ["a", "b"], "COUNTERS": [], "SNAPSHOT": ["c"]})


class Version(unittest.TestCase):
    def test_module_version_is_the_headers(self):
        self.assertEqual(cudapool.__version__, header_version(),
                         "python/cudapool/__init__.py __version__ differs from include/cudapool.h")

    def test_package_takes_the_modules_version(self):
        # pip's version is cudapool.__version__ (dynamic), not a second copy.
        with open(os.path.join(PYDIR, "pyproject.toml")) as f:
            text = f.read()
        import re
        self.assertIsNone(re.search(r"^version\s*=\s*\"", text, re.M), "a literal version in pyproject.toml")
        self.assertRegex(text, r'(?m)^dynamic = \["version"\]$')
        self.assertRegex(text, r'(?m)^version = \{attr = "cudapool.__version__"\}$')


class Main(unittest.TestCase):
    def run_main(self, args, extra_env=None):
        env = child_env(False)
        env["CUDAPOOL_LIB"] = LIB
        env.update(extra_env or {})
        return subprocess.run([sys.executable, "-m", "cudapool"] + args, env=env, cwd="/",
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              universal_newlines=True, timeout=120)

    def test_help(self):
        p = self.run_main(["--help"])
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertTrue(p.stdout.startswith("usage: cudapool [OPTIONS]"), p.stdout)

    def test_bad_flag_value_refused_by_the_launcher(self):
        p = self.run_main(["--limit", "8Q", "--", "true"])
        self.assertEqual(p.returncode, 2)
        self.assertIn('--limit "8Q" is not a size', p.stderr)

    def test_runs_python_under_the_pool(self):
        code = ("import cudapool, ctypes, os; ctypes.CDLL(%r, mode=ctypes.RTLD_GLOBAL); "
                "s = cudapool.stats(0); " % FAKE_RT +
                "print(cudapool.is_loaded(), os.environ['CUDAPOOL_LIMIT'], s['num_alloc'])")
        p = self.run_main(["--limit", "8G", "--", sys.executable, "-c", code])
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout.split(), ["True", "8G", "0"])

    def test_no_launcher(self):
        p = self.run_main(["--help"], {"CUDAPOOL_LAUNCHER": "/nonexistent/cudapool"})
        self.assertEqual(p.returncode, 127)
        self.assertIn("cannot find the cudapool launcher", p.stderr)


# A stand-in for PyTorch: its CUDAPluggableAllocator loads the library by
# path and resolves the two names as PyTorch does, and its allocations go
# through them.
FAKE_TORCH = """
import ctypes
class CUDAPluggableAllocator:
    def __init__(self, path, alloc_fn_name, free_fn_name):
        self.path, self.names = path, (alloc_fn_name, free_fn_name)
        lib = ctypes.CDLL(path)
        self.alloc = getattr(lib, alloc_fn_name)
        self.alloc.argtypes = [ctypes.c_ssize_t, ctypes.c_int, ctypes.c_void_p]
        self.alloc.restype = ctypes.c_void_p
        self.free = getattr(lib, free_fn_name)
        self.free.argtypes = [ctypes.c_void_p, ctypes.c_ssize_t, ctypes.c_int, ctypes.c_void_p]
        self.free.restype = None
current = None
def change_current_allocator(a):
    global current
    current = a
def _not_served(*args, **kwargs):
    raise RuntimeError("CUDAPluggableAllocator does not yet support getDeviceStats")
memory_stats = memory_allocated = max_memory_allocated = memory_reserved = _not_served
max_memory_reserved = reset_peak_memory_stats = memory_summary = _not_served
"""

# torch.cuda of the stand-in: the counters as PyTorch exports them there too,
# and the current device.
FAKE_TORCH_CUDA = """
from . import memory
from .memory import (memory_stats, memory_allocated, max_memory_allocated, memory_reserved,
                     max_memory_reserved, reset_peak_memory_stats, memory_summary)
def current_device():
    return 0
"""

FAKE_TORCH_INIT = """
from . import cuda
class device:
    def __init__(self, name):
        kind, _, index = name.partition(":")
        self.type, self.index = kind, int(index) if index else None
"""


class NoTorch(Child):
    def test_use_as_allocator_without_pytorch_says_so_in_one_line(self):
        r = self.result("""
            import cudapool.torch
            try:
                cudapool.torch.use_as_allocator()
                out(msg=None)
            except ImportError as e:
                out(msg=str(e))
        """, extra_env={"PYTHONNOUSERSITE": "1"})
        if r["msg"] is None:
            self.skipTest("PyTorch is installed here")
        self.assertIn("cudapool.torch needs PyTorch, which is not installed", r["msg"])
        self.assertNotIn("\n", r["msg"])


class Torch(Child):
    def setUp(self):
        import tempfile
        self.dir = tempfile.mkdtemp()
        pkg = os.path.join(self.dir, "torch")
        os.makedirs(os.path.join(pkg, "cuda"))
        with open(os.path.join(pkg, "__init__.py"), "w") as f:
            f.write(FAKE_TORCH_INIT)
        with open(os.path.join(pkg, "cuda", "__init__.py"), "w") as f:
            f.write(FAKE_TORCH_CUDA)
        with open(os.path.join(pkg, "cuda", "memory.py"), "w") as f:
            f.write(FAKE_TORCH)

    def tearDown(self):
        import shutil
        shutil.rmtree(self.dir)

    def test_library_path_refuses_a_cudapool_library_that_is_not_there(self):
        p = run_child("""
            import cudapool.torch
            try:
                out(found=cudapool.torch.library_path())
            except FileNotFoundError as e:
                out(error=str(e))
        """, preload=False, extra_env={"CUDAPOOL_LIB": "/nonexistent/libcudapool.so"})
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        line = [l for l in p.stdout.splitlines() if l.startswith("RESULT ")][0]
        r = json.loads(line[len("RESULT "):])
        self.assertEqual(r.get("error"), "CUDAPOOL_LIB=/nonexistent/libcudapool.so: no such file; point "
                         "it at libcudapool.so, or unset it to use the preloaded or the built one")

    def use(self, preload):
        code = """
            sys.path.insert(0, %r)
            import cudapool.torch, torch
            a = cudapool.torch.use_as_allocator(%r)
            assert torch.cuda.memory.current is a
            p = a.alloc(1 << 20, 0, None)
            a.free(p, 1 << 20, 0, None)
            q = a.alloc(1 << 20, 0, None)
            a.free(q, 1 << 20, 0, None)
            out(path=os.path.realpath(a.path), names=list(a.names), got=bool(p), same=p == q,
                calls=rt.fakecuda_calls(b"cudaMallocAsync"),
                found=os.path.realpath(cudapool.torch.library_path()) if %r else None)
        """ % (self.dir, LIB, preload)
        return self.result(code, preload=preload)

    def test_pluggable_without_the_preload(self):
        r = self.use(preload=False)
        self.assertEqual(r["path"], os.path.realpath(LIB))
        self.assertEqual(r["names"], ["cudapool_torch_alloc", "cudapool_torch_free"])
        self.assertTrue(r["got"])
        self.assertTrue(r["same"], "the block freed on the stream comes back at once")
        self.assertEqual(r["calls"], 0, "served by the pool, not the runtime's own cudaMallocAsync")

    def test_library_path_is_the_preloaded_one(self):
        r = self.use(preload=True)
        self.assertEqual(r["found"], os.path.realpath(LIB))
        self.assertTrue(r["same"])
        self.assertEqual(r["calls"], 0)

    def counters(self, preload):
        code = """
            sys.path.insert(0, %r)
            import cudapool.torch, torch
            a = cudapool.torch.use_as_allocator(%r)
            p = a.alloc(3 << 20, 0, None)
            q = a.alloc(1 << 20, 0, None)
            a.free(q, 1 << 20, 0, None)
            st = torch.cuda.memory_stats()
            got = dict(allocated=torch.cuda.memory_allocated(), peak=torch.cuda.max_memory_allocated(0),
                       reserved=torch.cuda.memory.memory_reserved("cuda:0"),
                       max_reserved=torch.cuda.max_memory_reserved(torch.device("cuda:0")),
                       stats_peak=st["allocated_bytes.all.peak"], stats_cur=st["allocated_bytes.all.current"],
                       blocks=st["allocation.all.current"], ooms=st["num_ooms"], sorted=list(st) == sorted(st),
                       summary="allocated_bytes.all.current" in torch.cuda.memory_summary())
            torch.cuda.reset_peak_memory_stats()
            got["peak_after_reset"] = torch.cuda.max_memory_allocated()
            lib = ctypes.CDLL(%r)
            from cudapool import _layout
            lists, _ = _layout.load(lib)
            S = _layout.make_struct(lists)
            s = S(); s.size = ctypes.sizeof(S); s.version = lists["version"]
            lib.cudapool_stats(0, ctypes.byref(s))
            got["own_allocated"], got["own_peak"] = s.allocated_bytes.current, s.allocated_bytes.peak
            got["own_reserved"] = s.reserved_bytes.current
            a.free(p, 3 << 20, 0, None)
            out(**got)
        """ % (self.dir, LIB, LIB)
        return self.result(code, preload=preload)

    def test_pytorch_counters_answer_from_cudapool_with_and_without_the_preload(self):
        for preload in (False, True):
            r = self.counters(preload)
            self.assertEqual(r["allocated"], 3 << 20, r)
            self.assertEqual(r["stats_cur"], 3 << 20, r)
            self.assertEqual(r["peak"], 4 << 20, r)
            self.assertEqual(r["stats_peak"], 4 << 20, r)
            self.assertEqual(r["blocks"], 1, r)
            self.assertEqual(r["ooms"], 0, r)
            self.assertTrue(r["sorted"], r)
            self.assertTrue(r["summary"], r)
            self.assertEqual(r["reserved"], r["own_reserved"], r)
            self.assertGreaterEqual(r["max_reserved"], r["reserved"], r)
            self.assertEqual(r["peak_after_reset"], 3 << 20, r)
            self.assertEqual(r["own_allocated"], 3 << 20, r)
            self.assertEqual(r["own_peak"], 3 << 20, r)

    def test_library_path_takes_cudapool_lib_without_the_preload(self):
        link = os.path.join(self.dir, "libcudapool.so")
        os.symlink(LIB, link)
        r = self.result("""
            import cudapool.torch
            out(found=cudapool.torch.library_path())
        """, preload=False, extra_env={"CUDAPOOL_LIB": link})
        self.assertEqual(r["found"], link)

    def test_the_deprecated_cudapool_library_still_works_with_one_warning(self):
        link = os.path.join(self.dir, "libcudapool.so")
        os.symlink(LIB, link)
        r = self.result("""
            import warnings
            import cudapool.torch
            with warnings.catch_warnings(record=True) as seen:
                warnings.simplefilter("always")
                found = cudapool.torch.library_path()
            out(found=found, warnings=[str(w.message) for w in seen])
        """, preload=False, extra_env={"CUDAPOOL_LIBRARY": link})
        self.assertEqual(r["found"], link)
        self.assertEqual(r["warnings"], ["CUDAPOOL_LIBRARY is deprecated: set CUDAPOOL_LIB, which the launcher "
                                         "reads too"])

    def test_cudapool_lib_wins_over_the_deprecated_name(self):
        link = os.path.join(self.dir, "libcudapool.so")
        os.symlink(LIB, link)
        r = self.result("""
            import cudapool.torch
            out(found=cudapool.torch.library_path())
        """, preload=False, extra_env={"CUDAPOOL_LIB": link, "CUDAPOOL_LIBRARY": "/nonexistent/x.so"})
        self.assertEqual(r["found"], link)

class CallSites(Child):
    """CUDAPOOL_STACKS in a Python program: allocations made through ctypes
    with the GIL held (PyDLL) name the Python line that made them."""

    CODE = """
        pg = ctypes.PyDLL(None)  # holds the GIL through the call, as a C extension does
        pg.cudaMalloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
        def held(n):
            p = ctypes.c_void_p()
            assert pg.cudaMalloc(ctypes.byref(p), n) == 0  # SITE held
            return p.value
        def load_weights():
            return held(4 << 20)
        def make_batch():
            return held(3 << 20)
        keep = [load_weights(), make_batch(), make_batch()]
        out(n=len(keep))
    """

    def test_sites_name_python_lines(self):
        d = tempfile.mkdtemp()
        report = os.path.join(d, "r.json")
        try:
            self.result(self.CODE, extra_env={"CUDAPOOL_STACKS": "1", "CUDAPOOL_STATS": report,
                                              "CUDAPOOL_STATS_FORMAT": "json"})
            with open(report) as f:
                rep = json.load(f)
        finally:
            if os.path.exists(report):
                os.remove(report)
            os.rmdir(d)
        source = (PRELUDE + textwrap.dedent(self.CODE)).splitlines()
        line = next(i + 1 for i, l in enumerate(source) if "# SITE held" in l)
        site = "<string>:%d:held" % line
        peak = rep["call_sites"]["at_peak"]
        # One innermost Python line for all three: one site, every byte.
        self.assertEqual([(s["site"], s["bytes"], s["blocks"]) for s in peak], [(site, 10 << 20, 3)], rep)
        pyframes = [f["python"] for f in peak[0]["frames"] if "python" in f]
        self.assertEqual(pyframes[0], site)
        self.assertTrue(pyframes[1] in ("<string>:%d:load_weights" % (line + 3),
                                        "<string>:%d:make_batch" % (line + 5)), pyframes)
        self.assertEqual(pyframes[-1].split(":")[2], "<module>", pyframes)
        self.assertEqual(rep["call_sites"]["at_exit"][0]["bytes"], 10 << 20)


class CallSitesWithoutGil(Child):
    """CUDAPOOL_STACKS in a Python program whose allocations go through
    ctypes.CDLL, which releases the GIL around the call as PyTorch's
    operators do: the thread's Python frames are read from memory, and the
    call sites at the peak are exactly the three Python lines."""

    CODE = """
        def load_weights():
            p = ctypes.c_void_p()
            assert g.cudaMalloc(ctypes.byref(p), 4 << 20) == 0  # SITE weights
            return p.value
        def make_batch():
            p = ctypes.c_void_p()
            assert g.cudaMalloc(ctypes.byref(p), 3 << 20) == 0  # SITE batch
            return p.value
        class Model:
            def activations(self):
                p = ctypes.c_void_p()
                assert g.cudaMalloc(ctypes.byref(p), 2 << 20) == 0  # SITE activations
                return p.value
        keep = [load_weights(), make_batch(), make_batch(), Model().activations()]  # SITE module
        out(n=len(keep))
    """

    def run_report(self, fmt):
        d = tempfile.mkdtemp()
        report = os.path.join(d, "report")
        try:
            self.result(self.CODE, extra_env={"CUDAPOOL_STACKS": "1", "CUDAPOOL_STATS": report,
                                              "CUDAPOOL_STATS_FORMAT": fmt})
            with open(report) as f:
                return f.read()
        finally:
            if os.path.exists(report):
                os.remove(report)
            os.rmdir(d)

    def site(self, tag, function):
        source = (PRELUDE + textwrap.dedent(self.CODE)).splitlines()
        return "<string>:%d:%s" % (next(i + 1 for i, l in enumerate(source) if "# SITE " + tag in l), function)

    def expected(self):
        return [(self.site("batch", "make_batch"), 6 << 20, 2), (self.site("weights", "load_weights"), 4 << 20, 1),
                (self.site("activations", "Model.activations" if sys.version_info >= (3, 11) else "activations"),
                 2 << 20, 1)]  # 3.10's code objects have no co_qualname

    def test_json_sites_at_the_peak_are_the_python_lines(self):
        rep = json.loads(self.run_report("json"))
        sites = rep["call_sites"]
        self.assertEqual([(s["site"], s["bytes"], s["blocks"]) for s in sites["at_peak"]], self.expected(), rep)
        for s in sites["at_peak"]:
            pyframes = [f["python"] for f in s["frames"] if "python" in f]
            self.assertEqual(pyframes, [s["site"], self.site("module", "<module>")], s)
        self.assertEqual([(s["site"], s["bytes"]) for s in sites["at_exit"]], [e[:2] for e in self.expected()])
        self.assertNotIn("python_without_gil", sites)  # this Python's frames are read

    def test_text_report_names_the_python_lines(self):
        text = self.run_report("text").splitlines()
        head = next(i for i, l in enumerate(text) if l.startswith("cudapool: call sites at the peak"))
        self.assertEqual(text[head], "cudapool: call sites at the peak of reserved memory (%d bytes):"
                         % int(text[head].split("(")[1].split()[0]))
        got = [(l.rsplit(" at ", 1)[1], int(l.split()[1]), int(l.split()[4])) for l in text[head + 1:head + 4]]
        self.assertEqual(got, self.expected(), "\n".join(text))


if __name__ == "__main__":
    unittest.main()
