"""Generated modules on disk, so numba's own cache (``@njit(cache=True)``) works across processes.

numba caches a function's machine code next to its source file, keyed by that file's path and
time stamp. Each generated module is written once, atomically (temp file + ``os.replace``), to
``<cache dir>/hf_<hash>.py`` (the hash covers the source, numba's and Python's versions), and
imported from there: a new process generating the same source imports the same file and numba
loads the compiled code instead of compiling again.

The cache directory is ``$HYBRIDFW_CACHE_DIR`` or ``~/.cache/hybridfw/codegen`` (created with mode
0700); when that cannot be written, or it is not private to this user (others could plant code or
a numba cache index there, which numba unpickles), a per-process temporary directory (no reuse
across processes, still correct).

The directory is kept to :data:`MAX_MODULES` modules: using a module touches it, and the first
time a process writes a new one it removes the least recently used beyond that bound (with their
``__pycache__`` files, numba's included), down to three quarters of it. A module removed while
another process uses it is only written (and compiled) again there.
"""
from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
import tempfile

__all__ = ["CACHE_ENV_VAR", "MAX_MODULES", "cache_dir", "load_module", "prune"]

CACHE_ENV_VAR = "HYBRIDFW_CACHE_DIR"
MAX_MODULES = 256
_modules: dict = {}   # hash -> imported module (one per process)
_fallback_dir = None
_pruned: set = set()  # directories this process has pruned


def cache_dir() -> str:
    """The directory generated modules are written to (created when missing)."""
    global _fallback_dir
    path = os.environ.get(CACHE_ENV_VAR) or os.path.join(
        os.path.expanduser("~"), ".cache", "hybridfw", "codegen")
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
        if os.access(path, os.W_OK) and _private(path):
            return path
    except OSError:
        pass
    if _fallback_dir is None:
        _fallback_dir = tempfile.mkdtemp(prefix="hybridfw-codegen-")
    return _fallback_dir


def _private(path: str) -> bool:
    """Whether only this user can write ``path``: the modules (and numba's cache index, a pickle
    numba reads back) are trusted like ``__pycache__``, so nobody else may plant files there."""
    if not hasattr(os, "getuid"):
        return True
    st = os.stat(path)
    return st.st_uid == os.getuid() and not st.st_mode & 0o022


def _write_atomically(path: str, text: str) -> None:
    directory = os.path.dirname(path)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-", suffix=".py")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def prune(directory: str, max_modules: int | None = None, keep=()) -> int:
    """Remove the least recently used generated modules of ``directory`` beyond
    ``max_modules`` (default :data:`MAX_MODULES`) down to three quarters of it, with their
    ``__pycache__`` files; returns how many modules went. ``keep``: file names never removed."""
    limit = MAX_MODULES if max_modules is None else max_modules
    try:
        names = [n for n in os.listdir(directory) if n.startswith("hf_") and n.endswith(".py")]
    except OSError:
        return 0
    if len(names) <= limit:
        return 0
    names.sort(key=lambda name: _mtime(os.path.join(directory, name)))
    doomed = [n for n in names[:len(names) - limit * 3 // 4] if n not in keep]
    stems = {n[:-3] for n in doomed}
    pycache = os.path.join(directory, "__pycache__")
    try:
        cached = os.listdir(pycache)
    except OSError:
        cached = []
    for name in doomed:
        _remove(os.path.join(directory, name))
    for name in cached:  # hf_<hash>.cpython-311.pyc, hf_<hash>.region_0-9.py311.nbi, ...
        if name.split(".", 1)[0] in stems:
            _remove(os.path.join(pycache, name))
    return len(doomed)


def _mtime(path: str) -> float:
    try:
        return os.stat(path).st_mtime
    except OSError:
        return 0.0


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass  # another process removed it first


def load_module(source: str, salt: str = ""):
    """Import ``source`` as a module from a file in the cache directory (written if missing)."""
    digest = hashlib.sha256(f"{salt}\n{sys.version}\n{source}".encode()).hexdigest()[:24]
    module = _modules.get(digest)
    if module is not None:
        return module
    path = os.path.join(cache_dir(), f"hf_{digest}.py")
    existing = None
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            existing = f.read()
    if existing != source:  # missing, or a partial/foreign file: (re)write it
        _write_atomically(path, source)
        directory = os.path.dirname(path)
        if directory not in _pruned:
            _pruned.add(directory)
            prune(directory, keep=(os.path.basename(path),))
    else:
        try:
            os.utime(path)  # recently used: pruned last
        except OSError:
            pass
    name = f"hybridfw_codegen_{digest}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    _modules[digest] = module
    return module
