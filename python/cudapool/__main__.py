"""python -m cudapool [launcher options] [--] PROGRAM [ARGS...]

Execs the cudapool launcher (scripts/cudapool, installed as bin/cudapool)
with the same arguments, so that every flag, its check and its exit status
are the launcher's own: the launcher checks each value by the library's
grammar (tests/unit/shim/launcher_values.c holds the two together), and a
second copy here could drift from both. The launcher also finds
libcudapool.so (CUDAPOOL_LIB, else next to itself) and keeps sanitizer
runtimes first in LD_PRELOAD.

The launcher is looked for in $CUDAPOOL_LAUNCHER, then inside this package
(an installed wheel: cudapool/bin/cudapool, whose library is
cudapool/lib/libcudapool.so), then in the source tree this package is in
(python/cudapool/ -> scripts/cudapool), then on PATH.
Without one: exit status 127 and what to do.
"""

import os
import shutil
import sys


def find_launcher():
    env = os.environ.get("CUDAPOOL_LAUNCHER")
    if env:
        return env if os.access(env, os.X_OK) else None
    here = os.path.dirname(os.path.abspath(__file__))
    for src in (os.path.join(here, "bin", "cudapool"),
                os.path.normpath(os.path.join(here, "..", "..", "scripts", "cudapool"))):
        if os.path.isfile(src) and os.access(src, os.X_OK):
            return src
    return shutil.which("cudapool")


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    launcher = find_launcher()
    if launcher is None:
        sys.stderr.write(
            "python -m cudapool: cannot find the cudapool launcher (looked in $CUDAPOOL_LAUNCHER, "
            "in the source tree next to this package and on PATH); install it with "
            "`make install PREFIX=...` and put PREFIX/bin on PATH, or run the program as "
            "LD_PRELOAD=/path/to/libcudapool.so PROGRAM\n")
        return 127
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(launcher, [launcher] + list(argv))


if __name__ == "__main__":
    sys.exit(main())
