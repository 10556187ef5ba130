"""``tritium-analyzer``: a configuration search for one model, in the spirit of Triton's Model Analyzer.

:mod:`.space` (the candidates and their ``config.pbtxt``), :mod:`.run`
(a tritium-server per candidate, perf_analyzer against it), :mod:`.report`
(constraints, the best configuration, HTML and PNG plots), :mod:`.cli`
(the command line). Needs the ``analyzer`` extra (matplotlib, tritonclient's
perf_analyzer, the CUDA runtime library it links against).
"""

from __future__ import annotations

from .report import Choice, Constraints, choose
from .space import Candidate, Space, candidate_config, candidates

__all__ = ["Candidate", "Space", "Constraints", "Choice", "choose", "candidates", "candidate_config"]
