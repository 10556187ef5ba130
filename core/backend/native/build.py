"""Build (once) and import the shim: tritium's side of Triton's backend C API.

The shim is a cffi extension module (API mode) compiled from ``shim.c`` with
the system's C compiler, the first time a worker needs it or ahead of time
with ``tritium-config --build-shim``. It lands in a cache folder keyed by a
hash of its sources, the Python ABI and the cffi version, so an upgrade
rebuilds it and concurrent workers build it once (a file lock).

Cache folder: ``$TRITIUM_NATIVE_CACHE``, else ``$XDG_CACHE_HOME/tritium/native``
(``~/.cache/tritium/native``); when that cannot be created,
``<tmp>/tritium-native-<uid>``.

Why at first use rather than in the wheel: tritium stays a pure-Python
package that installs anywhere without a compiler; only machines that run
native backends need one, and ``tritium-config --build-shim`` does the build
at install time where that is wanted.

The module is imported with ``RTLD_GLOBAL`` so that backend libraries, opened
afterwards, resolve their ``TRITONBACKEND_*`` / ``TRITONSERVER_*`` symbols to
it. Runs in the worker process (or in ``tritium-config``).
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.util
import os
import shutil
import sys
import sysconfig
import tempfile
from pathlib import Path
from types import ModuleType

from ...errors import Code, TritonError

__all__ = ["INCLUDE_DIR", "CDEF", "cache_dir", "load_shim", "build_shim"]

HERE = Path(__file__).resolve().parent
#: the folder holding ``triton/core/tritonbackend.h`` and ``tritonserver.h``
INCLUDE_DIR = HERE / "include"
MODULE_NAME = "_tritium_native_shim"

#: what Python sees of the shim: struct layouts it fills in, functions it
#: calls, and the callbacks it implements (``extern "Python"``).
CDEF = """
typedef struct TRITONSERVER_Error { int code; char* message; ...; } TRITONSERVER_Error;
typedef struct TRITONSERVER_Message { char* base; size_t size; int owned; } TRITONSERVER_Message;
typedef struct TRITONBACKEND_Backend {
    const char* name; const char* directory; TRITONSERVER_Message* config; void* state; int policy;
} TRITONBACKEND_Backend;
typedef struct TRITONBACKEND_Model {
    int64_t handle; const char* name; uint64_t version; const char* repository;
    TRITONSERVER_Message* config; TRITONBACKEND_Backend* backend; void* state; bool auto_complete;
} TRITONBACKEND_Model;
typedef struct TRITONBACKEND_ModelInstance {
    const char* name; int kind; int32_t device_id; bool passive; TRITONBACKEND_Model* model; void* state;
} TRITONBACKEND_ModelInstance;
typedef struct TRITONBACKEND_Input {
    const char* name; int datatype; const int64_t* shape; uint32_t dims_count; uint64_t byte_size;
    const void* buffer;
} TRITONBACKEND_Input;
typedef struct TRITONBACKEND_Request {
    int64_t handle; const char* id; uint64_t correlation_id; const char* correlation_id_string;
    uint32_t flags; uint64_t timeout_us; uint32_t input_count; TRITONBACKEND_Input* inputs;
    uint32_t output_count; const char** output_names; int released; int notify_release;
} TRITONBACKEND_Request;
typedef struct TRITONBACKEND_Response TRITONBACKEND_Response;
typedef struct TRITONBACKEND_Output {
    TRITONBACKEND_Response* response; char* name; int datatype; int64_t* shape; uint32_t dims_count;
    int64_t buffer; struct TRITONBACKEND_Output* next;
} TRITONBACKEND_Output;
struct TRITONBACKEND_Response {
    int64_t request; int64_t parameters; TRITONBACKEND_Output* first; TRITONBACKEND_Output* last;
};

TRITONSERVER_Error* TRITONSERVER_ErrorNew(int code, const char* msg);
void TRITONSERVER_ErrorDelete(TRITONSERVER_Error* error);

void* tritium_dlopen(const char* path);
void* tritium_dlsym(void* handle, const char* name);
const char* tritium_dlerror(void);
int tritium_dlclose(void* handle);
void tritium_set_log_levels(unsigned levels);

extern "Python" TRITONSERVER_Error* tritium_py_output_buffer(TRITONBACKEND_Output*, uint64_t, void**);
extern "Python" TRITONSERVER_Error* tritium_py_response_parameter(
    TRITONBACKEND_Response*, const char*, int, const void*);
extern "Python" TRITONSERVER_Error* tritium_py_response_send(TRITONBACKEND_Response*, uint32_t, TRITONSERVER_Error*);
extern "Python" void tritium_py_response_delete(TRITONBACKEND_Response*);
extern "Python" TRITONSERVER_Error* tritium_py_factory_send_flags(int64_t, uint32_t);
extern "Python" TRITONSERVER_Error* tritium_py_request_release(int64_t, uint32_t);
extern "Python" TRITONSERVER_Error* tritium_py_request_is_cancelled(int64_t, bool*);
extern "Python" void tritium_py_log(int, const char*, int, const char*);
extern "Python" TRITONSERVER_Error* tritium_py_model_set_config(int64_t, const char*, size_t);
"""

_loaded: ModuleType | None = None


def _sources() -> list[Path]:
    return [HERE / "shim.c", *sorted((INCLUDE_DIR / "triton" / "core").glob("*.h"))]


def _key() -> str:
    import cffi

    digest = hashlib.sha256()
    for path in _sources():
        digest.update(path.read_bytes())
    digest.update(CDEF.encode())
    digest.update(f"{sys.implementation.cache_tag}|{sysconfig.get_platform()}|{cffi.__version__}".encode())
    return digest.hexdigest()[:16]


def cache_dir() -> Path:
    """The folder the built shim goes to (see the module docstring)."""
    root = os.environ.get("TRITIUM_NATIVE_CACHE")
    if root:
        return Path(root)
    xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(xdg) / "tritium" / "native"


def _built(folder: Path) -> Path | None:
    suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
    path = folder / f"{MODULE_NAME}{suffix}"
    return path if path.is_file() else None


def build_shim() -> Path:
    """Compile the shim if the cache lacks it; return the extension module's path.

    :raises TritonError: UNAVAILABLE when cffi is missing or the C compiler
        fails (the message names the install requirement and the compiler's
        last output lines).
    """
    try:
        import cffi
    except ImportError as exc:
        raise TritonError(
            Code.UNAVAILABLE,
            "native backends need cffi and a C compiler: pip install 'tritium[native]' (and gcc)",
        ) from exc
    folder = cache_dir() / _key()
    found = _built(folder)
    if found is not None:
        return found
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:  # a read-only home: build under the temporary directory instead
        folder = Path(tempfile.gettempdir()) / f"tritium-native-{os.getuid()}" / _key()
        found = _built(folder)
        if found is not None:
            return found
        folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        found = _built(folder)
        if found is not None:
            return found
        ffi = cffi.FFI()
        ffi.cdef(CDEF)
        ffi.set_source(
            MODULE_NAME,
            (HERE / "shim.c").read_text(),
            include_dirs=[str(INCLUDE_DIR)],
            libraries=["dl"],
            extra_compile_args=["-O2", "-std=gnu11"],
        )
        with tempfile.TemporaryDirectory(prefix="build-", dir=folder) as tmp:
            try:
                output = ffi.compile(tmpdir=tmp, verbose=False)
            except Exception as exc:  # distutils/setuptools CompileError, LinkError, ...
                raise TritonError(
                    Code.UNAVAILABLE,
                    f"failed to build the native-backend shim with the C compiler "
                    f"(native backends need gcc or cc): {type(exc).__name__}: {exc}",
                ) from exc
            target = folder / Path(output).name
            shutil.move(output, target)
        return target


def load_shim() -> ModuleType:
    """Build if needed, then import the shim with ``RTLD_GLOBAL`` (once per process).

    :returns: the cffi extension module (``.ffi``, ``.lib``).
    :raises TritonError: as :func:`build_shim`.
    """
    global _loaded
    if _loaded is not None:
        return _loaded
    path = build_shim()
    spec = importlib.util.spec_from_file_location(MODULE_NAME, path)
    assert spec is not None and spec.loader is not None
    flags = sys.getdlopenflags()
    sys.setdlopenflags(os.RTLD_NOW | os.RTLD_GLOBAL)
    try:  # an extension module is dlopen-ed when it is created
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.setdlopenflags(flags)
    sys.modules[MODULE_NAME] = module
    _loaded = module
    return module
