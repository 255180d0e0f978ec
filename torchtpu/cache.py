"""The persistent compile cache: compiled XLA programs kept on disk across runs.

A program is looked up on disk when the process has not compiled it yet; a hit
loads the executable (milliseconds) instead of compiling it (tens to hundreds of
milliseconds), so a second run of a script starts fast. Every mode shares it.

Where: ``TORCHTPU_CACHE_DIR`` (default ``~/.cache/torchtpu``, or
``$XDG_CACHE_HOME/torchtpu``), created with owner-only permissions (0700); a
directory other users can write to is refused, since entries are native code.
``TORCHTPU_CACHE=0`` or ``TORCHTPU_CACHE_DIR=""`` disables the cache. The
directory is read when the runtime starts (the first tpu tensor or
:func:`torchtpu.init`); changing the variables afterwards has no effect.

Keys are built from named parts: program (SHA-256 of the StableHLO text),
compile options, plugin file identity, PJRT API version, host CPU features and
torchtpu version; ``TORCHTPU_CACHE_LOG=1`` prints every part on each miss. Each
entry stores its key parts and a SHA-256 of its payload: a corrupt, truncated or
foreign entry is ignored (counted as ``rejected``), recompiled and overwritten.
Concurrent processes may share one directory.
"""

from torchtpu import _C


def info():
    """Describes the persistent cache.

    Returns:
        dict with ``enabled`` (bool), ``dir`` (absolute path, None when
        disabled), ``entries`` (number of stored programs), ``bytes`` (their size
        on disk), and this process's ``hits`` (programs loaded instead of
        compiled), ``misses`` (programs compiled because no usable entry
        existed) and ``rejected`` (entries found but unusable: corrupt,
        truncated, written for another key; also counted in ``misses``).
        The counters are zeroed by :func:`torchtpu.metrics.reset`.
    """
    return dict(_C._cache_info())


def clear():
    """Removes every entry from the cache directory.

    Programs this process already loaded stay in memory and are not recompiled.
    Files in the directory that are not cache entries are left alone.

    Returns:
        int: the number of entries removed (0 when the cache is disabled).
    """
    return int(_C._cache_clear())
