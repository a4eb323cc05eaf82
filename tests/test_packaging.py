"""A non-editable install (`pip install .`, the README's first command) ships only the packages pyproject.toml
lists: every package directory of fluidlite must be there, or `import fluidlite` fails after install while the
editable install of the test command still works."""
import os

import pytest

tomllib = pytest.importorskip("tomllib")  # Python 3.11+

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _pyproject():
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        return tomllib.load(f)


def test_every_fluidlite_package_is_listed():
    listed = set(_pyproject()["tool"]["setuptools"]["packages"])
    found = set()
    for folder, _, files in os.walk(os.path.join(ROOT, "fluidlite")):
        if "__init__.py" in files and "__pycache__" not in folder:
            found.add(os.path.relpath(folder, ROOT).replace(os.sep, "."))
    assert found - listed == set(), "packages missing from pyproject.toml [tool.setuptools] packages"
    assert listed - found == set(), "pyproject.toml lists packages that do not exist"


def test_package_data_files_exist():
    for package, patterns in _pyproject()["tool"]["setuptools"]["package-data"].items():
        for pattern in patterns:
            path = os.path.join(ROOT, *package.split("."), pattern)
            assert os.path.isfile(path), path
