"""One inference, stopped when it runs past its deadline.

A 1.4 KB model whose Loop runs 10^12 times held its worker until the whole job's limit (600 s) and showed
"Running the original on its inputs" all that time. ONNX Runtime stops a run cleanly when its
``RunOptions.terminate`` is set from another thread: a timer sets it after ``max_inference_seconds``, and
the caller gets one sentence naming that limit instead of a job that only ends at the job's cap.
"""

from __future__ import annotations

import threading
from typing import Any

from shrinkray.errors import DeadlineExceededError
from shrinkray.io.limits import Limits


class _Deadline:
    """Sets ``options.terminate`` when the time is up (a timer thread), and remembers that it did."""

    def __init__(self, options: Any, seconds: float) -> None:
        self.options = options
        self.hit = False
        self.timer = threading.Timer(seconds, self._stop)
        self.timer.daemon = True

    def _stop(self) -> None:
        self.hit = True
        self.options.terminate = True


def run_within(session: Any, feeds: dict[str, Any], seconds: float | None = None, names: list[str] | None = None,
               what: str = "One inference") -> list:  # fmt: skip
    """``session.run(names, feeds)``, stopped after ``seconds`` (default: the ``max_inference_seconds`` limit)
    with a DeadlineExceededError (a LimitExceededError); any other error of the run is raised as ONNX Runtime
    raised it. ``what``: the sentence's subject ("One calibration run")."""
    import onnxruntime as ort  # at call time: readers of results import the method registry, never ONNX Runtime

    limits = Limits.from_env()
    seconds = limits.max_inference_seconds if seconds is None else seconds
    options = ort.RunOptions()
    deadline = _Deadline(options, seconds)
    deadline.timer.start()
    try:
        return session.run(names, feeds, options)
    except Exception:
        if deadline.hit:
            limit = limits.exceeded(
                "max_inference_seconds",
                f"{what} took longer than {seconds:g} s and was stopped (the model may loop for ever, or be far "
                "too slow, on these inputs)",
                "Try smaller inputs (batch, sequence, image size), or raise the limit",
            )
            raise DeadlineExceededError(limit.problem, limit.hint, limit.setting) from None
        raise
    finally:
        deadline.timer.cancel()
