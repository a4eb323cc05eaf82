"""docs/compat.md lists Fluid 1.8's public API with fluidlite's status; missing Fluid names say so when touched."""
import importlib
import importlib.util
import os
import pickle
import re
import subprocess
import sys
import types

import pytest

import fluidlite as fluid
from fluidlite import _compat

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOC = os.path.join(ROOT, "docs", "compat.md")


def load_tool(name, relpath):
    spec = importlib.util.spec_from_file_location(name, os.path.join(ROOT, relpath))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def doc_rows():
    """{fluid module: {name: status}} parsed from docs/compat.md's per-module tables."""
    rows, module = {}, None
    with open(DOC) as f:
        for line in f:
            m = re.match(r"^## (\S+)$", line)
            if m:
                module = m.group(1) if m.group(1) != "Summary" else None
                continue
            m = re.match(r"^\| `([^`]+)` \| ([a-z ()]+) \|", line)
            if module and m:
                rows.setdefault(module, {})[m.group(1)] = m.group(2)
    return rows


def missing_message(fluid_name, plan):
    return "%s is a Fluid 1.x API that fluidlite does not implement %s; see docs/compat.md" % (fluid_name, plan)


def test_compat_md_is_up_to_date_and_prints_the_doc_coverage():
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "compat_report.py"), "--check"],
                          capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    printed = re.fullmatch(r"coverage: ([0-9.]+) % of Fluid 1\.8 public names implemented \((\d+) of (\d+)\)\n",
                           proc.stdout)
    assert printed, proc.stdout
    with open(DOC) as f:
        doc = f.read()
    in_doc = re.search(r"\*\*Coverage: ([0-9.]+) %\*\* of Fluid 1\.8 public names implemented \((\d+) of (\d+)\)",
                       doc)
    assert in_doc.groups() == printed.groups()
    statuses = [s for mod in doc_rows().values() for s in mod.values()]
    assert len(statuses) == int(printed.group(3))
    assert statuses.count("implemented") == int(printed.group(2))


def test_check_mode_fails_on_a_stale_doc(tmp_path):
    report = load_tool("compat_report", "tools/compat_report.py")
    stale = tmp_path / "compat.md"
    stale.write_text("# Fluid 1.x API compatibility\n")
    assert report.main(["--check", "--out", str(stale)]) == 1
    assert report.main(["--out", str(stale)]) == 0
    assert report.main(["--check", "--out", str(stale)]) == 0


def test_every_name_marked_implemented_resolves_and_every_missing_one_does_not():
    rows = doc_rows()
    assert set(rows) == set(_compat.api()["modules"])
    for module, names in rows.items():
        try:
            mod = importlib.import_module(_compat.fluidlite_module_name(module))
        except ModuleNotFoundError:
            mod = None
        for name, status in names.items():
            if status == "implemented":
                assert not _compat.is_placeholder(getattr(mod, name)), (module, name)
            else:
                assert status in ("missing (planned)", "missing (not planned)"), (module, name, status)
                assert mod is None or not hasattr(mod, name), (module, name)


@pytest.mark.parametrize("expr, fluid_name, plan", [
    ("fluid.layers.sampled_softmax_with_cross_entropy", "fluid.layers.sampled_softmax_with_cross_entropy",
     "yet (planned in [4/10])"),
    ("fluid.incubate.fleet.base.role_maker.GeneralRoleMaker", "fluid.incubate.fleet.base.role_maker.GeneralRoleMaker",
     "(not planned: role makers other than [9/10]'s are for parameter-server training, out of scope ([9/10] is "
     "collective only))"),
    ("fluid.dygraph", "fluid.dygraph", "(not planned: fluidlite is static-graph only)"),
    ("fluid.contrib", "fluid.contrib",
     "(not planned: fluid.contrib is Paddle's experimental area; no issue ports it)"),
    ("fluid.layers.prior_box", "fluid.layers.prior_box", "(not planned: detection models are out of scope of [4/10])"),
    ("fluid.optimizer.DGCMomentumOptimizer", "fluid.optimizer.DGCMomentumOptimizer",
     "(not planned: DGC is out of scope in [4/10])"),
    ("fluid.layers.reduce_min", "fluid.layers.reduce_min",
     "(not planned: no issue schedules it (not used by the reference programs of [3/10]-[6/10]))"),
])
def test_missing_fluid_names_raise_a_message_that_says_so(expr, fluid_name, plan):
    module, _, name = expr.rpartition(".")
    owner = eval(module, {"fluid": fluid})
    with pytest.raises(AttributeError, match="^%s$" % re.escape(missing_message(fluid_name, plan))):
        getattr(owner, name)
    assert not hasattr(owner, name)
    assert getattr(owner, name, "default") == "default"


def test_unknown_names_raise_pythons_own_message():
    plain = types.ModuleType("fluidlite.layers")
    with pytest.raises(AttributeError) as python_own:
        plain.no_such_layer  # noqa: B018
    with pytest.raises(AttributeError, match="^module 'fluidlite.layers' has no attribute 'no_such_layer'$") as ours:
        fluid.layers.no_such_layer  # noqa: B018
    assert str(ours.value) == str(python_own.value)
    # dunder probes (copy, pickle, inspect) never reach the Fluid tables, even for a listed module name
    with pytest.raises(AttributeError, match="^module 'fluidlite' has no attribute '__wrapped__'$"):
        fluid.__wrapped__  # noqa: B018


def test_normal_access_star_import_pickle_and_introspection_still_work():
    namespace = {}
    exec("from fluidlite.layers import *", namespace)
    assert namespace["fc"] is fluid.layers.fc and "prior_box" not in namespace
    assert pickle.loads(pickle.dumps(fluid.layers.fc)) is fluid.layers.fc
    assert pickle.loads(pickle.dumps(fluid.ParamAttr)) is fluid.ParamAttr
    assert "fc" in dir(fluid.layers) and "prior_box" not in dir(fluid.layers)
    assert fluid.layers.__getattr__.__module__ == "fluidlite._compat"


def test_every_imported_module_that_mirrors_a_fluid_module_has_it():
    # fails when fluidlite/__init__.py imports a module after its _compat.install_all() line (a fresh
    # interpreter: what `import fluidlite` alone imports, whatever other tests imported since)
    code = ("import sys, fluidlite\nfrom fluidlite import _compat\n"
            "for n in sorted(sys.modules):\n"
            "    if n.startswith('fluidlite') and _compat.fluid_modules_of(n):\n"
            "        print(n, '__getattr__' in vars(sys.modules[n]))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    found = dict(line.split() for line in proc.stdout.splitlines())
    assert {"fluidlite", "fluidlite.layers", "fluidlite.io", "fluidlite.optimizer"} <= set(found)
    assert {n for n, has in found.items() if has != "True"} == set()


def test_a_module_imported_later_installs_it_with_one_line():
    # fluidlite.nets mirrors fluid.nets: install() gives it the Fluid-aware __getattr__ too.
    namespace = {"__name__": "fluidlite.nets"}
    _compat.install(namespace)
    with pytest.raises(AttributeError, match="^%s$" % re.escape(
            missing_message("fluid.nets.sequence_conv_pool", "yet (planned in [5/10])"))):
        namespace["__getattr__"]("sequence_conv_pool")
    own = {"__name__": "fluidlite.io", "__getattr__": len}
    _compat.install(own)  # a module's own __getattr__ is kept
    assert own["__getattr__"] is len
    unrelated = {"__name__": "fluidlite.log"}  # mirrors no Fluid module: nothing installed
    _compat.install(unrelated)
    assert "__getattr__" not in unrelated


def test_paddle_level_names_are_reported_as_paddle():
    # `import fluidlite as paddle`: fluidlite.dataset is paddle.dataset (a listed name), not fluid.dataset;
    # tried on a stand-in for fluidlite/__init__ so that it holds once fluidlite.dataset exists
    namespace = {"__name__": "fluidlite"}
    _compat.install(namespace)
    with pytest.raises(AttributeError, match="^%s$" % re.escape(
            missing_message("paddle.dataset", "yet (planned in [3/10])"))):
        namespace["__getattr__"]("dataset")


def test_importing_a_missing_fluid_module_says_so():
    # Python imports the parent package first, so the message names the first missing one
    with pytest.raises(ModuleNotFoundError, match="^%s$" % re.escape(
            missing_message("fluid.contrib", "(not planned: fluid.contrib is Paddle's experimental area; no issue "
                                             "ports it)"))):
        importlib.import_module("fluidlite.contrib.mixed_precision")
    with pytest.raises(ModuleNotFoundError, match="^%s$" % re.escape(
            missing_message("fluid.dygraph", "(not planned: fluidlite is static-graph only)"))):
        exec("from fluidlite.dygraph import to_variable", {})
    with pytest.raises(ModuleNotFoundError, match="^No module named 'fluidlite.no_such_module'$"):
        importlib.import_module("fluidlite.no_such_module")


def test_plan_tables_name_only_fluid_18_names():
    mods = _compat.api()["modules"]
    for issue, table in _compat.PLANNED.items():
        assert issue in _compat.ISSUES
        for module, spec in table.items():
            assert module in mods, (issue, module)
            if spec != "*":
                unknown = set(spec.split()) - set(mods[module])
                assert not unknown, (issue, module, unknown)
    for module, spec, _ in _compat.NOT_PLANNED:
        base = module.split("@")[0].rstrip(".*")
        assert base in mods, module
        if spec != "*" and "@" not in module and not module.endswith("*"):
            assert not set(spec.split()) - set(mods[module]), (module, spec)


FAKE_PADDLE = {
    "paddle/version.py": "full_version    = '1.8.9'\ncommit          = 'abc123'\n",
    "paddle/reader/__init__.py": "from . import decorator\nfrom .decorator import *\n__all__ = decorator.__all__\n",
    "paddle/reader/decorator.py": "__all__ = ['cache', 'shuffle']\n",
    "paddle/dataset/__init__.py": "import paddle.dataset.mnist\n__all__ = ['mnist']\n",
    "paddle/dataset/mnist.py": "__all__ = ['train, test']\n",
    "paddle/fluid/__init__.py": "from . import framework\nfrom .lod_tensor import create_lod_tensor\n"
                                "__all__ = framework.__all__ + lod_tensor.__all__ + ['io']\n",
    "paddle/fluid/framework.py": "__all__ = ['Program']\n__all__.append('Variable')\n",
    "paddle/fluid/lod_tensor.py": "__all__ = ['create_lod_tensor']\n",
    "paddle/fluid/layers/__init__.py": "from . import nn\nfrom . import ops\n__all__ = []\n__all__ += nn.__all__\n"
                                       "__all__ += ops.__all__\n",
    "paddle/fluid/layers/nn.py": "__all__ = ['fc', 'conv2d']\n",
    "paddle/fluid/layers/ops.py": "__acts__ = ['relu']\n__all__ = []\n__all__ += __acts__\n__all__ += ['gelu']\n",
    "paddle/fluid/incubate/fleet/collective/__init__.py": "import os\nclass Collective(object):\n    pass\n"
                                                          "fleet = Collective()\ndef _private():\n    pass\n",
}


def test_extractor_resolves_all_lists_statically(tmp_path):
    for rel, text in FAKE_PADDLE.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    ex = load_tool("extract_fluid18_api", "tools/compat/extract_fluid18_api.py").Extractor(str(tmp_path))
    assert ex.names("fluid") == ["Program", "Variable", "create_lod_tensor", "io"]
    assert ex.names("fluid.layers") == ["fc", "conv2d", "relu", "gelu"]
    assert ex.names("reader") == ["cache", "shuffle"]
    assert ex.names("dataset.mnist") == ["train", "test"]
    assert ex.fixups == ["paddle.dataset.mnist: __all__ entry 'train, test' split into ['train', 'test']"]
    assert ex.names("fluid.incubate.fleet.collective") == ["Collective", "fleet"]
    (tmp_path / "paddle/fluid/nets.py").write_text("__all__ = [n for n in dir()]\n")
    with pytest.raises(SystemExit, match=r"paddle/fluid/nets\.py:1: cannot resolve ListComp"):
        ex.names("fluid.nets")


def test_fluid_names_living_in_several_modules_resolve_in_each():
    # Fluid 1.8 exports these from fluid.transpiler and fluid.framework as well as from fluid
    assert fluid.transpiler.memory_optimize is fluid.memory_optimize
    assert fluid.transpiler.release_memory is fluid.release_memory
    assert fluid.framework.cpu_places is fluid.cpu_places and fluid.framework.cuda_places is fluid.cuda_places
    assert fluid.transpiler.DistributeTranspiler is fluid.DistributeTranspiler
    with pytest.raises(AttributeError, match="^%s$" % re.escape(missing_message(
            "fluid.transpiler.HashName", "(not planned: transpiler placement policies are for parameter-server "
                                         "training, out of scope ([9/10] is collective only))"))):
        fluid.transpiler.HashName  # noqa: B018  (the lookup is the test)
