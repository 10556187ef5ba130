#!/usr/bin/env python3
"""Compose a custom tritium server from pip-installable parts: chosen backends + endpoints.

In the spirit of Triton's ``compose.py``/``build.py``, but without pulling whole
images: the output folder (``--output-dir``, default ``build/``) is a build
context holding

- ``Dockerfile``: multi-stage (a builder stage installs the wheelhouse offline
  into ``/opt/tritium``; a slim runtime stage copies it), non-root user,
  ``EXPOSE`` of the chosen endpoints' ports, a ``HEALTHCHECK`` on
  ``/v2/health/ready``, labels with the version and the chosen parts;
- ``wheelhouse/``: a wheel of tritium built from this source tree and of every
  dependency of the chosen parts, with ``requirements.txt`` pinning each one by
  version and hash (``pip install --no-index --require-hashes`` installs it offline);
- ``plugins.toml``: only the chosen endpoints, and a ``[backends]`` table naming
  the chosen backends (a composed server refuses models of other backends);
- ``backends/``: only the chosen backends.

Parts are discovered, never listed here: built-in backends are the folders of
``backends/`` holding a ``libtriton_<name>`` library; endpoints are the
``tritium.frontends`` entry points (this source tree's ``pyproject.toml`` and
installed third-party packages; without ``--endpoint``, all but those the source tree's
``plugins.toml`` leaves off, such as ``openai``). A part's Python dependencies are the
``pyproject.toml`` extra of the same name (``<name>-gpu`` with ``--enable-gpu``,
plus the ``gpu`` extra); a third-party backend folder (``--backend ./mybackend``)
brings its own ``requirements.txt`` or ``pyproject.toml`` dependencies.

Versions are pinned to the ones installed in the environment running this
script (the versions its tests ran with); a dependency not installed here is
resolved by pip when the wheelhouse is built. The wheelhouse targets this
interpreter's Python version and platform, so the base image must have the
same Python (the default ``python:<major>.<minor>-slim`` does).

Examples::

    python build.py --backend onnxruntime --endpoint http --dry-run
    python build.py --backend onnxruntime --backend python --build
    python build.py --backend onnxruntime --endpoint http --install-dir /opt/tritium
    python build.py --backend python --endpoint http --endpoint openai --dry-run
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata as md
import json
import os
import shutil
import subprocess
import sys
import tempfile
import tomllib
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

try:
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name, parse_wheel_filename
except ImportError:  # pragma: no cover - pip vendors packaging
    from pip._vendor.packaging.requirements import Requirement  # type: ignore[no-redef]
    from pip._vendor.packaging.utils import canonicalize_name, parse_wheel_filename  # type: ignore[no-redef]

ROOT = Path(__file__).resolve().parent
#: the well-known ports of the built-in endpoints (tritonserver's defaults)
PORTS = {"http": 8000, "grpc": 8001, "metrics": 8002, "openai": 9000, "sagemaker": 8080, "vertex_ai": 8080}
PREFIX = "/opt/tritium"
MIB = 1024 * 1024


class BuildError(Exception):
    """A build that cannot go on; the message says why and what to do."""


# -- parts -----------------------------------------------------------------------------------
@dataclass(slots=True)
class Part:
    """A backend or an endpoint chosen for the server.

    :ivar kind: ``"backend"`` or ``"endpoint"``.
    :ivar source: a backend's folder (copied to ``backends/<name>``); an endpoint's module.
    :ivar requirements: its Python requirements (PEP 508 strings).
    :ivar builtin: part of this source tree (else a third-party folder or package).
    :ivar given: a third-party backend's path as given on the command line.
    """

    kind: str
    name: str
    source: str
    requirements: list[str] = field(default_factory=list)
    builtin: bool = True
    given: str = ""


def _pyproject(root: Path) -> dict:
    return tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))


def _library_name(folder: Path) -> str | None:
    """``X`` for a folder holding ``libtriton_X.py``, ``libtriton_X/`` or ``libtriton_X.so``."""
    if folder.name.startswith("libtriton_") and (folder / "__init__.py").is_file():
        return folder.name[len("libtriton_") :]
    names = sorted(p.name for p in folder.glob("libtriton_*"))
    for name in names:
        stem = name.split(".", 1)[0][len("libtriton_") :]
        if stem == folder.name or len(names) == 1:
            return stem
    return None


def builtin_backends(root: Path = ROOT) -> dict[str, Path]:
    """The backends shipped in ``<root>/backends``: name -> folder."""
    found = {}
    for folder in sorted((root / "backends").iterdir()):
        if folder.is_dir() and _library_name(folder) == folder.name:
            found[folder.name] = folder
    return found


def endpoints(root: Path = ROOT) -> dict[str, tuple[str, str | None]]:
    """Endpoint name -> (module, the requirement of the distribution providing it or None for tritium)."""
    found: dict[str, tuple[str, str | None]] = {}
    for name, module in _pyproject(root)["project"].get("entry-points", {}).get("tritium.frontends", {}).items():
        found[name] = (module, None)
    for ep in md.entry_points(group="tritium.frontends"):
        dist = ep.dist
        if ep.name in found or dist is None or canonicalize_name(dist.metadata["Name"]) == "tritium":
            continue
        found[ep.name] = (ep.value, f"{dist.metadata['Name']}=={dist.version}")
    return found


def default_endpoints(root: Path = ROOT) -> list[str]:
    """The endpoints composed when no ``--endpoint`` is given: every one but those that the source
    tree's ``plugins.toml`` leaves off by default (``enabled = false``, e.g. ``openai``)."""
    plugins = root / "plugins.toml"
    tables = tomllib.loads(plugins.read_text(encoding="utf-8")).get("frontends", {}) if plugins.is_file() else {}
    return [name for name in endpoints(root) if (tables.get(name) or {}).get("enabled", True)]


def _extra(pyproject: dict, name: str, gpu: bool) -> list[str]:
    extras = pyproject["project"].get("optional-dependencies", {})
    if gpu and f"{name}-gpu" in extras:
        return list(extras[f"{name}-gpu"])
    return list(extras.get(name, []))


def _folder_requirements(folder: Path) -> list[str]:
    if (folder / "pyproject.toml").is_file():
        return list(_pyproject(folder).get("project", {}).get("dependencies", []))
    req = folder / "requirements.txt"
    if req.is_file():
        lines = (line.split("#", 1)[0].strip() for line in req.read_text(encoding="utf-8").splitlines())
        return [line for line in lines if line]
    return []


def choose_backend(spec: str, pyproject: dict, gpu: bool, root: Path = ROOT) -> Part:
    """A ``--backend`` value: a built-in name, or a path to a backend folder or package.

    :raises BuildError: for an unknown name or a folder without a ``libtriton_<name>`` library.
    """
    builtins = builtin_backends(root)
    if spec in builtins:
        return Part("backend", spec, str(builtins[spec]), _extra(pyproject, spec, gpu))
    path = Path(spec).expanduser()
    if not path.is_dir():
        raise BuildError(
            f"unknown backend '{spec}': not a built-in backend ({', '.join(builtins)}) "
            "and not a folder holding a libtriton_<name> library"
        )
    name = _library_name(path.resolve())
    if name is None:
        raise BuildError(
            f"backend folder {path} holds no libtriton_<name>.py, libtriton_<name>/ or libtriton_<name>.so"
        )
    if name in builtins:
        raise BuildError(f"backend folder {path} provides '{name}', which is the name of a built-in backend")
    requirements = _folder_requirements(path)
    if _native(path):  # the C shim that hosts it is built with cffi
        requirements += _extra(pyproject, "native", False)
    return Part("backend", name, str(path.resolve()), requirements, builtin=False, given=spec)


def _native(folder: Path) -> bool:
    """Whether a backend folder holds a native library (``libtriton_<name>.so``)."""
    return any(folder.glob("libtriton_*.so"))


def choose_endpoint(name: str, pyproject: dict, gpu: bool, root: Path = ROOT) -> Part:
    """An ``--endpoint`` value: a ``tritium.frontends`` entry-point name.

    :raises BuildError: for a name no installed package or this source tree provides.
    """
    known = endpoints(root)
    if name not in known:
        raise BuildError(f"unknown endpoint '{name}' (available: {', '.join(known)})")
    module, dist = known[name]
    reqs = _extra(pyproject, name, gpu) + ([dist] if dist else [])
    return Part("endpoint", name, module, reqs, builtin=dist is None)


# -- pins --------------------------------------------------------------------------------------
@dataclass(slots=True)
class Pin:
    """A distribution going into the wheelhouse: version, installed size here, and who needs it."""

    name: str
    version: str | None
    size: int | None
    via: str


def _installed(site: Path | None) -> dict[str, md.Distribution]:
    dists = md.distributions(path=[str(site)]) if site else md.distributions()
    found: dict[str, md.Distribution] = {}
    for dist in dists:
        found.setdefault(canonicalize_name(dist.metadata["Name"]), dist)
    return found


def _size(dist: md.Distribution) -> int:
    return sum(f.size or 0 for f in dist.files or [])


def resolve(roots: list[tuple[str, str]], site: Path | None = None) -> tuple[list[Pin], list[Pin]]:
    """Walk the requirements through the installed distributions.

    :param roots: ``(requirement, who needs it)`` pairs.
    :param site: a folder of ``*.dist-info`` to read instead of this interpreter's environment.
    :returns: (pinned: installed here in a matching version, unpinned: left to pip), sorted by name.
    """
    installed = _installed(site)
    pins: dict[str, Pin] = {}
    loose: dict[str, Pin] = {}
    seen: set[tuple[str, frozenset[str]]] = set()
    queue = deque((Requirement(text), via) for text, via in roots)
    while queue:
        req, via = queue.popleft()
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        key = canonicalize_name(req.name)
        if (key, frozenset(req.extras)) in seen:
            continue
        seen.add((key, frozenset(req.extras)))
        dist = installed.get(key)
        if dist is None or (req.specifier and not req.specifier.contains(dist.version, prereleases=True)):
            if key not in pins:
                loose.setdefault(key, Pin(str(req), None, None, via))
            continue
        loose.pop(key, None)
        pins.setdefault(key, Pin(dist.metadata["Name"], dist.version, _size(dist), via))
        for text in dist.requires or []:
            sub = Requirement(text)
            wanted = {""} | set(req.extras)
            if sub.marker is None or any(sub.marker.evaluate({"extra": e}) for e in wanted):
                sub.marker = None
                queue.append((sub, dist.metadata["Name"]))
    return sorted(pins.values(), key=lambda p: p.name.lower()), sorted(loose.values(), key=lambda p: p.name.lower())


# -- the plan --------------------------------------------------------------------------------
@dataclass(slots=True)
class Plan:
    """Everything a build puts in: parts, pinned distributions, image settings."""

    version: str
    backends: list[Part]
    endpoints: list[Part]
    pins: list[Pin]
    unpinned: list[Pin]
    base_image: str
    image_name: str
    gpu: bool
    python: str

    @property
    def requirements(self) -> list[str]:
        """Requirements beyond tritium's own, from the chosen parts."""
        return [r for part in self.backends + self.endpoints for r in part.requirements]


def make_plan(args: argparse.Namespace, root: Path = ROOT) -> Plan:
    """Choose the parts and pin their dependencies.

    :raises BuildError: for unknown parts or no backend chosen.
    """
    pyproject = _pyproject(root)
    project = pyproject["project"]
    if not args.backend:
        raise BuildError(f"choose at least one --backend (built-in: {', '.join(builtin_backends(root))}, or a folder)")
    backends = [choose_backend(b, pyproject, args.enable_gpu, root) for b in dict.fromkeys(args.backend)]
    names = args.endpoint or default_endpoints(root)
    chosen_endpoints = [choose_endpoint(e, pyproject, args.enable_gpu, root) for e in dict.fromkeys(names)]
    if len({b.name for b in backends}) != len(backends):
        raise BuildError("two --backend values provide the same backend name")
    roots = [(r, "tritium") for r in project.get("dependencies", [])]
    if args.enable_gpu:
        roots += [(r, "--enable-gpu") for r in _extra(pyproject, "gpu", False)]
    roots += [(r, f"{p.kind} {p.name}") for p in backends + chosen_endpoints for r in p.requirements]
    pins, unpinned = resolve(roots, args.site_packages)
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    version = project["version"]
    return Plan(
        version=version,
        backends=backends,
        endpoints=chosen_endpoints,
        pins=pins,
        unpinned=unpinned,
        base_image=args.base_image or f"python:{python}-slim",
        image_name=args.image_name or f"tritium:{version}-custom",
        gpu=args.enable_gpu,
        python=python,
    )


def _mib(size: int | None) -> str:
    if size is None:
        return "?"
    return f"{size / MIB:.1f} MiB" if size >= MIB else f"{size // 1024} KiB"


def render_plan(plan: Plan, output: str) -> str:
    """The ``--dry-run`` report: parts, pinned distributions with sizes, files written."""
    lines = [
        f"tritium {plan.version}: build plan",
        f"  image          {plan.image_name}",
        f"  base image     {plan.base_image} ({'GPU' if plan.gpu else 'CPU'}; wheels for Python {plan.python})",
        f"  output         {output}",
        "  backends       " + ", ".join(f"{b.name} ({'built-in' if b.builtin else b.given})" for b in plan.backends),
        "  endpoints      " + ", ".join(f"{e.name} ({e.source})" for e in plan.endpoints),
        "",
        "Python distributions (versions of this environment; wheelhouse/requirements.txt pins them with hashes):",
        f"  {'name':<28}{'version':<16}{'installed size':>15}   needed by",
        f"  {'tritium':<28}{plan.version:<16}{'(source tree)':>15}   -",
    ]
    for pin in plan.pins:
        lines.append(f"  {pin.name:<28}{pin.version:<16}{_mib(pin.size):>15}   {pin.via}")
    total = sum(p.size or 0 for p in plan.pins)
    lines.append(f"  {'total (dependencies)':<44}{_mib(total):>15}")
    if plan.unpinned:
        lines += ["", "Not installed here (pip resolves them when the wheelhouse is built):"]
        lines += [f"  {pin.name:<44}{'?':>15}   {pin.via}" for pin in plan.unpinned]
    lines += [
        "",
        "Files:",
        f"  {output}/Dockerfile",
        f"  {output}/plugins.toml",
        *(f"  {output}/backends/{b.name}/" for b in plan.backends),
        f"  {output}/wheelhouse/ (tritium + {len(plan.pins) + len(plan.unpinned)} dependencies, requirements.txt)",
    ]
    return "\n".join(lines) + "\n"


def render_plugins(plan: Plan) -> str:
    """``plugins.toml`` of the composed server: chosen endpoints and backends only."""
    lines = [
        f"# Composed by tritium {plan.version} build.py: only these endpoints and backends.",
        "# A model whose backend is not listed in [backends] is refused.",
        "",
        "[backends]",
        "enabled = [" + ", ".join(json.dumps(b.name) for b in plan.backends) + "]",  # JSON strings are TOML's
        'directory = "backends"',
    ]
    for part in plan.endpoints:
        lines += ["", f"[frontends.{part.name}]", "enabled = true"]
        if not part.builtin:
            lines.append(f"module = {json.dumps(part.source)}")
    return "\n".join(lines) + "\n"


def _healthcheck(plan: Plan) -> str:
    names = {e.name for e in plan.endpoints}
    if "http" in names:
        probe = (
            "import sys, urllib.request; "
            f"sys.exit(urllib.request.urlopen('http://127.0.0.1:{PORTS['http']}/v2/health/ready', timeout=3).status != 200)"
        )
    elif "grpc" in names:
        probe = (
            "import sys, grpc; from tritium.proto import grpc_service_pb2 as pb, grpc_service_pb2_grpc as rpc; "
            f"stub = rpc.GRPCInferenceServiceStub(grpc.insecure_channel('127.0.0.1:{PORTS['grpc']}')); "
            "sys.exit(not stub.ServerReady(pb.ServerReadyRequest(), timeout=3).ready)"
        )
    elif "openai" in names:
        probe = (
            "import sys, urllib.request; "
            f"sys.exit(urllib.request.urlopen('http://127.0.0.1:{PORTS['openai']}/health/ready', timeout=3).status != 200)"
        )
    else:
        return "HEALTHCHECK NONE"
    return (
        f'HEALTHCHECK --interval=15s --timeout=5s --start-period=120s --retries=3 \\\n  CMD ["python", "-c", "{probe}"]'
    )


def render_dockerfile(plan: Plan) -> str:
    """The multi-stage Dockerfile of the build context."""
    backends = ",".join(b.name for b in plan.backends)
    names = ",".join(e.name for e in plan.endpoints)
    ports = " ".join(sorted({str(PORTS[e.name]) for e in plan.endpoints if e.name in PORTS}, key=int))
    gpu_env = "ENV NVIDIA_VISIBLE_DEVICES=all NVIDIA_DRIVER_CAPABILITIES=compute,utility\n" if plan.gpu else ""
    packages, why = [], []
    if any(not b.builtin and _native(Path(b.source)) for b in plan.backends):
        packages += ["gcc", "libc6-dev"]
        why.append("# a native backend: the C shim that hosts it is compiled (cffi) where it first loads\n")
    if "grpc" in names.split(","):
        packages.append("libgrpc++1.51")
        why.append("# the gRPC endpoint's native transport (built on this host against Debian 12's libgrpc++-dev)\n")
    compiler = (
        ""
        if not packages
        else (
            "".join(why) + "# hadolint ignore=DL3008\n"
            f"RUN apt-get update && apt-get install -y --no-install-recommends {' '.join(packages)} \\\n"
            " && rm -rf /var/lib/apt/lists/*\n"
        )
    )
    return f"""\
# Composed by tritium {plan.version} build.py: backends {backends}; endpoints {names}; {"GPU" if plan.gpu else "CPU"}.
# Build: docker build -t {plan.image_name} .   (podman build / buildah build work the same)
ARG BASE_IMAGE={plan.base_image}

# builder: install the wheelhouse offline (pinned, hash-checked) into a virtual environment
FROM ${{BASE_IMAGE}} AS builder
COPY wheelhouse/ /tmp/wheelhouse/
# (the base image's pip installs into it: the environment itself carries no pip; needs pip >= 22.3)
RUN python -m venv --without-pip {PREFIX} \\
 && python -m pip --python {PREFIX}/bin/python install --no-cache-dir --no-index \\
      --find-links=/tmp/wheelhouse --require-hashes -r /tmp/wheelhouse/requirements.txt
COPY plugins.toml {PREFIX}/share/tritium/plugins.toml
COPY backends/ {PREFIX}/share/tritium/backends/

# runtime: the base image, the environment, a non-root user
FROM ${{BASE_IMAGE}} AS runtime
LABEL org.opencontainers.image.title="tritium" \\
      org.opencontainers.image.description="tritium inference server composed by build.py" \\
      org.opencontainers.image.version="{plan.version}" \\
      io.tritium.version="{plan.version}" \\
      io.tritium.backends="{backends}" \\
      io.tritium.endpoints="{names}" \\
      io.tritium.gpu="{str(plan.gpu).lower()}"
RUN useradd --uid 1000 --user-group --create-home --shell /usr/sbin/nologin tritium
{compiler}COPY --from=builder {PREFIX} {PREFIX}
ENV PATH={PREFIX}/bin:$PATH PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
{gpu_env}USER 1000:1000
WORKDIR /home/tritium
EXPOSE {ports}
{_healthcheck(plan)}
ENTRYPOINT ["tritium-server"]
CMD ["--model-repository=/models"]
"""


# -- writing the build context -------------------------------------------------------------------
def _clean_env() -> dict[str, str]:
    """The environment of an offline pip: no configuration file and no PIP_* settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env["PIP_CONFIG_FILE"] = os.devnull
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


def _run(cmd: list[str], env: dict[str, str] | None = None) -> None:
    print("+ " + " ".join(cmd), flush=True)
    result = subprocess.run(cmd, env=env)
    if result.returncode != 0:
        raise BuildError(f"command failed with status {result.returncode}: {' '.join(cmd)}")


def _copy_source(root: Path, dest: Path) -> None:
    """The files a tritium wheel is built from (pyproject, readme, package folders)."""
    project = _pyproject(root)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
    for name in ("pyproject.toml", "setup.py", project["project"].get("readme", "README.md")):
        shutil.copy2(root / name, dest / name)
    for folder in sorted({Path(p).parts[0] for p in project["tool"]["setuptools"]["package-dir"].values()}):
        shutil.copytree(root / folder, dest / folder, ignore=ignore)


def _modern_setuptools() -> bool:
    try:
        version = md.version("setuptools")
    except md.PackageNotFoundError:
        return False
    major, minor = (int(x) for x in version.split(".")[:2])
    return (major, minor) >= (70, 1)


def build_wheelhouse(plan: Plan, wheelhouse: Path, root: Path = ROOT) -> list[Path]:
    """Build tritium's wheel and collect every dependency's wheel; write ``requirements.txt``.

    Uses this interpreter's pip and its index configuration (pip's cache makes a
    rebuild fast). :returns: the wheels.
    :raises BuildError: when pip fails.
    """
    if wheelhouse.exists():
        shutil.rmtree(wheelhouse)
    wheelhouse.mkdir(parents=True)
    pip = [sys.executable, "-m", "pip"]
    with tempfile.TemporaryDirectory(prefix="tritium-build-") as tmp:
        src = Path(tmp) / "src"
        src.mkdir()
        _copy_source(root, src)
        isolation = ["--no-build-isolation"] if _modern_setuptools() else []  # else pip fetches setuptools
        _run(pip + ["wheel", "-q", "--no-deps", *isolation, "-w", str(wheelhouse), str(src)])
        (tritium_wheel,) = wheelhouse.glob("tritium-*.whl")
        if any(e.name == "grpc" for e in plan.endpoints) and "-py3-none-" in tritium_wheel.name:
            print(
                "note: tritium's wheel has no native gRPC transport (install libgrpc++-dev, pkg-config and g++ "
                "on this host to build it); the gRPC endpoint will use grpc.aio",
                flush=True,
            )
        constraints = Path(tmp) / "constraints.txt"
        constraints.write_text("".join(f"{p.name}=={p.version}\n" for p in plan.pins))
        _run(
            pip
            + [
                "wheel",
                "-q",
                "--prefer-binary",
                "-w",
                str(wheelhouse),
                "-c",
                str(constraints),
                str(tritium_wheel),
                *plan.requirements,
            ]
        )
    wheels = sorted(wheelhouse.glob("*.whl"))
    lines = [f"# tritium {plan.version} and every dependency of the chosen parts, pinned by build.py\n"]
    for wheel in wheels:
        name, version, _, _ = parse_wheel_filename(wheel.name)
        digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
        lines.append(f"{name}=={version} \\\n    --hash=sha256:{digest}\n")
    (wheelhouse / "requirements.txt").write_text("".join(lines))
    return wheels


def write_context(plan: Plan, output: Path, wheels: bool = True) -> None:
    """Write the build context: Dockerfile, plugins.toml, backends/ and (with ``wheels``) wheelhouse/."""
    output.mkdir(parents=True, exist_ok=True)
    (output / "Dockerfile").write_text(render_dockerfile(plan))
    (output / "plugins.toml").write_text(render_plugins(plan))
    backends = output / "backends"
    if backends.exists():
        shutil.rmtree(backends)
    backends.mkdir()
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".git")
    for part in plan.backends:
        source = Path(part.source)
        if source.name.startswith("libtriton_"):  # a package folder: backends/<name>/libtriton_<name>/
            shutil.copytree(source, backends / part.name / source.name, ignore=ignore)
        else:
            shutil.copytree(source, backends / part.name, ignore=ignore)
    if wheels:
        found = build_wheelhouse(plan, output / "wheelhouse")
        size = sum(w.stat().st_size for w in found)
        print(f"wheelhouse: {len(found)} wheels, {_mib(size)} in {output / 'wheelhouse'}")


def install(output: Path, target: Path) -> None:
    """Install the composition of ``output`` into a self-contained virtual environment ``target``.

    Like the image: this interpreter's pip installs the wheelhouse offline (no index,
    no pip configuration) into an environment that carries no pip itself.

    :raises BuildError: when ``target`` is a non-empty folder that is not a virtual environment.
    """
    if target.exists() and any(target.iterdir()) and not (target / "pyvenv.cfg").exists():
        raise BuildError(f"--install-dir {target} is a non-empty folder that is not a virtual environment")
    _run([sys.executable, "-m", "venv", "--clear", "--without-pip", str(target)])
    wheelhouse = output / "wheelhouse"
    _run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(target / "bin" / "python"),
            "install",
            "-q",
            "--no-cache-dir",
            "--no-index",
            f"--find-links={wheelhouse}",
            "--require-hashes",
            "-r",
            str(wheelhouse / "requirements.txt"),
        ],
        env=_clean_env(),
    )
    share = target / "share" / "tritium"
    if share.exists():
        shutil.rmtree(share)
    share.mkdir(parents=True)
    shutil.copy2(output / "plugins.toml", share / "plugins.toml")
    shutil.copytree(output / "backends", share / "backends")
    print(f"installed: {target}/bin/tritium-server --model-repository=...")


# -- container engines ------------------------------------------------------------------------------
def find_engine() -> tuple[str | None, list[str]]:
    """The first working container engine among docker, podman and buildah.

    :returns: (its name or None, one line per engine that is missing or not working).
    """
    notes = []
    for name in ("docker", "podman", "buildah"):
        if shutil.which(name) is None:
            notes.append(f"{name}: not installed")
            continue
        try:
            probe = subprocess.run([name, "info"], capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired) as exc:
            notes.append(f"{name}: installed but not working ({exc})")
            continue
        if probe.returncode == 0:
            return name, notes
        reason = (probe.stderr.strip().splitlines() or ["'info' failed"])[-1]
        notes.append(f"{name}: installed but not working ({reason})")
    return None, notes


def build_image(plan: Plan, output: Path) -> None:
    """Build the image with the first working engine.

    :raises BuildError: when no engine works, saying why for each and what to do instead.
    """
    engine, notes = find_engine()
    if engine is None:
        raise BuildError(
            "no working container engine, so no image was built:\n  "
            + "\n  ".join(notes)
            + f"\nThe build context is complete in {output}: build it where an engine runs with\n"
            f"  docker build -t {plan.image_name} {output}\n"
            "or install the same composition on this host with --install-dir DIR."
        )
    command = "build" if engine != "buildah" else "bud"
    _run([engine, command, "-t", plan.image_name, str(output)])
    print(f"image: {plan.image_name} (built with {engine})")


# -- command line ---------------------------------------------------------------------------------
def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line (Triton compose.py's spirit: repeatable --backend / --endpoint)."""
    p = argparse.ArgumentParser(
        prog="build.py",
        description="Compose a custom tritium server: chosen backends + endpoints.",
        allow_abbrev=False,
    )
    p.add_argument(
        "--backend",
        action="append",
        default=[],
        metavar="NAME|PATH",
        help="a built-in backend or a folder holding libtriton_<name> (repeatable; at least one)",
    )
    p.add_argument(
        "--endpoint",
        action="append",
        default=[],
        metavar="NAME",
        help="an endpoint, a 'tritium.frontends' entry point (repeatable; default: all but those "
        "off by default in plugins.toml, such as openai)",
    )
    p.add_argument(
        "--enable-gpu",
        action="store_true",
        help="use the backends' GPU dependencies (the <name>-gpu extras) and the gpu extra",
    )
    p.add_argument("--base-image", help="base image of both stages (default: python:<this Python>-slim)")
    p.add_argument("--image-name", help="name of the image (default: tritium:<version>-custom)")
    p.add_argument("--output-dir", default="build", type=Path, help="the build context folder (default: build)")
    p.add_argument("--dry-run", action="store_true", help="print the plan and the Dockerfile; write nothing")
    p.add_argument("--build", action="store_true", help="build the image with docker, podman or buildah")
    p.add_argument(
        "--install-dir",
        type=Path,
        metavar="DIR",
        help="also install the composition into a self-contained virtual environment DIR",
    )
    p.add_argument(
        "--site-packages",
        type=Path,
        metavar="DIR",
        help="pin the versions installed in DIR (a folder of *.dist-info) instead of this environment's",
    )
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Run ``build.py``; returns the exit status (1 with a message for a build that cannot go on)."""
    args = parse_args(argv)
    try:
        plan = make_plan(args)
        output = args.output_dir
        if args.dry_run:
            sys.stdout.write(render_plan(plan, str(output)))
            sys.stdout.write(f"\n--- {output}/plugins.toml ---\n{render_plugins(plan)}")
            sys.stdout.write(f"\n--- {output}/Dockerfile ---\n{render_dockerfile(plan)}")
            return 0
        write_context(plan, output)
        print(f"build context: {output}")
        if args.install_dir:
            install(output, args.install_dir)
        if args.build:
            build_image(plan, output)
    except BuildError as exc:
        print(f"build.py: error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
