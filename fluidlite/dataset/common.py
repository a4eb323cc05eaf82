"""Cache, download and md5 checks shared by the ``fluidlite.dataset`` modules (Fluid 1.x ``paddle.dataset.common``).

Files live in ``<data home>/<module>/<name>``. The data home is ``$FLUIDLITE_DATA_HOME`` when set, else
``~/.cache/fluidlite/dataset``; it is read each time a file is needed, so it can change at run time.
``DATA_HOME`` (module attribute) gives the current value, as ``paddle.dataset.common.DATA_HOME`` did.

A file is used only if its md5 is the published one. A missing file is downloaded with urllib (Fluid's
URL first, then its mirrors), up to ``RETRIES`` rounds, into a temporary file in the same folder that is
renamed into place only once its md5 matches: an interrupted download never leaves a file that passes
for complete. ``FLUIDLITE_DATA_OFFLINE=1`` forbids downloads. When a file cannot be had the error names
the file, its URL(s), its md5 and the exact path to put it at. A file copied from Paddle's cache
(``~/.cache/paddle/dataset/<module>/``) is accepted under Paddle's name as well (e.g. ``imdb%2FaclImdb_v1.tar.gz``).
"""
import glob
import hashlib
import os
import pickle
import sys
import tempfile
import threading
import time

__all__ = ["data_home", "md5file", "download", "split", "cluster_files_reader", "DatasetFileError"]

RETRIES = 3
RETRY_WAIT_S = 1.0  # times the round number; tests set it to 0
_CHUNK = 1 << 16
_md5_cache = {}  # (path, size, mtime_ns) -> md5: a large archive is hashed once per process
_lock = threading.Lock()


class DatasetFileError(RuntimeError):
    """A data set file is missing or wrong and could not be downloaded."""


def data_home():
    """The cache root: ``$FLUIDLITE_DATA_HOME`` or ``~/.cache/fluidlite/dataset`` (read at each call)."""
    env = os.environ.get("FLUIDLITE_DATA_HOME")
    if env:
        return os.path.abspath(os.path.expanduser(env))
    return os.path.join(os.path.expanduser("~"), ".cache", "fluidlite", "dataset")


def __getattr__(name):
    if name == "DATA_HOME":
        return data_home()
    raise AttributeError("module %r has no attribute %r" % (__name__, name))


def md5file(fname):
    """The hex md5 of a file."""
    h = hashlib.md5()
    with open(fname, "rb") as f:
        for chunk in iter(lambda: f.read(_CHUNK), b""):
            h.update(chunk)
    return h.hexdigest()


def _cached_md5(path):
    st = os.stat(path)
    key = (path, st.st_size, st.st_mtime_ns)
    with _lock:
        if key in _md5_cache:
            return _md5_cache[key]
    value = md5file(path)
    with _lock:
        _md5_cache[key] = value
    return value


def _basename(url):
    return url.split("/")[-1]


def _fetch_once(url, path, md5sum):
    """Download ``url`` to a temporary file next to ``path``; rename it to ``path`` if its md5 matches."""
    import urllib.request  # here, not at import: it costs ~8 ms and most programs never download

    folder = os.path.dirname(path)
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", suffix=".part", dir=folder)
    try:
        h = hashlib.md5()
        with os.fdopen(fd, "wb") as out:
            with urllib.request.urlopen(url, timeout=60) as resp:
                for chunk in iter(lambda: resp.read(_CHUNK), b""):
                    out.write(chunk)
                    h.update(chunk)
            out.flush()
            os.fsync(out.fileno())
        got = h.hexdigest()
        if got != md5sum:
            raise DatasetFileError("downloaded file has md5 %s, expected %s" % (got, md5sum))
        os.replace(tmp, path)
        tmp = None
    finally:
        if tmp is not None and os.path.exists(tmp):
            os.remove(tmp)


def get_file(module_name, save_name, md5sum, urls, aliases=()):
    """Path of ``<data home>/<module_name>/<save_name>`` with md5 ``md5sum``, downloading it if needed.

    ``urls``: where to download from, tried in order each round. ``aliases``: other names under which the
    file is accepted in the same folder (Paddle's cache names).
    """
    folder = os.path.join(data_home(), module_name)
    path = os.path.join(folder, save_name)
    wrong = []
    for name in (save_name,) + tuple(a for a in aliases if a != save_name):
        candidate = os.path.join(folder, name)
        if os.path.isfile(candidate):
            got = _cached_md5(candidate)
            if got == md5sum:
                return candidate
            wrong.append("%s has md5 %s" % (candidate, got))
    errors = []
    if os.environ.get("FLUIDLITE_DATA_OFFLINE", "") not in ("", "0"):
        errors.append("downloads are disabled (FLUIDLITE_DATA_OFFLINE is set)")
    else:
        os.makedirs(folder, exist_ok=True)
        for attempt in range(RETRIES):
            for url in urls:
                sys.stderr.write("fluidlite.dataset: downloading %s to %s\n" % (url, path))
                try:
                    _fetch_once(url, path, md5sum)
                    return path
                except Exception as e:  # any failure: try the next URL or round, then report them all
                    errors.append("%s: %s: %s" % (url, type(e).__name__, e))
            if attempt + 1 < RETRIES and RETRY_WAIT_S:
                time.sleep(RETRY_WAIT_S * (attempt + 1))
    msg = ["fluidlite.dataset.%s: cannot get the file %r (md5 %s)." % (module_name, save_name, md5sum)]
    if wrong:
        msg.append("Present but with the wrong md5 (incomplete or another version): %s." % "; ".join(wrong))
    msg.append("Download failed: %s." % (" | ".join(errors[-len(urls):]) if errors else "no URL"))
    msg.append("To use it offline, download it from %s and put it at %s" % (" or ".join(urls), path))
    msg.append("(or set FLUIDLITE_DATA_HOME to a folder that has %s/%s)." % (module_name, save_name))
    raise DatasetFileError(" ".join(msg))


def download(url, module_name, md5sum, save_name=None):
    """Fluid's ``paddle.dataset.common.download``: the cached path of ``url``'s file, downloaded if needed."""
    return get_file(module_name, save_name or _basename(url), md5sum, [url])


def split(reader, line_count, suffix="%05d.pickle", dumper=pickle.dump):
    """Write ``reader``'s samples into files of ``line_count`` samples each, named ``suffix % index``.

    Files are opened in binary mode so that the default pickle dumper works (Fluid opened them as text).
    """
    if not callable(dumper):
        raise TypeError("split: dumper must be callable, got %s" % type(dumper).__name__)
    if int(line_count) <= 0:
        raise ValueError("split: line_count must be a positive integer, got %r" % (line_count,))
    lines, index = [], 0
    for sample in reader():
        lines.append(sample)
        if len(lines) == line_count:
            with open(suffix % index, "wb") as f:
                dumper(lines, f)
            lines, index = [], index + 1
    if lines:
        with open(suffix % index, "wb") as f:
            dumper(lines, f)


def cluster_files_reader(files_pattern, trainer_count, trainer_id, loader=pickle.load):
    """A reader over the sorted files matching ``files_pattern`` whose index % trainer_count == trainer_id."""

    def reader():
        if not callable(loader):
            raise TypeError("cluster_files_reader: loader must be callable, got %s" % type(loader).__name__)
        for i, fn in enumerate(sorted(glob.glob(files_pattern))):
            if i % trainer_count == trainer_id:
                with open(fn, "rb") as f:
                    yield from loader(f)

    return reader
