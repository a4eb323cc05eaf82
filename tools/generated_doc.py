"""The write-or-check step shared by the scripts that generate a doc (gen_ops_md.py, compat_report.py)."""
import os
import sys


def write_or_check(path, text, command, check):
    """With `check`: 0 if `path` holds `text`, else 1 with a line naming `command` on stderr.
    Otherwise write `text` to `path` (creating its folder) and return 0."""
    if check:
        try:
            with open(path) as f:
                current = f.read()
        except FileNotFoundError:
            current = None
        if current != text:
            print("%s is out of date: run %s" % (path, command), file=sys.stderr)
            return 1
        return 0
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)
    return 0
