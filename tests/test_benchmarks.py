"""benchmarks/ scripts reuse fluidlite.bench's models and measuring code instead of copies: each script
still imports (what it takes from fluidlite.bench exists), and conv.py reads its layers from the models."""
import glob
import importlib.util
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPTS = sorted(glob.glob(os.path.join(ROOT, "benchmarks", "*.py")))


def load(path):
    name = "benchmark_" + os.path.splitext(os.path.basename(path))[0]
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture
def restore_path():
    # profile_lstm.py puts benchmarks/ on sys.path to import rnn_profile: undo both afterwards
    saved_path = list(sys.path)
    yield
    sys.path[:] = saved_path
    bench_dir = os.path.join(ROOT, "benchmarks")
    for name, mod in list(sys.modules.items()):
        if os.path.dirname(os.path.abspath(getattr(mod, "__file__", None) or os.sep)) == bench_dir:
            del sys.modules[name]


@pytest.mark.parametrize("path", SCRIPTS, ids=os.path.basename)
def test_script_imports_and_has_main(path, restore_path):
    mod = load(path)  # runs nothing but definitions (every script keeps its work in main())
    assert callable(getattr(mod, "main", None)), path


def test_conv_layers_come_from_the_bench_models(restore_path):
    conv = load(os.path.join(ROOT, "benchmarks", "conv.py"))
    assert conv.conv_layers("lenet") == [(1, 20, 28, 5, 1, 0), (20, 50, 12, 5, 1, 0)]
    resnet = conv.conv_layers("resnet_small")
    # ResNet-20: 19 3x3 convolutions and two 1x1 stride-2 shortcuts
    assert len(resnet) == 21 and resnet[0] == (3, 16, 32, 3, 1, 1)
    assert [layer for layer in resnet if layer[3] == 1] == [(16, 32, 32, 1, 2, 0), (32, 64, 16, 1, 2, 0)]
    assert [layer[:3] for layer in conv.conv_layers("vgg_small")] == [
        (3, 64, 32), (64, 64, 32), (64, 128, 16), (128, 128, 16), (128, 256, 8), (256, 256, 8)]
