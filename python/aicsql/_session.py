"""The datafusion-python side of aicsql: the compiled module's functions and
catalog registered into sessions. Imported on first use of
:func:`aicsql.context`, :func:`aicsql.register`, ... so that
:mod:`aicsql.spec` (the pure-Python path) imports without DataFusion or the
compiled module."""


from __future__ import annotations

import logging
import os
import threading
import warnings
from pathlib import Path
from typing import Dict, Mapping, Optional, Sequence, Tuple, Union

import datafusion

_SUPPORTED_MAJOR = 55


def _check_datafusion() -> None:
    # Two DataFusion majors on either side of the FFI do not fail cleanly:
    # they crash. Refuse to import instead.
    try:
        major = int(str(datafusion.__version__).split(".")[0])
    except ValueError:  # pragma: no cover - a dev build with an odd version
        return
    if major != _SUPPORTED_MAJOR:
        raise ImportError(
            f"aicsql needs datafusion {_SUPPORTED_MAJOR}.x (its Rust side is built against DataFusion "
            f"{_SUPPORTED_MAJOR}); found datafusion {datafusion.__version__}. "
            f"Install 'datafusion>={_SUPPORTED_MAJOR},<{_SUPPORTED_MAJOR + 1}'."
        )


_check_datafusion()

from datafusion import SessionConfig, SessionContext  # noqa: E402
from datafusion.user_defined import ScalarUDF, TableFunction  # noqa: E402

from aicsql import _internal, default_data_dir  # noqa: E402
from aicsql._internal import Settings  # noqa: E402

if _internal.DATAFUSION_MAJOR != _SUPPORTED_MAJOR:  # pragma: no cover - a broken build
    raise ImportError(
        f"aicsql._internal was built against DataFusion {_internal.DATAFUSION_MAJOR}, "
        f"this package expects {_SUPPORTED_MAJOR}; rebuild it"
    )

__version__ = _internal.__version__

DataDirs = Union[str, os.PathLike, Sequence[Union[str, os.PathLike]], None]
DataOptions = Optional[Mapping[str, str]]

_log = logging.getLogger("aicsql")


def _mirror_log(line: str) -> None:
    # An offline mirror in use is something the caller should see; the
    # per-mirror summary is routine.
    if line.startswith("warning: "):
        warnings.warn(line[len("warning: "):], RuntimeWarning, stacklevel=4)
    else:
        _log.info(line)


def _data_dirs(data: DataDirs, data_options: DataOptions = None) -> list[str]:
    """The local directories to mount for ``data``: paths as given, ``file://``
    URLs as their path, remote trees (``s3://``, ``gs://``, ``http(s)://``)
    mirrored into the cache first, with ``data_options`` for their stores."""
    if data is None:
        roots = [default_data_dir()]
    elif isinstance(data, (str, os.PathLike)):
        roots = [data]
    else:
        roots = list(data)
    texts = [os.fspath(r) for r in roots]
    if any("://" in t for t in texts):
        options = [(str(k), str(v)) for k, v in (data_options or {}).items()]
        texts = [os.fspath(d) for d in _internal.mount_roots(texts, options, os.fspath(default_data_dir()), _mirror_log)]
    for d in texts:
        if not Path(d).is_dir():
            raise FileNotFoundError(
                f"aicsql data directory {d!r} does not exist; fetch the data with "
                f"`aicsql data fetch` (or `cargo run -- data fetch`) or pass data=<dir or URL>"
            )
    return texts


_LIBRARIES: Dict[Tuple[str, ...], "_internal.Library"] = {}
_LIBRARIES_LOCK = threading.Lock()


def _library(dirs: Sequence[str]) -> "_internal.Library":
    """The mounted tree for ``dirs``, shared by every session registered over
    the same directories (tables load once per process), and opened anew
    when a directory changed since (after ``aicsql data fetch``, say), so new
    sessions see new data while existing ones keep theirs."""
    key = tuple(os.path.abspath(d) for d in dirs)
    with _LIBRARIES_LOCK:
        library = _LIBRARIES.get(key)
        if library is None or not library.is_current():
            library = _LIBRARIES[key] = _internal.Library(list(dirs))
        return library


def session_config(config: Optional[SessionConfig] = None, **settings: str) -> SessionConfig:
    """A :class:`SessionConfig` that knows the ``aic.*`` settings.

    Keyword arguments set their initial values, e.g.
    ``session_config(shared_layer="false")``. DataFusion's leaf-expression
    pushdown is turned off (``datafusion.optimizer.enable_leaf_expression_pushdown
    = false``), as in the Rust sessions.
    """
    config = config if config is not None else SessionConfig()
    config = config.with_information_schema(True)
    # As the Rust sessions do: DataFusion 55's leaf-expression pushdown moves a
    # struct field access (e['ttft_ms'] of an estimate_agg) below the query's
    # filter, so rows the filter drops would be priced (and could raise).
    config = config.set("datafusion.optimizer.enable_leaf_expression_pushdown", "false")
    return config.with_extension(Settings({k: str(v) for k, v in settings.items()}))


def context(
    data: DataDirs = None,
    config: Optional[SessionConfig] = None,
    *,
    data_options: DataOptions = None,
    **settings: str,
) -> SessionContext:
    """A new session with the ``aic`` settings, catalog and functions (both
    paths); ``data`` and ``data_options`` as :func:`register` takes them."""
    ctx = SessionContext(session_config(config, **settings))
    register(ctx, data, data_options=data_options)
    return ctx


def register(
    ctx: SessionContext,
    data: DataDirs = None,
    *,
    data_options: DataOptions = None,
    python_path: bool = True,
) -> None:
    """Registers into ``ctx``: the ``aic`` catalog, the Rust functions
    (``gemm_latency``, ``gemm_sol``, ``gemm_trace``, ``step_latency``,
    ``engine_step``, ``estimate_agg``, ``estimate_disagg``, ``estimate_memory``,
    ``search_agg``, ``search_disagg``, ``search_default``, ``search_best``)
    and, unless ``python_path=False``, the Python path (``py_gemm_latency``,
    ``py_gemm_trace``, ``py_step_latency``, ``py_engine_step``,
    ``py_estimate_agg``, ``py_estimate_disagg``, ``py_estimate_memory``,
    ``py_search_agg``, ``py_search_disagg``, ``py_search_default``, ``py_search_recommend``)
    reading the same data.

    ``data`` is one data root or several (default: the cache): a directory,
    ``file://...``, or a remote tree, ``s3://bucket/prefix/``,
    ``gs://bucket/prefix/`` or ``https://host/prefix/`` (whose root holds the
    ``aicsql-manifest.json`` that ``aicsql data manifest DIR`` writes). A
    remote tree is mirrored into the cache first (only changed files), so
    queries do no network I/O; an unreachable store with a complete mirror
    is used offline with a ``RuntimeWarning``. ``data_options`` are its
    store options, named like datafusion-cli's, e.g.
    ``{"aws.region": "eu-west-1", "aws.endpoint": "http://127.0.0.1:9000"}``;
    credentials also come from the standard ``AWS_*`` / ``GOOGLE_*``
    environment. Bad URLs and options raise ``ValueError``, refused
    credentials ``PermissionError``, a missing bucket or prefix
    ``FileNotFoundError``, an unreachable store without a mirror
    ``ConnectionError``.
    """
    dirs = _data_dirs(data, data_options)
    library = _library(dirs)
    ctx.register_catalog_provider("aic", library.catalog())
    for function in library.scalar_functions():
        ctx.register_udf(ScalarUDF.from_pycapsule(function))
    for name, function in library.table_functions():
        ctx.register_udtf(TableFunction(name, function, ctx))
    if python_path:
        from aicsql.spec import functions as spec
        from aicsql.spec import serving

        spec_data = dirs

        def latency(settings, *arrays):
            return spec.gemm_latency_batch(settings, *arrays, data=spec_data)

        def trace(settings, *args):
            return spec.gemm_trace_table(settings, *args, data=spec_data)

        def step(settings, *arrays):
            return spec.step_latency_batch(settings, *arrays, data=spec_data)

        def step_rows(settings, *args):
            return spec.engine_step_table(settings, *args, data=spec_data)

        def agg(settings, *arrays):
            return serving.estimate_agg_batch(settings, *arrays, data=spec_data)

        def disagg(settings, *arrays):
            return serving.estimate_disagg_batch(settings, *arrays, data=spec_data)

        def memory(settings, *arrays):
            return serving.estimate_memory_batch(settings, *arrays, data=spec_data)

        ctx.register_udf(ScalarUDF.from_pycapsule(library.python_scalar("py_gemm_latency", "gemm_latency", latency)))
        ctx.register_udf(ScalarUDF.from_pycapsule(library.python_scalar("py_step_latency", "step_latency", step)))
        ctx.register_udf(ScalarUDF.from_pycapsule(library.python_scalar("py_estimate_agg", "estimate_agg", agg)))
        ctx.register_udf(ScalarUDF.from_pycapsule(library.python_scalar("py_estimate_disagg", "estimate_disagg", disagg)))
        ctx.register_udf(ScalarUDF.from_pycapsule(library.python_scalar("py_estimate_memory", "estimate_memory", memory)))
        ctx.register_udtf(TableFunction("py_gemm_trace", library.python_table_function("py_gemm_trace", "gemm_trace", trace), ctx))
        ctx.register_udtf(
            TableFunction("py_engine_step", library.python_table_function("py_engine_step", "engine_step", step_rows), ctx)
        )
        from aicsql.spec import search

        for name, like, table in (
            ("py_search_agg", "search_agg", search.search_agg_table),
            ("py_search_disagg", "search_disagg", search.search_disagg_table),
            ("py_search_default", "search_default", search.search_default_table),
            ("py_search_recommend", "search_recommend", search.search_recommend_table),
        ):
            function = lambda settings, *args, _table=table: _table(settings, *args, data=spec_data)  # noqa: E731
            ctx.register_udtf(TableFunction(name, library.python_table_function(name, like, function), ctx))
