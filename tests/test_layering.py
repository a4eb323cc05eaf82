"""Layering: the core (csrc/) never includes a header from the op library (kernels/).

Kernels may include csrc headers; csrc may not include kernels. setup.py puts only csrc/ on the include
path, so a kernel reaches its helpers relative to its own file ("helpers/x.h" from kernels/, "x.h" from
kernels/helpers/); this test also catches a csrc include that would need kernels/ on the path.
"""
import os
import re


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SOURCE_EXTS = (".h", ".hpp", ".cc", ".cpp", ".cu", ".cuh")
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]', re.M)


def _inside(path, folder):
    path, folder = os.path.realpath(path), os.path.realpath(folder)
    return os.path.commonpath([path, folder]) == folder


def kernel_includes(root):
    """(file, line, header) for every #include in root/csrc that names a header of root/kernels: one that
    resolves under kernels/ (relative to the including file or to csrc/), or one that csrc/ does not have
    but kernels/ or kernels/helpers/ does (it could only be found with kernels on the include path)."""
    csrc, kernels = os.path.join(root, "csrc"), os.path.join(root, "kernels")
    bad = []
    for dirpath, _, files in os.walk(csrc):
        for name in sorted(files):
            if not name.endswith(SOURCE_EXTS):
                continue
            path = os.path.join(dirpath, name)
            with open(path, encoding="utf-8", errors="replace") as f:
                text = f.read()
            for m in INCLUDE.finditer(text):
                quote, header = m.group(1), m.group(2)
                line = text.count("\n", 0, m.start()) + 1
                rel = os.path.relpath(path, root)
                candidates = [os.path.join(d, header) for d in ((dirpath, csrc) if quote == '"' else (csrc,))]
                found = [c for c in candidates if os.path.exists(c)]
                if any(_inside(c, kernels) for c in found) or "kernels/" in header:
                    bad.append((rel, line, header))
                elif not found and any(os.path.exists(os.path.join(d, header))
                                       for d in (kernels, os.path.join(kernels, "helpers"))):
                    bad.append((rel, line, header))
    return bad


def test_csrc_includes_no_kernels_header():
    bad = kernel_includes(ROOT)
    assert not bad, "csrc/ must not include kernels/ headers (move the code into csrc/ instead): " + ", ".join(
        "%s:%d includes \"%s\"" % b for b in bad)


def test_the_check_finds_kernel_includes(tmp_path):
    (tmp_path / "csrc").mkdir()
    (tmp_path / "kernels" / "helpers").mkdir(parents=True)
    (tmp_path / "csrc" / "core.h").write_text("#pragma once\n")
    (tmp_path / "kernels" / "helpers" / "blas.h").write_text("#pragma once\n")
    (tmp_path / "kernels" / "op.h").write_text("#pragma once\n")
    (tmp_path / "csrc" / "ok.cc").write_text('#include "core.h"\n#include <vector>\n#include <pybind11/pybind11.h>\n')
    (tmp_path / "csrc" / "bad.cc").write_text(
        '#include "core.h"\n'
        '#include "helpers/blas.h"\n'           # found only with kernels/ on the include path
        '  #  include "../kernels/op.h"\n'      # a path into kernels/
        '#include "blas.h"\n'                   # found only with kernels/helpers/ on the include path
        '#include <op.h>\n')
    assert sorted(kernel_includes(str(tmp_path))) == [
        ("csrc/bad.cc", 2, "helpers/blas.h"), ("csrc/bad.cc", 3, "../kernels/op.h"),
        ("csrc/bad.cc", 4, "blas.h"), ("csrc/bad.cc", 5, "op.h")]


def test_setup_puts_only_csrc_on_the_include_path():
    # kernels/ on the include path would let csrc/ include kernel headers by bare name again.
    with open(os.path.join(ROOT, "setup.py")) as f:
        text = f.read()
    m = re.search(r"^include_dirs = \[(.*)\]$", text, re.M)
    assert m, "setup.py: no include_dirs line"
    assert "kernels" not in m.group(1)
    assert '"-Ikernels"' not in text
