"""The wheel (make wheel, scripts/make-wheel) as a user gets it: installed
with pip into a fresh venv, with no other step, `import cudapool`, the
`cudapool` command and `python -m cudapool -- PROGRAM` work, the launcher
inside it preloading the library inside it. PROGRAM runs on the fake CUDA
runtime (tests/programs/runtime/leak.c: its exit report names what it never
freed). Run by tests/python/run.

Its manylinux tag: `auditwheel show` must find the wheel consistent with the
tag in its name where auditwheel is installed (it is not on the project's
machines: see docs/USAGE.md, "The wheel"); everywhere, this file checks the
two rules of auditwheel's policy the tag rests on itself: every ELF file
needs only libraries of the manylinux whitelist, and no symbol version newer
than the tag's glibc."""

import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest
import zipfile

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
BUILD = os.environ.get("CUDAPOOL_TEST_BUILD") or os.path.join(ROOT, "build")


def version():
    text = open(os.path.join(ROOT, "include", "cudapool.h")).read()
    return ".".join(re.search(r"#define CUDAPOOL_VERSION_%s (\d+)" % k, text).group(1)
                    for k in ("MAJOR", "MINOR", "PATCH"))


def env_outside():
    """The caller's environment without cudapool's variables, PYTHONPATH (the
    venv must find the installed package, not the source tree) or a preload,
    plus the sanitizer runtimes a sanitized library needs first."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("CUDAPOOL_", "FAKECUDA_")) or k.startswith("CUDAPOOL_TEST_")}
    for k in ("LD_PRELOAD", "PYTHONPATH", "LD_LIBRARY_PATH"):
        env.pop(k, None)
    san = os.environ.get("CUDAPOOL_TEST_SAN_PRELOAD", "").split()
    if san:
        env["LD_PRELOAD"] = ":".join(san)
        env["ASAN_OPTIONS"] = "detect_leaks=0:" + env.get("ASAN_OPTIONS", "")
    return env


# auditwheel's manylinux whitelist (its policy/manylinux-policy.json, the
# same for every manylinux_2_N from 2_17 on, libmvec from 2_34) plus the
# dynamic linker, which every glibc system has where the tag says.
MANYLINUX_LIBS = {"libgcc_s.so.1", "libstdc++.so.6", "libm.so.6", "libdl.so.2", "librt.so.1", "libc.so.6",
                  "libnsl.so.1", "libutil.so.1", "libpthread.so.0", "libresolv.so.2", "libX11.so.6",
                  "libXext.so.6", "libXrender.so.1", "libICE.so.6", "libSM.so.6", "libGL.so.1",
                  "libgobject-2.0.so.0", "libgthread-2.0.so.0", "libglib-2.0.so.0", "libanl.so.1",
                  "libatomic.so.1", "libexpat.so.1", "libz.so.1"}
DYNAMIC_LINKERS = {"ld-linux-x86-64.so.2", "ld-linux-aarch64.so.1"}


def tag_glibc(wheel):
    """N of the wheel name's manylinux_2_N."""
    return int(re.search(r"-manylinux_2_(\d+)_[a-z0-9_]+\.whl$", wheel).group(1))


def auditwheel_command():
    """How to run auditwheel here, or None."""
    if shutil.which("auditwheel"):
        return ["auditwheel"]
    for py in (sys.executable, "/usr/bin/python3"):
        if os.path.exists(py) and subprocess.run([py, "-c", "import auditwheel.main"], stdout=subprocess.DEVNULL,
                                                 stderr=subprocess.DEVNULL).returncode == 0:
            return [py, "-m", "auditwheel"]
    return None


class Wheel(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        wheels = glob.glob(os.path.join(BUILD, "dist", "cudapool-*.whl"))
        if len(wheels) != 1:
            raise unittest.SkipTest("want one wheel in %s/dist (make wheel), found %d" % (BUILD, len(wheels)))
        cls.wheel = wheels[0]
        cls.dir = tempfile.mkdtemp(prefix="cp-wheel-")
        venv = os.path.join(cls.dir, "venv")
        subprocess.run([sys.executable, "-m", "venv", venv], check=True, env=env_outside())
        cls.py = os.path.join(venv, "bin", "python")
        cls.bin = os.path.join(venv, "bin")
        p = subprocess.run([cls.py, "-m", "pip", "install", "--no-index", "--no-deps", "-q",
                            "--disable-pip-version-check", cls.wheel],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
                           env=env_outside(), cwd=cls.dir)
        if p.returncode != 0:
            shutil.rmtree(cls.dir, ignore_errors=True)
            raise AssertionError("pip install failed:\n" + p.stdout)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def run_in_venv(self, args, extra_env=None):
        env = env_outside()
        env.update(extra_env or {})
        return subprocess.run(args, env=env, cwd=self.dir, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              universal_newlines=True, timeout=120)

    def test_name_says_the_platform_and_the_glibc_floor(self):
        name = os.path.basename(self.wheel)
        self.assertRegex(name, r"^cudapool-%s-py3-none-manylinux_2_\d+_[a-z0-9_]+\.whl$" % re.escape(version()))

    def elf_files(self, into):
        """The wheel's ELF files, extracted under into: {arcname: path}."""
        out = {}
        with zipfile.ZipFile(self.wheel) as z:
            for name in z.namelist():
                with z.open(name) as f:
                    if f.read(4) != b"\x7fELF":
                        continue
                out[name] = z.extract(name, into)
        return out

    def test_binaries_need_only_manylinux_libraries_and_the_tags_glibc(self):
        if os.environ.get("CUDAPOOL_TEST_SAN_PRELOAD", "").strip():
            self.skipTest("a sanitizer build: its binaries need the sanitizer runtimes, which no released "
                          "wheel carries")
        floor = tag_glibc(self.wheel)
        with tempfile.TemporaryDirectory(prefix="cp-wheel-elf-") as tmp:
            elves = self.elf_files(tmp)
            self.assertEqual(sorted(elves), ["cudapool/bin/cudapool-replay", "cudapool/bin/cudapool-stats",
                                             "cudapool/lib/libcudapool.so"])
            newest = 0
            for name, path in sorted(elves.items()):
                dyn = subprocess.run(["readelf", "-d", path], stdout=subprocess.PIPE, universal_newlines=True,
                                     check=True).stdout
                needed = set(re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", dyn))
                self.assertIn("libc.so.6", needed, name)
                self.assertEqual(needed - MANYLINUX_LIBS - DYNAMIC_LINKERS, set(),
                                 "%s needs libraries outside the manylinux whitelist" % name)
                syms = subprocess.run(["objdump", "-T", path], stdout=subprocess.PIPE, universal_newlines=True,
                                      check=True).stdout
                versions = set(re.findall(r"\s\(?([A-Z][A-Z_]*_[0-9][0-9.]*|GLIBC_PRIVATE)\)?\s", syms))
                others = {v for v in versions if not re.match(r"GLIBC_2\.\d+(\.\d+)?$", v)}
                self.assertEqual(others, set(), "%s: symbol versions this check does not know" % name)
                for v in versions:
                    minor = int(v.split(".")[1])
                    self.assertLessEqual(minor, floor, "%s needs %s, newer than the tag's glibc 2.%d"
                                         % (name, v, floor))
                    newest = max(newest, minor)
            self.assertEqual(floor, max(17, newest), "the tag is not the newest glibc the binaries need "
                             "(manylinux2014's 2.17 at least)")

    def test_auditwheel_show_finds_the_tag_of_its_name(self):
        cmd = auditwheel_command()
        if cmd is None:
            self.skipTest("auditwheel is not installed (not packaged by Debian; see docs/USAGE.md)")
        p = subprocess.run(cmd + ["show", self.wheel], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           universal_newlines=True, timeout=120)
        self.assertEqual(p.returncode, 0, p.stdout)
        tag = re.search(r"-(manylinux_2_\d+_[a-z0-9_]+)\.whl$", self.wheel).group(1)
        said = " ".join(p.stdout.split())
        self.assertIn('is consistent with the following platform tag: "%s"' % tag, said, p.stdout)

    def test_record_lists_every_file_with_its_hash(self):
        with zipfile.ZipFile(self.wheel) as z:
            names = set(z.namelist())
            record = z.read("cudapool-%s.dist-info/RECORD" % version()).decode()
        listed = {line.split(",")[0] for line in record.splitlines() if line}
        self.assertEqual(listed, names)
        for name in ("cudapool/lib/libcudapool.so", "cudapool/bin/cudapool", "cudapool/bin/cudapool-replay",
                     "cudapool/bin/cudapool-stats", "cudapool/__init__.py"):
            self.assertIn(name, names)

    def test_import_finds_the_installed_package(self):
        p = self.run_in_venv([self.py, "-c", "import cudapool, os; print(cudapool.__version__, "
                                             "os.path.dirname(cudapool.__file__))"])
        self.assertEqual(p.returncode, 0, p.stderr)
        ver, where = p.stdout.split()
        self.assertEqual(ver, version())
        self.assertTrue(where.startswith(self.dir), where)

    def test_console_command_and_python_m_print_the_packaged_librarys_version(self):
        for args in ([os.path.join(self.bin, "cudapool"), "--version"], [self.py, "-m", "cudapool", "--version"]):
            p = self.run_in_venv(args)
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            self.assertIn(version(), p.stdout + p.stderr)

    def test_python_m_cudapool_runs_a_program_under_the_packaged_library(self):
        prog = os.path.join(BUILD, "progs", "leak")
        p = self.run_in_venv([self.py, "-m", "cudapool", "--stats", "--", prog],
                             {"LD_LIBRARY_PATH": os.path.join(BUILD, "fakecudart")})
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn("leak: errors=0", p.stdout)
        self.assertIn("cudapool: device 0: 2 blocks, 2.00 MiB still allocated at exit", p.stderr)

    def test_the_library_preloaded_is_the_one_inside_the_package(self):
        p = self.run_in_venv([self.py, "-m", "cudapool", "--", "sh", "-c", 'echo "preload=$LD_PRELOAD"'])
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        preload = p.stdout.strip().split("=", 1)[1].split(":")
        packaged = [x for x in preload if x.endswith("libcudapool.so")]
        self.assertEqual(len(packaged), 1, p.stdout)
        self.assertTrue(os.path.realpath(packaged[0]).startswith(os.path.realpath(self.dir)), p.stdout)
        self.assertTrue(packaged[0].endswith(os.path.join("cudapool", "lib", "libcudapool.so")), p.stdout)


if __name__ == "__main__":
    unittest.main()
