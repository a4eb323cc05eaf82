"""Builds the one extension module, ``fluidlite._core``, from csrc/ and kernels/.

C++ sources compile in parallel (pybind11's ParallelCompile). ``kernels/**/*.cu`` files are compiled
with nvcc when it is found (and FLUIDLITE_WITH_CUDA is not 0); otherwise the module is CPU-only and
``fluidlite.core.is_compiled_with_cuda()`` is False. Import never needs a GPU.

Environment knobs: DEBUG=1 (-O0 -g), FLUIDLITE_SANITIZE=1 (AddressSanitizer + UndefinedBehaviorSanitizer, for
tools/sanitize.sh), FLUIDLITE_WITH_CUDA=0|1, NVCC=path, FLUIDLITE_BUILD_JOBS=N.
"""
import glob
import os
import shutil
import subprocess

from pybind11.setup_helpers import Pybind11Extension, ParallelCompile, build_ext
from setuptools import setup

import scipy_openblas32

HERE = os.path.dirname(os.path.abspath(__file__))
DEBUG = os.environ.get("DEBUG", "0") == "1"
SANITIZE = os.environ.get("FLUIDLITE_SANITIZE", "0") == "1"
SANITIZERS = ["-fsanitize=address,undefined", "-fno-sanitize-recover=undefined"]


def rel(paths):
    return sorted(os.path.relpath(p, HERE) for p in paths)


cpp_sources = rel(glob.glob(os.path.join(HERE, "csrc", "**", "*.cc"), recursive=True)
                  + glob.glob(os.path.join(HERE, "kernels", "**", "*.cc"), recursive=True))
# Headers: any change rebuilds the module (setuptools does not scan includes itself).
headers = rel(glob.glob(os.path.join(HERE, "csrc", "**", "*.h"), recursive=True)
              + glob.glob(os.path.join(HERE, "kernels", "**", "*.h"), recursive=True))
cu_sources = rel(glob.glob(os.path.join(HERE, "kernels", "**", "*.cu"), recursive=True))


def find_nvcc():
    if os.environ.get("FLUIDLITE_WITH_CUDA", "1") == "0":
        return None
    nvcc = os.environ.get("NVCC") or shutil.which("nvcc")
    if not nvcc:
        for cand in ("/usr/local/cuda/bin/nvcc",):
            if os.path.exists(cand):
                nvcc = cand
    return nvcc


NVCC = find_nvcc() if cu_sources else None
CUDA_HOME = os.path.dirname(os.path.dirname(os.path.realpath(NVCC))) if NVCC else None

opt = ["-O0", "-g"] if DEBUG else ["-O3"]
if SANITIZE:  # every error is fatal; frame pointers keep the reports' stacks readable
    opt = ["-O1", "-g", "-fno-omit-frame-pointer"] + SANITIZERS
# -fno-trapping-math (clang's default): nothing here reads FP exception flags, and without it GCC will not
# if-convert float selects, which keeps loops such as the vectorisable exp in helpers/vec_exp.h scalar.
# -fno-math-errno (clang's default on Linux): nothing reads errno after a math call, and without it GCC keeps
# every loop that takes a sqrt scalar (std::sqrt must be able to set errno), e.g. Adam's update.
extra_compile_args = opt + ["-MMD", "-march=x86-64-v3", "-fvisibility=hidden", "-fno-trapping-math",
                            "-fno-math-errno", "-Wall", "-Wno-unused-function"] \
    if os.uname().machine == "x86_64" else opt + ["-MMD", "-fvisibility=hidden", "-fno-trapping-math",
                                                  "-fno-math-errno"]
define_macros = [("BLAS_SYMBOL_PREFIX", "scipy_")]
# Only csrc/ is on the include path: kernels include csrc headers by name and their helpers relative to
# their own file ("helpers/x.h"), and csrc/ cannot include a kernels header (tests/test_layering.py).
include_dirs = [os.path.join(HERE, "csrc"), scipy_openblas32.get_include_dir()]
libraries = [scipy_openblas32.get_library()]
library_dirs = [scipy_openblas32.get_lib_dir()]
# At run time fluidlite/__init__.py imports scipy_openblas32 first, which loads the library globally;
# the rpath is a second way to find it for a non-editable install (site-packages/scipy_openblas32/lib).
extra_link_args = ["-Wl,-rpath,$ORIGIN/../scipy_openblas32/lib"] + (SANITIZERS if SANITIZE else [])

if NVCC:
    define_macros.append(("FL_WITH_CUDA", "1"))
    include_dirs.append(os.path.join(CUDA_HOME, "include"))
    library_dirs.append(os.path.join(CUDA_HOME, "lib64"))
    libraries.append("cudart")
    extra_link_args.append("-Wl,-rpath," + os.path.join(CUDA_HOME, "lib64"))


class BuildExtWithCuda(build_ext):
    """build_ext that first compiles kernels/**/*.cu with nvcc into objects linked into _core."""

    def finalize_options(self):
        super().finalize_options()
        # Objects are reused across builds (needs_recompile below): keep other flag sets' objects apart.
        if DEBUG or SANITIZE:
            self.build_temp += "-sanitize" if SANITIZE else "-debug"

    def build_extension(self, ext):
        if NVCC and cu_sources:
            objs = []
            tmp = os.path.join(self.build_temp, "cuda")
            os.makedirs(tmp, exist_ok=True)
            for src in cu_sources:
                obj = os.path.join(tmp, src.replace(os.sep, "_") + ".o")
                if not os.path.exists(obj) or os.path.getmtime(obj) < os.path.getmtime(src):
                    cmd = [NVCC, "-c", src, "-o", obj, "-std=c++17", "-O3", "-Xcompiler", "-fPIC",
                           "-DFL_WITH_CUDA=1", "-Icsrc",
                           "-gencode=arch=compute_90,code=sm_90", "-gencode=arch=compute_80,code=sm_80"]
                    print(" ".join(cmd))
                    subprocess.check_call(cmd, cwd=HERE)
                objs.append(obj)
            ext.extra_objects = list(ext.extra_objects or []) + objs
        super().build_extension(ext)
        if not self.inplace:
            self._copy_into_checkout(ext)

    def _copy_into_checkout(self, ext):
        # `pip install .` then `python -m fluidlite.bench` from the checkout root imports ./fluidlite (the
        # current directory comes first on sys.path), which has no _core unless we leave one there too.
        built = self.get_ext_fullpath(ext.name)
        dest = os.path.join(HERE, "fluidlite", os.path.basename(built))
        if os.path.isdir(os.path.dirname(dest)) and os.path.abspath(built) != os.path.abspath(dest):
            try:  # copy then rename: a process that has the old module mapped keeps its inode
                shutil.copyfile(built, dest + ".tmp")
                os.replace(dest + ".tmp", dest)
            except OSError as e:
                print("note: could not copy %s into the checkout (%s)" % (built, e))


def needs_recompile(obj, src):
    """Incremental builds: a source recompiles when its object is missing or older than setup.py or than
    any file in the dependency list gcc wrote beside the object (-MMD: the source and the headers it
    includes); an object without that list recompiles."""
    deps_file = os.path.splitext(obj)[0] + ".d"
    if not os.path.exists(obj) or not os.path.exists(deps_file):
        return True
    built = os.path.getmtime(obj)
    with open(deps_file) as f:
        deps = f.read().split(":", 1)[-1].replace("\\\n", " ").split()
    deps = [d for d in deps if d != "\\"] + [src, os.path.join(HERE, "setup.py")]
    return any(not os.path.exists(d) or os.path.getmtime(d) > built for d in deps)


ParallelCompile("FLUIDLITE_BUILD_JOBS", default=0, needs_recompile=needs_recompile).install()

ext = Pybind11Extension(
    "fluidlite._core",
    cpp_sources,
    cxx_std=17,
    include_dirs=include_dirs,
    define_macros=define_macros,
    libraries=libraries,
    library_dirs=library_dirs,
    extra_compile_args=extra_compile_args,
    extra_link_args=extra_link_args,
    depends=headers,
)

setup(ext_modules=[ext], cmdclass={"build_ext": BuildExtWithCuda}, zip_safe=False)
