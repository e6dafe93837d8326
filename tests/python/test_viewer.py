"""Tests of cudapool view and cudapool export (scripts/cudapool-view,
scripts/cudapool-export, scripts/cpviz) on small hand-made traces and
snapshots: exact totals, exact exports, the page's self-containment, and the
one-line errors (exit status 2) for malformed inputs. Run through the
launcher, as a user would. Run by tests/python/run."""

import gzip
import json
import os
import pickle
import re
import subprocess
import sys
import tempfile
import unittest
import zlib

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
LAUNCHER = os.path.join(ROOT, "scripts", "cudapool")
sys.path.insert(0, os.path.join(ROOT, "scripts"))

from cpviz import inputs  # noqa: E402

TRACE = """Thread,Time,Action,Pointer,Size,Stream
1,10.000000000,segment_alloc,0x1000000,4194304,(nil)
1,10.001000000,allocate,0x1000000,1048576,(nil)
1,10.002000000,allocate,0x1100000,2097152,(nil)
1,10.003000000,sync_stream,(nil),0,(nil)
1,10.004000000,free,0x1000000,1048576,(nil)
1,10.005000000,allocate,0x1300000,65536,0x10
1,10.006000000,free,0x1100000,0,(nil)
"""

SNAPSHOT = {
    "version": 1, "pid": 4242, "reason": "oom", "time_s": 3.5,
    "stacks": [{"id": 7, "frames": [{"python": "train.py:41:forward"},
                                    {"pc": "0x4011d6", "object": "libtorch.so", "symbol": "alloc",
                                     "offset": 22}]}],
    "devices": [{"device": 0,
                 "totals": {"allocated": 3145728, "reserved": 8388608, "cached": 5242880, "pending": 1048576},
                 "segments": [{"address": "0x7f0000000000", "size": 8388608, "stream": 0, "expandable": False,
                               "blocks": [
                                   {"address": "0x7f0000000000", "size": 2097152, "requested": 2000000,
                                    "state": "allocated", "stream": 0, "stack": 7},
                                   {"address": "0x7f0000200000", "size": 1048576, "requested": 1048576,
                                    "state": "free", "stream": 0, "stack": None},
                                   {"address": "0x7f0000300000", "size": 1048576, "requested": 1000,
                                    "state": "allocated", "stream": 0, "stack": None},
                                   {"address": "0x7f0000400000", "size": 1048576, "requested": 1048576,
                                    "state": "pending", "stream": 5, "stack": 7},
                                   {"address": "0x7f0000500000", "size": 3145728, "requested": 3145728,
                                    "state": "free", "stream": 0, "stack": None}]}]}]}


def run(*args):
    p = subprocess.run([LAUNCHER] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True, timeout=120)
    return p.returncode, p.stdout, p.stderr


class Files(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)

    def path(self, name):
        return os.path.join(self.tmp.name, name)

    def write(self, name, text):
        with open(self.path(name), "w") as f:
            f.write(text)
        return self.path(name)

    def snapshot(self, doc):
        return self.write("snap.json", json.dumps(doc))


class View(Files):
    def test_totals_at_each_moment_are_exact(self):
        src = self.write("t.csv", TRACE)
        rc, out, err = run("view", src, "--at", "0.0025")
        self.assertEqual((rc, err), (0, ""))
        self.assertEqual(out, "moment 2 at 0.002000000 s: allocated 3145728, reserved 4194304, live blocks 2\n"
                              "  0x1100000 2097152 allocated unknown site, 1 - 16 MiB\n"
                              "  0x1000000 1048576 allocated unknown site, 1 - 16 MiB\n")
        rc, out, _ = run("view", src, "--at", "0.005")
        self.assertEqual(out, "moment 4 at 0.005000000 s: allocated 2162688, reserved 4194304, live blocks 2\n"
                              "  0x1100000 2097152 allocated unknown site, 1 - 16 MiB\n"
                              "  0x1300000 65536 allocated unknown site, 64 KiB - 1 MiB\n")
        rc, out, _ = run("view", src, "--at", "99")
        self.assertEqual(out, "moment 5 at 0.006000000 s: allocated 65536, reserved 4194304, live blocks 1\n"
                              "  0x1300000 65536 allocated unknown site, 64 KiB - 1 MiB\n")

    def page(self, src):
        out = self.path("mem.html")
        rc, _, err = run("view", src, "-o", out)
        self.assertEqual(rc, 0, err)
        with open(out) as f:
            return f.read()

    @staticmethod
    def data(html):
        m = re.search(r'<script type="application/json" id="cpdata">(.*?)</script>', html, re.S)
        return json.loads(m.group(1))

    def test_page_loads_nothing_from_outside(self):
        html = self.page(self.write("t.csv", TRACE))
        csp = re.findall(r'<meta http-equiv="Content-Security-Policy" content="([^"]*)">', html)
        self.assertEqual(len(csp), 1)
        self.assertTrue(csp[0].startswith("default-src 'none'; script-src 'sha256-"), csp[0])
        self.assertIn("connect-src 'none'", csp[0])
        rest = html.replace(csp[0], "")
        self.assertEqual(re.findall(r"https?:", rest, re.I), [])
        self.assertNotIn(" src=", rest)
        self.assertNotIn("<link", rest)

    def test_page_data_holds_the_trace_exactly(self):
        d = self.data(self.page(self.write("t.csv", TRACE)))
        self.assertEqual(d["kind"], "trace")
        self.assertEqual(d["events"]["dt"], [0, 1000000, 1000000, 2000000, 1000000, 1000000])
        self.assertEqual(d["blocks"]["addr"], [0x1000000, 0x100000, 0x200000])
        self.assertEqual(d["blocks"]["size"], [1048576, 2097152, 65536])
        self.assertEqual((d["blocks"]["req"], d["blocks"]["state"]), (None, None))
        self.assertEqual(d["blocks"]["a"], [1, 1, 2])
        self.assertEqual(d["blocks"]["life"], [2, 3, 2])
        self.assertEqual(d["segments"], {"addr": [0x1000000], "size": [4194304], "a": [0], "f": [6]})
        self.assertEqual(d["series"], ["unknown site, 1 - 16 MiB", "unknown site, 64 KiB - 1 MiB"])
        self.assertEqual(d["peak"], 2)
        ov = d["overview"]
        peak_point = ov["i"].index(2)
        self.assertEqual([s[peak_point] for s in ov["series"]], [3145728, 0])
        self.assertEqual(max(ov["reserved"]), 4194304)

    def test_stack_in_a_trace_is_not_markup(self):
        trace = TRACE.replace("Stream\n", "Stream,Site\n").replace(
            "0x1100000,2097152,(nil)", "0x1100000,2097152,(nil),</script><b>x")
        d_html = self.page(self.write("t.csv", trace))
        self.assertNotIn("</script><b>", d_html)
        d = self.data(d_html)
        self.assertIn("site </script><b>x", d["series"])

    def test_call_site_column_groups_by_site(self):
        trace = TRACE.replace("Stream\n", "Stream,Site\n").replace(
            "0x1000000,1048576,(nil)\n1,10.002", "0x1000000,1048576,(nil),A\n1,10.002").replace(
            "0x1100000,2097152,(nil)", "0x1100000,2097152,(nil),B")
        rc, out, err = run("view", self.write("t.csv", trace), "--at", "0.002")
        self.assertEqual((rc, err), (0, ""))
        self.assertEqual(out, "moment 2 at 0.002000000 s: allocated 3145728, reserved 4194304, live blocks 2\n"
                              "  0x1100000 2097152 allocated site B\n"
                              "  0x1000000 1048576 allocated site A\n")

    def stack_trace(self):
        """As cudapool records with CUDAPOOL_STACKS: ids in the Stack column,
        the table beside the trace; stacks 0 and 1 are two paths to one site."""
        trace = TRACE.replace("Stream\n", "Stream,Stack\n").replace("(nil)\n", "(nil),\n").replace(
            "0x1000000,1048576,(nil),\n1,10.002", "0x1000000,1048576,(nil),0\n1,10.002").replace(
            "0x1100000,2097152,(nil),", "0x1100000,2097152,(nil),1").replace(
            "0x1300000,65536,0x10", "0x1300000,65536,0x10,2")
        src = self.write("t.csv", trace)
        lib = {"pc": "0x7f00000010", "object": "libcudart.so.13", "symbol": "cudaMalloc", "offset": 16}

        def own(pc, symbol, offset):
            return {"pc": pc, "object": "prog", "symbol": symbol, "offset": offset}
        table = {"version": 1, "stacks": [
            {"id": 0, "frames": [lib, own("0x401010", "alloc_act", 16), own("0x402020", "main", 32)]},
            {"id": 1, "frames": [lib, own("0x401010", "alloc_act", 16), own("0x402040", "main", 64)]},
            {"id": 2, "frames": [lib, {"python": "train.py:7:step"}, own("0x401110", "alloc_w", 16)]}]}
        with open(src + ".stacks.json", "w") as f:
            json.dump(table, f)
        return src

    def test_stacks_table_beside_a_trace_names_and_merges_the_sites(self):
        src = self.stack_trace()
        rc, out, err = run("view", src, "--at", "0.005")
        self.assertEqual((rc, err), (0, ""))
        self.assertEqual(out, "moment 4 at 0.005000000 s: allocated 2162688, reserved 4194304, live blocks 2\n"
                              "  0x1100000 2097152 allocated site: alloc_act+16 (prog)\n"
                              "  0x1300000 65536 allocated site: train.py:7:step\n")
        d = self.data(self.page(src))
        self.assertEqual(d["series"], ["site: alloc_act+16 (prog)", "site: train.py:7:step"])
        self.assertEqual(d["sites"][0]["frames"], ["cudaMalloc+16 (libcudart.so.13) 0x7f00000010",
                                                   "alloc_act+16 (prog) 0x401010", "main+32 (prog) 0x402020"])

    def test_a_trace_with_stack_ids_and_no_table_groups_by_id(self):
        src = self.stack_trace()
        os.remove(src + ".stacks.json")
        rc, out, err = run("view", src, "--at", "0.002")
        self.assertEqual((rc, err), (0, ""))
        self.assertEqual(out, "moment 2 at 0.002000000 s: allocated 3145728, reserved 4194304, live blocks 2\n"
                              "  0x1100000 2097152 allocated site 1\n"
                              "  0x1000000 1048576 allocated site 0\n")

    def test_trace_without_segments_has_no_reserved(self):
        trace = TRACE.replace("1,10.000000000,segment_alloc,0x1000000,4194304,(nil)\n", "")
        rc, out, _ = run("view", self.write("t.csv", trace), "--at", "0.0015")
        self.assertEqual(out.splitlines()[0], "moment 1 at 0.001000000 s: allocated 3145728, reserved -, live blocks 2")
        d = self.data(self.page(self.path("t.csv")))
        self.assertEqual((d["hasSegments"], d["segments"]["size"]), (False, []))

    def test_gzip_trace_reads_as_plain(self):
        src = self.path("t.csv.gz")
        with gzip.open(src, "wt") as f:
            f.write(TRACE)
        rc, out, _ = run("view", src, "--at", "0.0025")
        self.assertEqual(out.splitlines()[0],
                         "moment 2 at 0.002000000 s: allocated 3145728, reserved 4194304, live blocks 2")

    def test_gzip_cut_short_uses_the_lines_before_the_cut(self):
        # As a kill -9 leaves it: sync-flushed chunks, no gzip trailer.
        c = zlib.compressobj(1, zlib.DEFLATED, 31)
        data = c.compress(TRACE.encode()) + c.flush(zlib.Z_SYNC_FLUSH)
        more = "".join("1,11.%09d,allocate,0x%x,4096,(nil)\n" % (k, 0x8000000 + k * 4096) for k in range(3000))
        data += c.compress(more.encode()) + c.flush(zlib.Z_SYNC_FLUSH)
        src = self.path("cut.csv.gz")
        with open(src, "wb") as f:
            f.write(data[:len(data) - 3000])
        rc, out, err = run("view", src, "--at", "0.0025")
        self.assertEqual(rc, 0)
        self.assertEqual(err, "cudapool view: %s: bad gzip data (Compressed file ended before the end-of-stream "
                              "marker was reached): the lines before it are used\n" % src)
        self.assertEqual(out.splitlines()[0],
                         "moment 2 at 0.002000000 s: allocated 3145728, reserved 4194304, live blocks 2")

    def test_a_lost_free_ends_the_block_at_the_next_allocate(self):
        trace = TRACE.replace("1,10.004000000,free,0x1000000,1048576,(nil)\n",
                              "1,10.004000000,allocate,0x1000000,4096,(nil)\n")
        rec = inputs.load(self.write("t.csv", trace))
        self.assertEqual(rec.totals(rec.moment_at(4500000)), (2097152 + 4096, 4194304))
        self.assertEqual(rec.totals(rec.n_events - 1), (4096 + 65536, 4194304))

    def test_snapshot_is_one_moment(self):
        src = self.snapshot(SNAPSHOT)
        rc, out, err = run("view", src, "--at", "0")
        self.assertEqual((rc, err), (0, ""))
        self.assertEqual(out, "moment 0 at 0.000000000 s: allocated 4194304, reserved 8388608, live blocks 3\n"
                              "  0x7f0000000000 2097152 allocated site: train.py:41:forward\n"
                              "  0x7f0000300000 1048576 allocated unknown site\n"
                              "  0x7f0000400000 1048576 pending site: train.py:41:forward\n")
        d = self.data(self.page(src))
        self.assertEqual(d["kind"], "snapshot")
        self.assertEqual(d["blocks"]["state"], [0, 0, 1])
        self.assertEqual(d["blocks"]["req"], [2000000, 1000, 1048576])
        self.assertEqual(d["sites"][0]["frames"], ["train.py:41:forward", "alloc+22 (libtorch.so) 0x4011d6"])


class Malformed(Files):
    def assert_refused(self, src, message, tool="view", out=("-o", "x.html")):
        rc, stdout, err = run(tool, src, *out)
        self.assertEqual((rc, stdout), (2, ""))
        self.assertEqual(err, "cudapool %s: %s\n" % (tool, message))

    def test_bad_header(self):
        src = self.write("t.csv", "time,size\n1,2\n")
        self.assert_refused(src, "%s:1: not a trace: the header must be Thread,Time,Action,Pointer,Size,Stream "
                                 "(and optionally a call-site column)" % src)

    def test_bad_line(self):
        src = self.write("t.csv", TRACE.replace("0x1100000,2097152", "0x1100000,2MiB"))
        self.assert_refused(src, "%s:4: bad trace line (Time, Pointer, Size or Stream does not parse): "
                                 "'1,10.002000000,allocate,0x1100000,2MiB,(nil)'" % src)
        self.assert_refused(src, "%s:4: bad trace line (Time, Pointer, Size or Stream does not parse): "
                                 "'1,10.002000000,allocate,0x1100000,2MiB,(nil)'" % src,
                            tool="export", out=("--perfetto", self.path("p.json")))

    def test_short_line(self):
        src = self.write("t.csv", TRACE + "1,10.007,free\n")
        self.assert_refused(src, "%s:9: bad trace line (expected Thread,Time,Action,Pointer,Size,Stream): "
                                 "'1,10.007,free'" % src)

    def test_empty_and_missing_files(self):
        src = self.write("t.csv", "")
        self.assert_refused(src, "%s: empty file: neither a trace nor a snapshot" % src)
        missing = self.path("nope.csv")
        self.assert_refused(missing, "%s: cannot read: No such file or directory" % missing)

    def test_snapshot_not_json(self):
        src = self.write("s.json", '{"version": 1,')
        self.assert_refused(src, "%s: bad snapshot: not JSON (Expecting property name enclosed in double "
                                 "quotes: line 1 column 15 (char 14))" % src)

    def test_snapshot_missing_field_is_named_by_path(self):
        doc = json.loads(json.dumps(SNAPSHOT))
        del doc["devices"][0]["segments"][0]["blocks"][2]["size"]
        src = self.snapshot(doc)
        self.assert_refused(src, "%s: bad snapshot: devices[0].segments[0].blocks[2]: missing \"size\"" % src)

    def test_snapshot_wrong_types_and_values(self):
        cases = [
            (("version",), 2, "version: cannot read version 2 (this viewer reads version 1)"),
            (("reason",), "crash", "reason: expected one of oom/signal/exit/request, got 'crash'"),
            (("devices", 0, "segments", 0, "address"), "7f00", "devices[0].segments[0].address: expected a hex "
             "address like \"0x7f0000000000\", got '7f00'"),
            (("devices", 0, "segments", 0, "blocks", 0, "state"), "busy",
             "devices[0].segments[0].blocks[0].state: expected one of allocated/free/pending, got 'busy'"),
            (("devices", 0, "segments", 0, "blocks", 0, "stack"), 9,
             "devices[0].segments[0].blocks[0].stack: stack 9 is not in \"stacks\""),
            (("devices", 0, "segments", 0, "expandable"), 1,
             "devices[0].segments[0].expandable: expected true or false, got 1"),
            (("devices", 0, "totals", "allocated"), True,
             "devices[0].totals.allocated: expected an integer, got true"),
        ]
        for path, value, message in cases:
            with self.subTest(path=path):
                doc = json.loads(json.dumps(SNAPSHOT))
                node = doc
                for k in path[:-1]:
                    node = node[k]
                node[path[-1]] = value
                src = self.snapshot(doc)
                self.assert_refused(src, "%s: bad snapshot: %s" % (src, message))

    def test_usage_errors(self):
        rc, _, err = run("view")
        self.assertEqual((rc, err.splitlines()[0]), (2, "cudapool view: no trace or snapshot named"))
        rc, _, err = run("export", self.write("t.csv", TRACE))
        self.assertEqual((rc, err.splitlines()[0]),
                         (2, "cudapool export: say what to write (--memory-viz FILE.pickle, --perfetto FILE.json)"))


class MalformedStacksTable(Files):
    def test_a_malformed_stacks_table_is_one_line_naming_it(self):
        src = self.write("t.csv", TRACE.replace("Stream\n", "Stream,Stack\n").replace(
            "0x1000000,1048576,(nil)\n1,10.002", "0x1000000,1048576,(nil),0\n1,10.002"))
        with open(src + ".stacks.json", "w") as f:
            f.write('{"version":1,"stacks":[{"id":"zero","frames":[]}]}')
        rc, out, err = run("view", src, "-o", self.path("v.html"))
        self.assertEqual((rc, out), (2, ""))
        self.assertEqual(err, "cudapool view: %s.stacks.json: bad stacks table: stacks[0].id: expected an integer\n"
                         % src)


class Export(Files):
    def test_memory_viz_pickle_is_pytorchs_layout(self):
        out = self.path("s.pickle")
        rc, _, err = run("export", self.write("t.csv", TRACE), "--memory-viz", out)
        self.assertEqual((rc, err), (0, ""))
        with open(out, "rb") as f:
            snap = pickle.load(f)

        def ev(action, addr, size, us, stream=0):
            return {"action": action, "addr": addr, "size": size, "stream": stream, "time_us": us, "frames": []}
        self.assertEqual(snap["device_traces"], [[
            ev("segment_alloc", 0x1000000, 4194304, 0.0),
            ev("alloc", 0x1000000, 1048576, 1000.0),
            ev("alloc", 0x1100000, 2097152, 2000.0),
            ev("free_requested", 0x1000000, 1048576, 4000.0),
            ev("free_completed", 0x1000000, 1048576, 4000.0),
            ev("alloc", 0x1300000, 65536, 5000.0, stream=16),
            ev("free_requested", 0x1100000, 2097152, 6000.0),
            ev("free_completed", 0x1100000, 2097152, 6000.0)]])
        self.assertEqual(snap["segments"], [{
            "device": 0, "address": 0x1000000, "total_size": 4194304, "allocated_size": 65536,
            "active_size": 65536, "requested_size": 65536, "stream": 0, "segment_type": "large",
            "segment_pool_id": (0, 0), "is_expandable": False, "frames": [],
            "blocks": [
                {"address": 0x1000000, "size": 3145728, "requested_size": 0, "state": "inactive", "frames": []},
                {"address": 0x1300000, "size": 65536, "requested_size": 65536, "state": "active_allocated",
                 "frames": []},
                {"address": 0x1310000, "size": 983040, "requested_size": 0, "state": "inactive", "frames": []}]}])

    def test_memory_viz_of_a_snapshot_keeps_frames_and_pending(self):
        out = self.path("s.pickle")
        rc, _, err = run("export", self.snapshot(SNAPSHOT), "--memory-viz=" + out)
        self.assertEqual((rc, err), (0, ""))
        with open(out, "rb") as f:
            snap = pickle.load(f)
        self.assertEqual(snap["device_traces"], [[]])
        (seg,) = snap["segments"]
        self.assertEqual((seg["total_size"], seg["allocated_size"], seg["active_size"], seg["requested_size"]),
                         (8388608, 3145728, 4194304, 2001000))
        frames = [{"filename": "train.py", "line": 41, "name": "forward"},
                  {"filename": "??", "line": 0, "name": "alloc+22 (libtorch.so) 0x4011d6"}]
        self.assertEqual([(b["address"] - 0x7f0000000000, b["size"], b["state"], b["frames"]) for b in seg["blocks"]],
                         [(0, 2097152, "active_allocated", frames),
                          (0x200000, 1048576, "inactive", []),
                          (0x300000, 1048576, "active_allocated", []),
                          (0x400000, 1048576, "active_pending_free", frames),
                          (0x500000, 3145728, "inactive", [])])

    def test_perfetto_counters(self):
        out = self.path("p.json")
        rc, _, err = run("export", self.write("t.csv", TRACE), "--perfetto", out)
        self.assertEqual((rc, err), (0, ""))
        with open(out) as f:
            doc = json.load(f)
        counters = [(e["ts"], e["args"]["allocated"], e["args"]["reserved"])
                    for e in doc["traceEvents"] if e["ph"] == "C"]
        self.assertEqual(counters, [(0.0, 0, 4194304), (1000.0, 1048576, 4194304), (2000.0, 3145728, 4194304),
                                    (4000.0, 2097152, 4194304), (5000.0, 2162688, 4194304),
                                    (6000.0, 65536, 4194304)])
        self.assertEqual(doc["traceEvents"][0]["ph"], "M")


if __name__ == "__main__":
    unittest.main()
