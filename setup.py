"""Builds the one extension module, ``fluidlite._core``, from csrc/ and kernels/.

C++ sources compile in parallel (pybind11's ParallelCompile). With CUDA, the ``.cu`` files under csrc/ and
kernels/ (the device runtime in csrc/cuda/, the kernels in kernels/cuda/) compile with nvcc for sm_80 and sm_90
plus compute_90 PTX (newer GPUs JIT it) and link into the same module. The C++ sources compile identically with
and without CUDA: the CUDA objects register themselves (csrc/cuda_api.h), so a CPU-only build is today's build
and ``fluidlite.core.is_compiled_with_cuda()`` says whether they are linked in.

The CUDA runtime links statically (the toolkit's libcudart_static.a), or else dynamically from the
nvidia-cuda-runtime wheel; either way the module imports on a machine with no GPU, driver or CUDA libraries.
cuBLAS is opened at first use (csrc/cuda/blas.cu), from the nvidia-cublas wheel or the system.

Environment knobs: FLUIDLITE_CUDA=1 (require nvcc) | 0 (skip CUDA) | unset (CUDA when nvcc is found; the older
FLUIDLITE_WITH_CUDA is read too), NVCC=path, DEBUG=1 (-O0 -g), FLUIDLITE_SANITIZE=1 (AddressSanitizer +
UndefinedBehaviorSanitizer, for tools/sanitize.sh), FLUIDLITE_BUILD_JOBS=N.
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
cu_sources = rel(glob.glob(os.path.join(HERE, "csrc", "**", "*.cu"), recursive=True)
                 + glob.glob(os.path.join(HERE, "kernels", "**", "*.cu"), recursive=True))
CUDA_ARCHS = ["-gencode=arch=compute_80,code=sm_80", "-gencode=arch=compute_90,code=sm_90",
              "-gencode=arch=compute_90,code=compute_90"]


def cuda_mode():
    """'1' (CUDA required), '0' (skipped) or 'auto'."""
    v = os.environ.get("FLUIDLITE_CUDA", os.environ.get("FLUIDLITE_WITH_CUDA", "auto")).strip().lower()
    if v in ("0", "off", "false", "no"):
        return "0"
    if v in ("1", "on", "true", "yes"):
        return "1"
    return "auto"


def find_nvcc():
    if cuda_mode() == "0":
        return None
    nvcc = os.environ.get("NVCC") or shutil.which("nvcc")
    for cand in ("/usr/local/cuda/bin/nvcc",):
        if not nvcc and os.path.exists(cand):
            nvcc = cand
    if not nvcc and cuda_mode() == "1":
        raise SystemExit("FLUIDLITE_CUDA=1 but nvcc was not found (set NVCC=/path/to/nvcc or put it on PATH)")
    return nvcc


def find_cudart(cuda_home):
    """How to link the CUDA runtime: ([extra objects], [link args])."""
    static = os.path.join(cuda_home, "lib64", "libcudart_static.a")
    if os.path.exists(static):
        return [static], ["-ldl", "-lrt", "-lpthread"]
    try:  # the nvidia-cuda-runtime wheel: site-packages/nvidia/cu13/lib/libcudart.so.13
        import nvidia.cu13  # noqa: F401
        lib = os.path.join(os.path.dirname(nvidia.cu13.__file__), "lib")
    except ImportError:
        lib = os.path.join(cuda_home, "lib64")
    so = sorted(glob.glob(os.path.join(lib, "libcudart.so*")))
    if not so:
        raise SystemExit("nvcc was found but no CUDA runtime to link (no libcudart_static.a in %s/lib64, no "
                         "libcudart.so in %s); install nvidia-cuda-runtime or set FLUIDLITE_CUDA=0" % (cuda_home, lib))
    return [so[-1]], ["-Wl,-rpath," + lib, "-Wl,-rpath,$ORIGIN/../nvidia/cu13/lib"]


def find_cuda_home(nvcc):
    """The toolkit folder (include/cuda_runtime.h): $CUDA_HOME, nvcc's parent (nvcc may be a wrapper script
    elsewhere), or /usr/local/cuda."""
    cands = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"),
             os.path.dirname(os.path.dirname(os.path.realpath(nvcc))), "/usr/local/cuda"]
    for c in cands:
        if c and os.path.exists(os.path.join(c, "include", "cuda_runtime.h")):
            return c
    raise SystemExit("nvcc is %s but no CUDA toolkit with include/cuda_runtime.h was found (set CUDA_HOME, or "
                     "FLUIDLITE_CUDA=0 for a CPU-only build)" % nvcc)


NVCC = find_nvcc() if cu_sources else None
CUDA_HOME = find_cuda_home(NVCC) if NVCC else None

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

cuda_objects = []
if NVCC:
    cuda_objects, cuda_link = find_cudart(CUDA_HOME)
    extra_link_args += cuda_link


class BuildExtWithCuda(build_ext):
    """build_ext that first compiles kernels/**/*.cu with nvcc into objects linked into _core."""

    def finalize_options(self):
        super().finalize_options()
        # Objects are reused across builds (needs_recompile below): keep other flag sets' objects apart.
        if DEBUG or SANITIZE:
            self.build_temp += "-sanitize" if SANITIZE else "-debug"

    def build_extension(self, ext):
        if NVCC and cu_sources:
            cuda_objs = self._compile_cuda()
            ext.extra_objects = list(ext.extra_objects or []) + cuda_objs + cuda_objects
            # setuptools relinks only when a source or a dependency is newer than the module: the CUDA objects
            # count, so a build where only a .cu file changed relinks too.
            ext.depends = list(ext.depends or []) + cuda_objs
        super().build_extension(ext)
        if not self.inplace:
            self._copy_into_checkout(ext)

    def _compile_cuda(self):
        """nvcc -c for every .cu whose object is out of date (its -MD dependency list, as for the C++ sources), in
        parallel; returns the objects in source order."""
        tmp = os.path.join(self.build_temp, "cuda")
        os.makedirs(tmp, exist_ok=True)
        jobs = []
        for src in cu_sources:
            obj = os.path.join(tmp, src.replace(os.sep, "_") + ".o")
            if needs_recompile(obj, src):
                opt_cu = ["-O0", "-g", "-G"] if DEBUG else ["-O3"]
                jobs.append([NVCC, "-c", src, "-o", obj, "-std=c++17", *opt_cu, "-MD", "-MF",
                             os.path.splitext(obj)[0] + ".d", "--expt-relaxed-constexpr", "-Xcompiler",
                             "-fPIC,-fvisibility=hidden", "-DFL_WITH_CUDA=1", "-Icsrc", *CUDA_ARCHS])
        if jobs:
            from concurrent.futures import ThreadPoolExecutor
            n = int(os.environ.get("FLUIDLITE_BUILD_JOBS", "0") or 0) or os.cpu_count() or 1
            with ThreadPoolExecutor(max(1, n)) as pool:
                for cmd, rc in zip(jobs, pool.map(lambda c: (print(" ".join(c)), subprocess.call(c, cwd=HERE))[1],
                                                  jobs)):
                    if rc != 0:
                        raise SystemExit("nvcc failed (%d): %s" % (rc, " ".join(cmd)))
        return [os.path.join(tmp, src.replace(os.sep, "_") + ".o") for src in cu_sources]

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
