"""The verdict layer: one verdict per variant (parity with its confidence, speed), read by every front end."""

from shrinkray.measure.parity import over_limit  # the wording of a severity, kept beside it (auto words its tries too)
from shrinkray.verdict.parity_verdict import (
    ERROR,
    UNMEASURED,
    OutputVerdict,
    Verdict,
    parity_verdict,
    verdict_of,
)

__all__ = ["ERROR", "UNMEASURED", "OutputVerdict", "Verdict", "over_limit", "parity_verdict", "verdict_of"]
