"""The wheel (make wheel, scripts/make-wheel) as a user gets it: installed
with pip into a fresh venv, with no other step, `import cudapool`, the
`cudapool` command and `python -m cudapool -- PROGRAM` work, the launcher
inside it preloading the library inside it. PROGRAM runs on the fake CUDA
runtime (tests/programs/runtime/leak.c: its exit report names what it never
freed). Run by tests/python/run."""

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
