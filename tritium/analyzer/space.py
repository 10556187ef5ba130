"""The configuration space ``tritium-analyzer`` searches, and the ``config.pbtxt`` of each candidate.

A candidate sets what Triton's Model Analyzer searches: the instance count
(``instance_group``), and for a model that batches (``max_batch_size`` > 0
in its config) whether the dynamic batcher is on, its ``max_batch_size``,
preferred batch sizes and ``max_queue_delay_microseconds``. The client
concurrency is swept for each candidate. Everything else of the model's
config is kept as it is.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from google.protobuf import text_format

from ..core.model_config.parser import read_config_file
from ..proto import model_config_pb2 as mc
from .config_edit import edit_config_text

__all__ = [
    "Candidate",
    "Space",
    "QUICK",
    "FULL",
    "candidates",
    "candidate_config",
    "candidate_text",
    "base_config",
    "config_text",
]


@dataclass(frozen=True, slots=True)
class Candidate:
    """One model configuration to measure.

    :ivar instances: model instances (``instance_group.count``).
    :ivar max_batch_size: the config's ``max_batch_size`` (0: the model does not batch).
    :ivar batcher: the dynamic batcher is on.
    :ivar preferred: its ``preferred_batch_size`` list.
    :ivar queue_delay_us: its ``max_queue_delay_microseconds``.
    """

    instances: int
    max_batch_size: int = 0
    batcher: bool = False
    preferred: tuple[int, ...] = ()
    queue_delay_us: int = 0

    @property
    def label(self) -> str:
        """A short name: ``i2`` (2 instances, no batcher), ``i2 dyn b8 pref8 500us``."""
        text = f"i{self.instances}"
        if self.batcher:
            pref = f" pref{'/'.join(map(str, self.preferred))}" if self.preferred else ""
            text += f" dyn b{self.max_batch_size}{pref} {self.queue_delay_us}us"
        return text

    @property
    def slug(self) -> str:
        """The label as a folder name."""
        return self.label.replace(" ", "_").replace("/", "-")


@dataclass(frozen=True, slots=True)
class Space:
    """The values searched (each list is tried in full, crossed with the others)."""

    instances: tuple[int, ...]
    max_batch_sizes: tuple[int, ...]
    queue_delays_us: tuple[int, ...]
    preferred: bool  # also try preferred_batch_size = [max_batch_size]
    concurrency: tuple[int, ...]
    measurement_ms: int
    halve_batch: bool = False  # with no max_batch_sizes given: also half the config's own
    without_batcher: bool = True  # also measure the model with the dynamic batcher off

    @property
    def run_timeout_s(self) -> float:
        """The longest one perf_analyzer run may take, seconds: its windows (at most 3 trials,
        each window possibly stretched by slow requests) with room for start-up on a busy machine.
        A run past it is reported as that candidate's error, with the server's state."""
        return 90.0 + 20 * 3 * self.measurement_ms / 1000


#: --quick: a few configurations, short measurement windows (CI; about a minute on add_sub)
QUICK = Space(
    instances=(1, 2),
    max_batch_sizes=(),
    queue_delays_us=(100,),
    preferred=False,
    concurrency=(1, 4),
    measurement_ms=500,
)
#: the default (full) search
FULL = Space(
    instances=(1, 2, 4),
    max_batch_sizes=(),
    queue_delays_us=(0, 500, 2000),
    preferred=True,
    concurrency=(1, 2, 4, 8, 16),
    measurement_ms=3000,
    halve_batch=True,
)


def base_config(model_dir: Path) -> mc.ModelConfig:
    """The model's ``config.pbtxt`` (an empty config named after the folder when there is none).

    :raises TritonError: INVALID_ARG when the file does not parse.
    """
    path = model_dir / "config.pbtxt"
    if path.exists():
        return read_config_file(path)
    config = mc.ModelConfig()
    config.name = model_dir.name
    return config


def candidates(config: mc.ModelConfig, space: Space) -> list[Candidate]:
    """The candidates for ``config`` in ``space``, in the order they are measured.

    A model with ``max_batch_size`` 0 is searched over instance counts only.
    The ``max_batch_size`` values are ``space.max_batch_sizes`` (default: the
    config's own and, with ``halve_batch``, half of it), never above the
    config's own (the model says how much it takes).
    """
    top = config.max_batch_size
    out: list[Candidate] = []
    for n in space.instances:
        if top <= 0:
            out.append(Candidate(n))
            continue
        if space.without_batcher:
            out.append(Candidate(n, top))
        sizes = space.max_batch_sizes or ((top, top // 2) if space.halve_batch else (top,))
        for size in sorted({s for s in sizes if 0 < s <= top}, reverse=True):
            for delay in space.queue_delays_us:
                out.append(Candidate(n, size, True, (), delay))
                if space.preferred and size > 1:
                    out.append(Candidate(n, size, True, (size,), delay))
    return out


def candidate_config(config: mc.ModelConfig, candidate: Candidate) -> mc.ModelConfig:
    """``config`` with the candidate's instance group and batching settings.

    The first instance group's ``kind`` (and ``gpus``) is kept; the other groups are dropped
    (no group: ``KIND_AUTO``, as the server would choose).
    """
    out = mc.ModelConfig()
    out.CopyFrom(config)
    group = mc.ModelInstanceGroup()
    if config.instance_group:  # else KIND_AUTO: the server picks CPU or GPU as it would
        group.CopyFrom(config.instance_group[0])
        group.ClearField("name")
    group.count = candidate.instances
    out.ClearField("instance_group")
    out.instance_group.append(group)
    if candidate.max_batch_size:
        out.max_batch_size = candidate.max_batch_size
    if candidate.batcher:
        out.dynamic_batching.preferred_batch_size[:] = list(candidate.preferred)
        out.dynamic_batching.max_queue_delay_microseconds = candidate.queue_delay_us
    else:
        out.ClearField("dynamic_batching")
    return out


def config_text(config: mc.ModelConfig) -> str:
    """``config.pbtxt`` text (protobuf text format)."""
    return text_format.MessageToString(config)


def candidate_text(model_dir: Path, candidate: Candidate) -> str:
    """The candidate's ``config.pbtxt`` text: an edit of the model's own file (its comments, field
    order and layout kept; only the fields the candidate sets differ), or protobuf's rendering
    when the model has no ``config.pbtxt``.

    :raises TritonError: INVALID_ARG when the file does not parse.
    """
    config = base_config(model_dir)
    wanted = candidate_config(config, candidate)
    path = model_dir / "config.pbtxt"
    if not path.exists():
        return config_text(wanted)
    return edit_config_text(path.read_text(encoding="utf-8"), config, wanted)
