"""Extract Fluid 1.8's public API (the ``__all__`` lists) into fluidlite/_fluid18_api.json.

A maintainer tool, not run in CI. It reads Paddle's Python sources statically (``ast``; paddle is never
imported) from a directory that contains the ``paddle/`` package: the ``python/`` folder of a Paddle
checkout at release/1.8, or an unpacked ``paddlepaddle==1.8.5`` wheel, which is what the committed file was
read from (``pip download --no-deps --only-binary=:all: --python-version 37 --platform manylinux1_x86_64
paddlepaddle==1.8.5``, then ``unzip`` it)::

    python tools/compat/extract_fluid18_api.py /path/to/dir-with-paddle [--out fluidlite/_fluid18_api.json]

``__all__`` is resolved as Python would build it: list literals, ``+``, ``+=``, ``extend``/``append``, names
bound to list literals and ``submodule.__all__`` through the module's imports. A construct it does not know
stops it with the file and line, so nothing is guessed.
"""
import argparse
import ast
import json
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Fluid modules whose names docs/compat.md lists, with the file that defines them (relative to paddle/).
FLUID_MODULES = [
    "fluid", "fluid.layers", "fluid.io", "fluid.optimizer", "fluid.nets", "fluid.metrics", "fluid.initializer",
    "fluid.regularizer", "fluid.clip", "fluid.param_attr", "fluid.profiler", "fluid.unique_name", "fluid.backward",
    "fluid.framework", "fluid.executor", "fluid.average", "fluid.dataset", "fluid.transpiler",
    "fluid.incubate.fleet.collective", "fluid.incubate.fleet.base.role_maker", "fluid.dygraph", "fluid.contrib",
    "reader", "dataset",
]
# The files whose __all__ fluid/layers/__init__.py concatenates.
LAYERS_SUBMODULES = ["nn", "io", "tensor", "control_flow", "ops", "device", "detection", "metric_op",
                     "learning_rate_scheduler", "distributions", "sequence_lod", "loss", "rnn"]
# paddle/__init__.py of 1.8 has no __all__; these are the paddle-level names Fluid 1.x scripts use.
PADDLE_LEVEL = ["batch", "reader", "dataset"]


class Extractor:
    def __init__(self, src):
        self.src = src
        self.cache = {}
        self.fixups = []

    def file_of(self, mod):
        base = os.path.join(self.src, *mod.split("."))
        for path in (base + ".py", os.path.join(base, "__init__.py")):
            if os.path.isfile(path):
                return path
        return None

    def _package(self, mod):
        return mod if self.file_of(mod).endswith("__init__.py") else mod.rsplit(".", 1)[0]

    def _resolve_from(self, mod, node):
        pkg = self._package(mod)
        if node.level:
            parts = pkg.split(".")
            base = ".".join(parts[:len(parts) - (node.level - 1)])
            return base + ("." + node.module if node.module else "")
        return node.module

    def names(self, mod):
        """The public names of ``paddle.<mod>``: its ``__all__``, or (without one) the names it defines."""
        if mod not in self.cache:
            self.cache[mod] = self._names(mod)
        return self.cache[mod]

    def _names(self, mod):
        path = self.file_of("paddle." + mod if not mod.startswith("paddle") else mod)
        full = "paddle." + mod if not mod.startswith("paddle") else mod
        if path is None:
            raise SystemExit("no source for %s under %s" % (full, self.src))
        with open(path) as f:
            tree = ast.parse(f.read(), path)
        env, result, defined = {}, None, []

        def where(node):
            return "%s:%d" % (os.path.relpath(path, self.src), node.lineno)

        def evaluate(node):
            if isinstance(node, (ast.List, ast.Tuple)):
                out = []
                for elt in node.elts:
                    if not (isinstance(elt, ast.Constant) and isinstance(elt.value, str)):
                        raise SystemExit("%s: non-string element in __all__" % where(node))
                    out.append(elt.value)
                return out
            if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
                return evaluate(node.left) + evaluate(node.right)
            if isinstance(node, ast.Name) and isinstance(env.get(node.id), list):
                return list(env[node.id])
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "list":
                return evaluate(node.args[0])
            if isinstance(node, ast.Attribute) and node.attr == "__all__":
                target = module_of(node.value)
                if target is not None:
                    return list(self.names(target))
            raise SystemExit("%s: cannot resolve %s statically" % (where(node), ast.dump(node)[:120]))

        def module_of(node):
            if isinstance(node, ast.Name):
                val = env.get(node.id)
                return val[1] if isinstance(val, tuple) else None
            if isinstance(node, ast.Attribute):
                base = module_of(node.value)
                if base and self.file_of(base + "." + node.attr):
                    return base + "." + node.attr
            return None

        def visit(body):
            nonlocal result
            for node in body:
                if isinstance(node, ast.Import):
                    for alias in node.names:
                        if alias.asname:
                            env[alias.asname] = ("module", alias.name)
                        else:
                            top = alias.name.split(".")[0]
                            env[top] = ("module", top)
                elif isinstance(node, ast.ImportFrom):
                    base = self._resolve_from(full, node)
                    if base and base.startswith(full + ".") and path.endswith("__init__.py"):
                        # Importing a submodule binds it in its package's namespace, as Python does.
                        sub = base[len(full) + 1:].split(".")[0]
                        env[sub] = ("module", full + "." + sub)
                    for alias in node.names:
                        if alias.name == "*":
                            continue
                        local = alias.asname or alias.name
                        if base and self.file_of(base + "." + alias.name):
                            env[local] = ("module", base + "." + alias.name)
                        else:
                            env.pop(local, None)
                elif isinstance(node, ast.Assign):
                    for tgt in node.targets:
                        if isinstance(tgt, ast.Name) and tgt.id == "__all__":
                            result = evaluate(node.value)
                        elif isinstance(tgt, ast.Name):
                            defined.append(tgt.id)
                            if isinstance(node.value, ast.List):
                                try:
                                    env[tgt.id] = evaluate(node.value)
                                except SystemExit:
                                    env.pop(tgt.id, None)
                elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
                    if node.target.id == "__all__":
                        result = result + evaluate(node.value)
                elif (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)
                      and isinstance(node.value.func, ast.Attribute)
                      and isinstance(node.value.func.value, ast.Name) and node.value.func.value.id == "__all__"):
                    arg = node.value.args[0]
                    if node.value.func.attr == "extend":
                        result = result + evaluate(arg)
                    elif node.value.func.attr == "append" and isinstance(arg, ast.Constant):
                        result = result + [arg.value]
                    else:
                        raise SystemExit("%s: unknown __all__ call" % where(node))
                elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                    defined.append(node.name)
                elif isinstance(node, ast.Try):
                    visit(node.body)

        visit(tree.body)
        if result is None:
            # No __all__ (fluid.incubate.fleet.collective): the public names it defines itself, imports excluded.
            result = [n for n in defined if not n.startswith("_")]
        names = []
        for name in result:
            if not name.isidentifier():
                # e.g. paddle.dataset.conll05: __all__ = ['test, get_dict', ...], one string for two names.
                parts = [p.strip() for p in name.split(",")]
                if not all(p.isidentifier() for p in parts):
                    raise SystemExit("%s: %r in __all__ is not a name" % (full, name))
                self.fixups.append("%s: __all__ entry %r split into %s" % (full, name, parts))
                names.extend(parts)
            else:
                names.append(name)
        seen = set()
        return [n for n in names if not (n in seen or seen.add(n))]


def version_of(src):
    info = {}
    path = os.path.join(src, "paddle", "version.py")
    if os.path.isfile(path):
        with open(path) as f:
            for key, val in re.findall(r"^(full_version|commit)\s*=\s*'([^']*)'", f.read(), re.M):
                info[key] = val
    return info


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("src", help="directory that contains the paddle/ package of Fluid 1.8")
    ap.add_argument("--out", default=os.path.join(ROOT, "fluidlite", "_fluid18_api.json"))
    args = ap.parse_args(argv)
    ex = Extractor(os.path.abspath(args.src))
    modules = {"paddle": list(PADDLE_LEVEL)}
    for mod in FLUID_MODULES:
        key = mod if mod.startswith("fluid") else "paddle." + mod
        modules[key] = ex.names(mod)
    for ds in modules["paddle.dataset"]:
        modules["paddle.dataset." + ds] = ex.names("dataset." + ds)
    # Which file of fluid.layers each layer name comes from (docs/compat.md's notes and plan rules use it).
    origin = {}
    for sub in LAYERS_SUBMODULES:
        for name in ex.names("fluid.layers." + sub):
            origin.setdefault(name, sub)
    ver = version_of(ex.src)
    data = {
        "source": "the Python sources of PaddlePaddle %s (paddle/version.py: commit %s)"
                  % (ver.get("full_version", "?"), ver.get("commit", "?")),
        "version": ver.get("full_version"), "commit": ver.get("commit"),
        "fixups": ex.fixups,
        "modules": modules,
        "layers_origin": {name: origin[name] for name in modules["fluid.layers"]},
    }
    with open(args.out, "w") as f:
        json.dump(data, f, indent=1, sort_keys=False)
        f.write("\n")
    total = sum(len(v) for v in modules.values())
    print("wrote %s: %d modules, %d names" % (args.out, len(modules), total))
    return 0


if __name__ == "__main__":
    sys.exit(main())
