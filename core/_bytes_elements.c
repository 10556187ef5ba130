/*
 * tritium.core._bytes_elements: the elements of a BYTES tensor counted and joined in C.
 *
 * A BYTES tensor travels as its elements one after another, each a 4-byte
 * little-endian length and that many bytes (the KServe v2 binary tensor data
 * extension's form). Checking that a client's buffer holds exactly the
 * elements its shape says means walking every length prefix; in Python that
 * is about 0.3 microseconds per element, seconds for a large body, on the
 * core's event loop. Here it is a few nanoseconds per element, with the
 * interpreter released for buffers of 64 KiB or more (so a parse thread
 * calling it does not hold the event loop either).
 *
 * count(buffer) -> (count, status, available, size)
 *   buffer: any object with the buffer protocol (bytes, bytearray, memoryview
 *   of shared memory), read as bytes.
 *   status 0: the buffer is count well-formed elements (available = size = 0).
 *   status 1: after count elements, only `available` (< 4) bytes are left for
 *             the next length prefix.
 *   status 2: after count elements, the next one says `size` bytes but only
 *             `available` follow its prefix.
 * tritium.core.inference.tensor (the BYTES codec) exposes it as scan_bytes_elements;
 * its callers turn a status into their own messages (Triton's for a request's
 * input in tritium.core.model.validation.check_bytes_elements).
 *
 * join(sequence) -> bytes
 *   The serialized form of a sequence of bytes objects (a gRPC request's
 *   typed bytes_contents): each element's 4-byte little-endian length, then
 *   the element. TypeError for an item that is not bytes, OverflowError for
 *   an element of 4 GiB or more.
 *
 * Built by setup.py when a C compiler is present; the callers fall back to
 * Python without it.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* buffers from this size on are scanned with the interpreter released */
#define RELEASE_FROM ((Py_ssize_t)64 * 1024)

static void scan(const unsigned char *data, Py_ssize_t end, Py_ssize_t *count, int *status, Py_ssize_t *available,
                 Py_ssize_t *size) {
    Py_ssize_t pos = 0, n = 0;
    while (pos < end) {
        if (end - pos < 4) {
            *status = 1;
            *available = end - pos;
            *count = n;
            return;
        }
        uint32_t length = (uint32_t)data[pos] | (uint32_t)data[pos + 1] << 8 | (uint32_t)data[pos + 2] << 16 |
                          (uint32_t)data[pos + 3] << 24;
        pos += 4;
        if ((Py_ssize_t)length > end - pos) {
            *status = 2;
            *available = end - pos;
            *size = (Py_ssize_t)length;
            *count = n;
            return;
        }
        pos += (Py_ssize_t)length;
        n++;
    }
    *count = n;
}

static PyObject *count_elements(PyObject *module, PyObject *buffer) {
    Py_buffer view;
    Py_ssize_t count = 0, available = 0, size = 0;
    int status = 0;
    (void)module;
    if (PyObject_GetBuffer(buffer, &view, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    if (view.len >= RELEASE_FROM) {
        Py_BEGIN_ALLOW_THREADS scan((const unsigned char *)view.buf, view.len, &count, &status, &available, &size);
        Py_END_ALLOW_THREADS
    } else {
        scan((const unsigned char *)view.buf, view.len, &count, &status, &available, &size);
    }
    PyBuffer_Release(&view);
    return Py_BuildValue("(ninn)", count, status, available, size);
}

static PyObject *join_elements(PyObject *module, PyObject *items) {
    (void)module;
    PyObject *fast = PySequence_Fast(items, "join() needs a sequence of bytes");
    if (fast == NULL) {
        return NULL;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fast), total = 0;
    PyObject **item = PySequence_Fast_ITEMS(fast);
    for (Py_ssize_t i = 0; i < n; i++) {
        if (!PyBytes_Check(item[i])) {
            PyErr_Format(PyExc_TypeError, "join() needs bytes, not %.100s", Py_TYPE(item[i])->tp_name);
            Py_DECREF(fast);
            return NULL;
        }
        Py_ssize_t size = PyBytes_GET_SIZE(item[i]);
        if ((unsigned long long)size > 0xFFFFFFFFull || total > PY_SSIZE_T_MAX - 4 - size) {
            PyErr_SetString(PyExc_OverflowError, "a BYTES element of 4 GiB or more has no 4-byte length");
            Py_DECREF(fast);
            return NULL;
        }
        total += 4 + size;
    }
    PyObject *out = PyBytes_FromStringAndSize(NULL, total);
    if (out == NULL) {
        Py_DECREF(fast);
        return NULL;
    }
    unsigned char *pos = (unsigned char *)PyBytes_AS_STRING(out);
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_ssize_t size = PyBytes_GET_SIZE(item[i]);
        uint32_t length = (uint32_t)size;
        pos[0] = (unsigned char)length;
        pos[1] = (unsigned char)(length >> 8);
        pos[2] = (unsigned char)(length >> 16);
        pos[3] = (unsigned char)(length >> 24);
        memcpy(pos + 4, PyBytes_AS_STRING(item[i]), (size_t)size);
        pos += 4 + size;
    }
    Py_DECREF(fast);
    return out;
}

static PyMethodDef methods[] = {
    {"count", count_elements, METH_O,
     "count(buffer) -> (count, status, available, size): the length-prefixed elements of a BYTES tensor's buffer."},
    {"join", join_elements, METH_O, "join(sequence of bytes) -> bytes: the elements, each after its 4-byte length."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "tritium.core._bytes_elements",
    "The elements of a BYTES tensor's buffer counted and joined in C (see tritium.core.inference.tensor).", -1, methods,
};

PyMODINIT_FUNC PyInit__bytes_elements(void) { return PyModule_Create(&module); }
