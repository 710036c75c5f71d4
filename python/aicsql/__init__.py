"""aicsql for datafusion-python.

Registers aiconfigurator's estimators (Rust, through DataFusion's FFI) and
their pure-Python restatement (:mod:`aicsql.spec`, as ``py_``-prefixed
functions) into a :class:`datafusion.SessionContext`, with the ``aic``
catalog of perf tables::

    import aicsql
    ctx = aicsql.context()                 # a session with everything registered
    ctx.sql("SET aic.shared_layer = false")
    ctx.sql("SELECT gemm_latency('h200_sxm/vllm/0.19.0', 'fp8_block', 32, 1280, 5120)")

``aicsql.register(ctx)`` adds the functions and catalog to a session you
built yourself; build its config with :func:`session_config` if you want
``SET aic.*`` to work (datafusion-python cannot add a settings namespace to
a session that already exists).
"""

from __future__ import annotations

import os
from pathlib import Path

# What comes from the compiled module and DataFusion, resolved on first use
# (see ``_session``): ``import aicsql.spec`` needs neither.
_SESSION = ("context", "register", "session_config", "Settings", "DataDirs", "__version__", "_library", "_data_dirs", "_check_datafusion")

__all__ = ["context", "register", "session_config", "default_data_dir", "Settings", "__version__"]


def default_data_dir() -> Path:
    """The data cache: ``$AICSQL_DATA``, else ``$XDG_CACHE_HOME/aicsql``, else ``~/.cache/aicsql``.

    The same rule as the ``aicsql`` shell, so both read one fetched copy.
    """
    if os.environ.get("AICSQL_DATA"):
        return Path(os.environ["AICSQL_DATA"])
    if os.environ.get("XDG_CACHE_HOME"):
        return Path(os.environ["XDG_CACHE_HOME"]) / "aicsql"
    return Path.home() / ".cache" / "aicsql"


def __getattr__(name: str):
    if name in _SESSION:
        from aicsql import _session

        return getattr(_session, name)
    if name == "plot":  # aicsql.plot.pareto(...) after `import aicsql`; matplotlib loads on the first drawing
        import importlib

        return importlib.import_module("aicsql.plot")
    raise AttributeError(f"module 'aicsql' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_SESSION) | {"plot"})
