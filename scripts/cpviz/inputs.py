"""Opens what the user named (a trace, plain or .gz, or a snapshot JSON) and
hands it to the right reader; says which one by the content, not the name.
Every failure to read is an InputError with one line for the user."""
import gzip
import io

from . import snapshot, trace
from .recording import InputError


def load(path):
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
            lines = _chain(first, text)
            return trace.read(path, lines)
    except (OSError, EOFError) as e:
        raise InputError("%s: cannot read: %s" % (path, getattr(e, "strerror", None) or e)) from None


def _chain(first, text):
    line = first + text.readline()
    yield line
    yield from text
