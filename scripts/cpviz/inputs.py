"""Opens what the user named (a trace, plain or .gz, or a snapshot JSON) and
hands it to the right reader; says which one by the content, not the name.
Every failure to read is an InputError with one line for the user, except a
gzip'd trace cut short (the recorder killed with -9 leaves no gzip trailer;
docs/REPLAY.md): its whole lines are used, and `warnings` says so once."""
import gzip
import io
import zlib

from . import snapshot, trace
from .recording import InputError


def load(path, warnings=None):
    """warnings: a list that gets the one-line notes that are not errors."""
    if warnings is None:
        warnings = []
    try:
        with open(path, "rb") as f:
            head = f.read(2)
        raw = gzip.open(path, "rb") if head == b"\x1f\x8b" else open(path, "rb")
        with raw:
            text = io.TextIOWrapper(raw, encoding="utf-8", errors="replace", newline="")
            first = text.read(1)
            while first and first in " \t\r\n":
                first = text.read(1)
            if first == "{":
                return snapshot.read(path, first + text.read())
            if not first:
                raise InputError("%s: empty file: neither a trace nor a snapshot" % path)
            lines = _chain(first, text, path, warnings)
            return trace.read(path, lines)
    except (OSError, EOFError) as e:
        raise InputError("%s: cannot read: %s" % (path, getattr(e, "strerror", None) or e)) from None


def _chain(first, text, path, warnings):
    try:
        yield first + text.readline()
        yield from text
    except (EOFError, OSError, zlib.error) as e:
        # The recorder writes whole lines (sync flushes): what came before
        # the cut is whole.
        warnings.append("%s: bad gzip data (%s): the lines before it are used" % (path, e))
