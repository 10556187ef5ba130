"""Repository agents (``model_repository_agents``): Triton's ``checksum`` agent, and a refusal for any other.

Triton runs each agent named in a model's config before it loads the model
(``TRITONREPOAGENT_ACTION_LOAD``); an agent's error fails the load. tritium
has the one agent NVIDIA ships, ``checksum``
(triton-inference-server/checksum_repository_agent): each parameter
``<algorithm>:<file path relative to the model folder>`` -> expected hex digest,
MD5 the only algorithm. Its messages are the agent's. Any other agent name is
refused, since Triton would run code tritium does not have.

Runs in a worker thread of the core (it reads whole files).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from ...proto import model_config_pb2 as mc
from ..errors import Code, TritonError
from .paths import check_relative_file, safe_join

__all__ = ["run_repository_agents", "CHECKSUM_AGENT"]

CHECKSUM_AGENT = "checksum"
_CHUNK = 1 << 20


def _file_md5(path: Path) -> str:
    digest = hashlib.md5(usedforsecurity=False)
    with path.open("rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _checksum(model_path: Path, parameters: dict[str, str]) -> None:
    for key, expected in parameters.items():
        algorithm, sep, relative = key.partition(":")
        if not sep:
            raise TritonError(Code.INVALID_ARG, f"failed to parse key: {key}")
        if algorithm.lower() != "md5":
            raise TritonError(Code.UNSUPPORTED, f"Unsupported checksum algorithm: {algorithm}")
        check_relative_file(model_path, relative, "checksum agent file")
        path = safe_join(model_path, relative, what="checksum agent file")
        try:
            got = _file_md5(Path(path))
        except OSError as exc:
            raise TritonError(
                Code.INVALID_ARG, f"failed to open text file for read {relative}: {exc.strerror}"
            ) from None
        if got != expected:
            raise TritonError(
                Code.INVALID_ARG, f"Mismatched MD5 hash for file {relative}, expect: {expected}, got: {got}"
            )


def run_repository_agents(config: mc.ModelConfig, model_path: Path) -> None:
    """Run the config's repository agents, in order, before the model loads (Triton's LOAD action).

    :param model_path: the model's folder (the checksum agent's paths are relative to it
        and may not leave it).
    :raises TritonError: the checksum agent's error (INVALID_ARG ``Mismatched MD5 hash for
        file <f>, expect: <e>, got: <g>``, ``failed to open text file for read <f>: <why>``,
        ``failed to parse key: <k>``; UNSUPPORTED ``Unsupported checksum algorithm: <a>``);
        NOT_FOUND for an agent other than ``checksum``.
    """
    for agent in config.model_repository_agents.agents:
        if agent.name != CHECKSUM_AGENT:
            raise TritonError(
                Code.NOT_FOUND,
                f"unable to find 'libtritonrepoagent_{agent.name}.so' for repo agent '{agent.name}': tritium has "
                f"only the '{CHECKSUM_AGENT}' repository agent",
            )
        _checksum(model_path, dict(agent.parameters))
