"""Writing a local file whole or not at all: the one temp-file-and-rename of planet_sac's outputs.

    with atomic_open("scores/x.json.gz", "wb") as file:   # or atomic_path(...) as temp: a path for any library
        file.write(data)
    # here scores/x.json.gz is the new file; had the block raised (or the process died), it would be the old one

Used for the files a reader may open while a run writes them or after it is killed: the suite's score file and
`result.json`, `evaluate --json` and `bench --json`, bench/learning.py's evaluation file, videos. Episodes
(`episodes.storage`), checkpoints and the metrics log keep their own `tf.io.gfile` renames, which also reach remote
filesystems.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterator
from typing import IO


@contextlib.contextmanager
def atomic_path(path: str) -> Iterator[str]:
    """Yields a temporary path beside `path` to write to; renames it over `path` when the block ends cleanly.

    :param path: the local file to (re)write; its folder is created if missing.
    :return: (yielded) a hidden path in the same folder with the same extension (libraries that choose the format
        by extension, such as imageio, write the same bytes), unique per call, so concurrent writers never share it.
    Guarantees: a reader of `path` sees the old file or the whole new one, never part of either (`os.replace` on
    one filesystem); if the block raises, the temporary file is removed, `path` is left as it was, and the
    exception propagates. A killed process may leave a hidden `.<name>.<hex>.partial<ext>` file, never a torn
    `path`.
    """
    folder, name = os.path.split(path)
    os.makedirs(folder or ".", exist_ok=True)
    stem, extension = os.path.splitext(name)
    temp = os.path.join(folder, f".{stem}.{uuid.uuid4().hex[:12]}.partial{extension}")
    try:
        yield temp
        os.replace(temp, path)
    except BaseException:
        if os.path.exists(temp):
            os.remove(temp)
        raise


@contextlib.contextmanager
def atomic_open(path: str, mode: str = "w") -> Iterator[IO]:
    """`open(path, mode)` for writing, with `atomic_path`'s guarantees: the file is closed, then renamed over `path`.

    :param mode: a writing mode, "w" (text) or "wb" (bytes).
    """
    with atomic_path(path) as temp, open(temp, mode) as file:
        yield file
