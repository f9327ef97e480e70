"""One exception family for everything a user can get wrong.

Every error carries two parts: what is wrong and what to do about it. The CLI
and the app print ``str(error)`` as one line; nothing else is shown unless the
user asks for a traceback (``--debug``).
"""

from __future__ import annotations


class ShrinkRayError(Exception):
    """Base class: a problem the user can act on."""

    def __init__(self, problem: str, hint: str = "", setting: str = "") -> None:
        self.problem = problem.rstrip(". ")
        self.hint = hint.rstrip(". ")
        self.setting = setting  # which setting fixes it ("inputs", "dims"...): each front end words its own
        super().__init__(str(self))

    def __reduce__(self):
        """Pickle with every part (errors travel back from the capped worker process)."""
        return (self.__class__, (self.problem, self.hint, self.setting))

    def __str__(self) -> str:
        if self.hint:
            return f"{self.problem}. {self.hint}."
        return f"{self.problem}."


class MissingModelError(ShrinkRayError):
    """The file the user named does not exist."""


class ModelLoadError(ShrinkRayError):
    """The bytes are not a readable ONNX model (empty, truncated, not protobuf...)."""


#: The setting a refused archive of several models names: which of its models to load (each front end words it:
#: the CLI as ``--member``, the app as a choice of the archive's models).
CHOOSE_MODEL_SETTING = "choose_model"


class SeveralModels(ModelLoadError):
    """An archive (a transformers.js folder zipped, an encoder and a decoder) holds several models and none was
    chosen: ``choices`` are their paths inside it, for a front end to offer."""

    def __init__(self, problem: str, hint: str = "", setting: str = CHOOSE_MODEL_SETTING,
                 choices: tuple[str, ...] = ()) -> None:  # fmt: skip
        super().__init__(problem, hint, setting)
        self.choices = tuple(choices)

    def __reduce__(self):
        return (self.__class__, (self.problem, self.hint, self.setting, self.choices))


class InvalidModelError(ShrinkRayError):
    """The model parses but is not valid ONNX (checker failure, bad opset...)."""


class RuntimeUnsupportedError(ShrinkRayError):
    """ONNX Runtime cannot open or run the model on this machine."""


class UnsafeModelError(ShrinkRayError):
    """The model asks for something we refuse to do (e.g. external data outside its folder)."""


class LimitExceededError(ShrinkRayError):
    """A configured resource limit was hit."""


class DeadlineExceededError(LimitExceededError):
    """One inference ran past its deadline (``max_inference_seconds``) and was stopped: the model cannot be run
    here, so no step falls back past it (calibration does not go on data-free, a search does not go on)."""


class MethodError(ShrinkRayError):
    """A shrinking method cannot be applied with these options, or failed."""


class OptionError(ShrinkRayError):
    """An option value is out of range or of the wrong kind."""


class OutputExistsError(ShrinkRayError):
    """Writing would overwrite the input or an existing file."""


class WriteError(ShrinkRayError):
    """The operating system refused a write (read-only folder, full disk, not a writable place)."""
