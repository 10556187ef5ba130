// The Python half of tritium's native gRPC transport: the extension module
// tritium.frontends.kserve_grpc._native (Server, Call, split_raw_inputs).
//
// Everything here runs on Python's thread with the GIL held, except the copies of large
// messages and the starting of gRPC operations, which release it. A message goes each way with
// one copy: from gRPC's slices into a bytes object (or, when large, a pooled Payload buffer),
// and from Python's buffers into one gRPC slice (pooled when large). See _native_transport.h for the
// threads and lifetimes of the C++ side; native_transport.py for how Python drives it.
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#include <climits>
#include <cstring>
#include <stdexcept>

#include "_native_transport.h"

namespace {

using tritium_grpc::Call;
using tritium_grpc::Engine;
using tritium_grpc::Event;
using tritium_grpc::Hub;

// == Payload: a received large message in a pooled buffer (bytes-like, read-only) =================
struct PayloadObject {
  PyObject_HEAD void* data;  // from pool::Get
  Py_ssize_t size;
};

PyTypeObject* payload_type = nullptr;  // set when the module loads

int PayloadGetBuffer(PayloadObject* self, Py_buffer* view, int flags) {
  return PyBuffer_FillInfo(view, reinterpret_cast<PyObject*>(self), self->data, self->size, 1, flags);
}

void PayloadDealloc(PayloadObject* self) {  // no view is left: the buffer goes back to the pool
  if (self->data != nullptr) tritium_grpc::pool::Put(self->data);
  PyTypeObject* type = Py_TYPE(self);
  PyObject_Free(self);
  Py_DECREF(type);
}

PyType_Slot payload_slots[] = {
    {Py_tp_doc, const_cast<char*>("A received message's bytes (a memoryview of it is what drain gives).")},
    {Py_tp_dealloc, reinterpret_cast<void*>(PayloadDealloc)},
    {Py_bf_getbuffer, reinterpret_cast<void*>(PayloadGetBuffer)},
    {0, nullptr}};

PyType_Spec payload_spec = {"tritium.frontends.kserve_grpc._native.Payload", sizeof(PayloadObject), 0,
                            Py_TPFLAGS_DEFAULT | Py_TPFLAGS_DISALLOW_INSTANTIATION, payload_slots};

// Copy parts into dest, with the GIL released when they are large.
template <class Parts>
void CopyParts(char* dest, const Parts& parts, size_t total) {
  auto copy = [&] {
    for (const auto& [data, size] : parts) {
      std::memcpy(dest, data, size);
      dest += size;
    }
  };
  if (total >= tritium_grpc::pool::kMin) {
    Py_BEGIN_ALLOW_THREADS copy();
    Py_END_ALLOW_THREADS
  } else {
    copy();
  }
}

// A received message (gRPC's slices) -> bytes, or for a large one a memoryview of a Payload: one copy.
PyObject* ToPython(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  if (!buffer.Dump(&slices).ok()) return PyErr_Format(PyExc_ValueError, "unreadable message");
  std::vector<std::pair<const void*, size_t>> parts;
  size_t total = 0;
  for (auto& s : slices) {
    parts.emplace_back(s.begin(), s.size());
    total += s.size();
  }
  if (total < tritium_grpc::pool::kMin) {
    PyObject* bytes = PyBytes_FromStringAndSize(nullptr, static_cast<Py_ssize_t>(total));
    if (bytes != nullptr) CopyParts(PyBytes_AS_STRING(bytes), parts, total);
    return bytes;
  }
  auto* payload = PyObject_New(PayloadObject, payload_type);
  if (payload == nullptr) return nullptr;
  try {
    payload->data = tritium_grpc::pool::Get(total);
  } catch (const std::bad_alloc&) {
    payload->data = nullptr;
    Py_DECREF(payload);
    return PyErr_NoMemory();
  }
  payload->size = static_cast<Py_ssize_t>(total);
  CopyParts(static_cast<char*>(payload->data), parts, total);
  PyObject* view = PyMemoryView_FromObject(reinterpret_cast<PyObject*>(payload));
  Py_DECREF(payload);
  return view;
}

// A bytes-like object, or a list/tuple of them -> one gRPC slice: one copy (into a pooled buffer
// when large; gRPC gives it back when it has sent it).
bool ToByteBuffer(PyObject* data, grpc::ByteBuffer* out) {
  bool many = PyList_Check(data) || PyTuple_Check(data);
  PyObject* items = many ? PySequence_Fast(data, "") : PyTuple_Pack(1, data);
  if (items == nullptr) return false;
  Py_ssize_t n = PySequence_Fast_GET_SIZE(items);
  std::vector<Py_buffer> views(n);
  std::vector<std::pair<const void*, size_t>> parts;
  size_t total = 0;
  Py_ssize_t got = 0;
  for (; got < n; ++got) {
    if (PyObject_GetBuffer(PySequence_Fast_GET_ITEM(items, got), &views[got], PyBUF_C_CONTIGUOUS) < 0) break;
    parts.emplace_back(views[got].buf, views[got].len);
    total += views[got].len;
  }
  bool ok = got == n;
  if (ok && total < tritium_grpc::pool::kMin) {
    grpc::Slice slice(total);  // uninitialized; filled before anyone else sees it
    CopyParts(reinterpret_cast<char*>(const_cast<uint8_t*>(slice.begin())), parts, total);
    grpc::ByteBuffer buffer(&slice, 1);
    out->Swap(&buffer);
  } else if (ok) {
    void* memory = nullptr;
    try {
      memory = tritium_grpc::pool::Get(total);
    } catch (const std::bad_alloc&) {
      PyErr_NoMemory();
      ok = false;
    }
    if (ok) {
      CopyParts(static_cast<char*>(memory), parts, total);
      grpc::Slice slice(memory, total, tritium_grpc::pool::Put);
      grpc::ByteBuffer buffer(&slice, 1);
      out->Swap(&buffer);
    }
  }
  for (Py_ssize_t i = 0; i < got; ++i) PyBuffer_Release(&views[i]);
  Py_DECREF(items);
  return ok;
}

// == Call: Python's handle on one RPC ==========================================================
struct CallObject {
  PyObject_HEAD Call* call;  // holds a reference
  PyObject* method;          // str
  PyObject* handler;         // what Python attaches (its task or stream); None by default
};

PyTypeObject* call_type = nullptr;  // set when the module loads

int CallTraverse(CallObject* self, visitproc visit, void* arg) {
  Py_VISIT(self->handler);
  Py_VISIT(Py_TYPE(self));
  return 0;
}

int CallClear(CallObject* self) {
  Py_CLEAR(self->handler);
  return 0;
}

void CallDealloc(CallObject* self) {
  PyObject_GC_UnTrack(self);
  self->call->py = nullptr;
  self->call->Unref();
  Py_XDECREF(self->method);
  Py_XDECREF(self->handler);
  PyTypeObject* type = Py_TYPE(self);
  PyObject_GC_Del(self);
  Py_DECREF(type);  // an instance of a heap type holds a reference to it
}

// The wrapper of call: the one that exists, or a new one. Takes over the caller's reference.
PyObject* WrapCall(Call* call) {
  if (call->py != nullptr) {
    call->Unref();
    Py_INCREF(static_cast<PyObject*>(call->py));
    return static_cast<PyObject*>(call->py);
  }
  auto* self = PyObject_GC_New(CallObject, call_type);
  if (self == nullptr) {
    call->Unref();
    return nullptr;
  }
  self->call = call;
  self->method = PyUnicode_DecodeUTF8(call->method().data(), call->method().size(), "replace");
  Py_INCREF(Py_None);
  self->handler = Py_None;
  PyObject_GC_Track(self);
  if (self->method == nullptr) {
    Py_DECREF(self);
    return nullptr;
  }
  call->py = self;
  return reinterpret_cast<PyObject*>(self);
}

PyObject* CallRead(CallObject* self, PyObject*) {
  Py_BEGIN_ALLOW_THREADS self->call->Read();
  Py_END_ALLOW_THREADS Py_RETURN_NONE;
}

PyObject* CallWrite(CallObject* self, PyObject* data) {
  grpc::ByteBuffer message;
  if (!ToByteBuffer(data, &message)) return nullptr;
  bool full;
  Py_BEGIN_ALLOW_THREADS full = self->call->Write(&message);
  Py_END_ALLOW_THREADS return PyBool_FromLong(full);
}

PyObject* CallFinish(CallObject* self, PyObject* args) {
  PyObject* data;
  int code;
  const char* details;
  Py_ssize_t details_len;
  if (!PyArg_ParseTuple(args, "Ois#", &data, &code, &details, &details_len)) return nullptr;
  if (code < 0 || code > 16) return PyErr_Format(PyExc_ValueError, "no gRPC status code %d", code);
  grpc::ByteBuffer message;
  bool with_message = data != Py_None;
  if (with_message && !ToByteBuffer(data, &message)) return nullptr;
  grpc::Status status(static_cast<grpc::StatusCode>(code), std::string(details, details_len));
  Py_BEGIN_ALLOW_THREADS self->call->Close(with_message ? &message : nullptr, std::move(status));
  Py_END_ALLOW_THREADS Py_RETURN_NONE;
}

PyObject* CallMetadata(CallObject* self, PyObject*) {
  std::vector<std::pair<std::string, std::string>> items;
  self->call->Metadata(&items);
  PyObject* out = PyTuple_New(static_cast<Py_ssize_t>(items.size()));
  for (size_t i = 0; out != nullptr && i < items.size(); ++i) {
    const auto& [key, value] = items[i];
    bool binary = key.size() > 4 && key.compare(key.size() - 4, 4, "-bin") == 0;  // bytes, as in grpcio
    PyObject* k = PyUnicode_DecodeUTF8(key.data(), static_cast<Py_ssize_t>(key.size()), "replace");
    PyObject* v = binary ? PyBytes_FromStringAndSize(value.data(), static_cast<Py_ssize_t>(value.size()))
                         : PyUnicode_DecodeUTF8(value.data(), static_cast<Py_ssize_t>(value.size()), "replace");
    PyObject* item = k && v ? PyTuple_Pack(2, k, v) : nullptr;
    Py_XDECREF(k);
    Py_XDECREF(v);
    if (item == nullptr) Py_CLEAR(out);
    else PyTuple_SET_ITEM(out, static_cast<Py_ssize_t>(i), item);
  }
  return out;
}

PyObject* CallCancelled(CallObject* self, void*) { return PyBool_FromLong(self->call->cancelled()); }

PyObject* CallGetHandler(CallObject* self, void*) {
  Py_INCREF(self->handler);
  return self->handler;
}

int CallSetHandler(CallObject* self, PyObject* value, void*) {
  if (value == nullptr) value = Py_None;
  Py_INCREF(value);
  Py_SETREF(self->handler, value);
  return 0;
}

PyMethodDef call_methods[] = {
    {"read", reinterpret_cast<PyCFunction>(CallRead), METH_NOARGS,
     "read()\n--\n\nAsk for the stream's next message (a MESSAGE event, or READS_DONE at its end)."},
    {"write", reinterpret_cast<PyCFunction>(CallWrite), METH_O,
     "write(data)\n--\n\nSend one message: bytes-like, or a list of them sent as one. True when the "
     "backlog is full: wait for the WRITABLE event before the next."},
    {"finish", reinterpret_cast<PyCFunction>(CallFinish), METH_VARARGS,
     "finish(data, code, details)\n--\n\nEnd the call after the queued writes with status code and "
     "details, and data (None for none) as the last message when code is 0 (OK)."},
    {"metadata", reinterpret_cast<PyCFunction>(CallMetadata), METH_NOARGS,
     "metadata()\n--\n\nThe client's metadata: (key, value) pairs; values of -bin keys as bytes."},
    {nullptr, nullptr, 0, nullptr}};

PyMemberDef call_members[] = {
    {"method", T_OBJECT_EX, offsetof(CallObject, method), READONLY, "the full method name"},
    {nullptr, 0, 0, 0, nullptr}};

PyGetSetDef call_getset[] = {
    {"handler", reinterpret_cast<getter>(CallGetHandler), reinterpret_cast<setter>(CallSetHandler),
     "what Python attaches to the call (None by default)", nullptr},
    {"cancelled", reinterpret_cast<getter>(CallCancelled), nullptr,
     "True once the client cancelled it (or disconnected, or its deadline passed)", nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr}};

PyType_Slot call_slots[] = {
    {Py_tp_doc, const_cast<char*>("One RPC (Server.drain gives it).")},
    {Py_tp_dealloc, reinterpret_cast<void*>(CallDealloc)},
    {Py_tp_traverse, reinterpret_cast<void*>(CallTraverse)},
    {Py_tp_clear, reinterpret_cast<void*>(CallClear)},
    {Py_tp_methods, call_methods},
    {Py_tp_members, call_members},
    {Py_tp_getset, call_getset},
    {0, nullptr}};

PyType_Spec call_spec = {"tritium.frontends.kserve_grpc._native.Call", sizeof(CallObject), 0,
                         Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_DISALLOW_INSTANTIATION,
                         call_slots};

// == Server: the gRPC server and its event queue ===================================================
struct ServerObject {
  PyObject_HEAD Hub* hub;
  Engine* engine;  // null before start() and after shutdown()
};

PyObject* ServerNew(PyTypeObject* type, PyObject*, PyObject*) {
  auto* self = reinterpret_cast<ServerObject*>(type->tp_alloc(type, 0));
  if (self == nullptr) return nullptr;
  self->hub = new Hub();
  self->engine = nullptr;
  if (self->hub->fd() < 0) {
    Py_DECREF(self);
    return PyErr_SetFromErrno(PyExc_OSError);
  }
  return reinterpret_cast<PyObject*>(self);
}

void StopEngine(ServerObject* self, double grace_s) {
  Engine* engine = self->engine;
  self->engine = nullptr;
  if (engine == nullptr) return;
  engine->set_grace(grace_s);
  Py_BEGIN_ALLOW_THREADS delete engine;
  Py_END_ALLOW_THREADS
}

void ServerDealloc(ServerObject* self) {
  StopEngine(self, 0);
  delete self->hub;  // after the engine: nothing pushes any more
  PyTypeObject* type = Py_TYPE(self);
  type->tp_free(reinterpret_cast<PyObject*>(self));
  Py_DECREF(type);
}

PyObject* ServerStart(ServerObject* self, PyObject* args) {
  const char* address;
  int max_receive;
  PyObject* options;
  if (!PyArg_ParseTuple(args, "siO", &address, &max_receive, &options)) return nullptr;
  if (self->engine != nullptr) return PyErr_Format(PyExc_RuntimeError, "already started");
  std::vector<std::pair<std::string, int>> ints;
  std::vector<std::pair<std::string, std::string>> strings;
  PyObject* items = PySequence_Fast(options, "options: a sequence of (name, int or str) pairs");
  for (Py_ssize_t i = 0; items != nullptr && i < PySequence_Fast_GET_SIZE(items); ++i) {
    const char* name;
    PyObject* value;
    if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(items, i), "sO", &name, &value)) {
      Py_CLEAR(items);
    } else if (PyLong_Check(value)) {
      long number = PyLong_AsLong(value);
      if (PyErr_Occurred() || number < INT_MIN || number > INT_MAX) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "channel argument %s: %R does not fit a C int", name, value);
        Py_CLEAR(items);
      } else {
        ints.emplace_back(name, static_cast<int>(number));
      }
    } else if (PyUnicode_Check(value)) {
      strings.emplace_back(name, PyUnicode_AsUTF8(value));
    } else {
      PyErr_Format(PyExc_TypeError, "channel argument %s: %R is not an int or a str", name, value);
      Py_CLEAR(items);
    }
  }
  if (items == nullptr || PyErr_Occurred()) {
    Py_XDECREF(items);
    return nullptr;
  }
  Py_DECREF(items);
  std::string error;
  Py_BEGIN_ALLOW_THREADS try {
    self->engine = new Engine(self->hub, address, max_receive, ints, strings);
  } catch (const std::exception& exc) {
    error = exc.what();
  }
  Py_END_ALLOW_THREADS if (self->engine == nullptr) return PyErr_Format(PyExc_OSError, "%s", error.c_str());
  Py_RETURN_NONE;
}

PyObject* ServerFileno(ServerObject* self, PyObject*) { return PyLong_FromLong(self->hub->fd()); }

PyObject* ServerDrain(ServerObject* self, PyObject*) {
  std::vector<Event> events = self->hub->Take();
  PyObject* out = PyList_New(0);
  size_t i = 0;
  for (; out != nullptr && i < events.size(); ++i) {
    Event& event = events[i];
    PyObject* call = WrapCall(event.call);  // takes over the event's reference
    PyObject* payload = nullptr;
    if (call != nullptr) {
      payload = event.kind == tritium_grpc::kMessage ? ToPython(event.message) : Py_NewRef(Py_None);
    }
    PyObject* item = payload != nullptr ? Py_BuildValue("(OiO)", call, event.kind, payload) : nullptr;
    Py_XDECREF(call);
    Py_XDECREF(payload);
    if (item == nullptr || PyList_Append(out, item) < 0) Py_CLEAR(out);
    Py_XDECREF(item);
  }
  for (; i < events.size(); ++i) events[i].call->Unref();  // after an error only
  return out;
}

PyObject* ServerShutdown(ServerObject* self, PyObject* args) {
  double grace;
  if (!PyArg_ParseTuple(args, "d", &grace)) return nullptr;
  StopEngine(self, grace);
  Py_RETURN_NONE;
}

PyMethodDef server_methods[] = {
    {"start", reinterpret_cast<PyCFunction>(ServerStart), METH_VARARGS,
     "start(address, max_receive_message_length, options)\n--\n\nBind address (host:port) and serve; "
     "options: (name, int or str) channel arguments. OSError when the address cannot be bound."},
    {"fileno", reinterpret_cast<PyCFunction>(ServerFileno), METH_NOARGS,
     "fileno()\n--\n\nAn eventfd that is readable while events wait for drain()."},
    {"drain", reinterpret_cast<PyCFunction>(ServerDrain), METH_NOARGS,
     "drain()\n--\n\nTake every waiting event: a list of (call, kind, payload) tuples; payload is the "
     "message (bytes) of a MESSAGE event, else None."},
    {"shutdown", reinterpret_cast<PyCFunction>(ServerShutdown), METH_VARARGS,
     "shutdown(grace_s)\n--\n\nRefuse new calls, cancel those still running after grace_s seconds and "
     "wait until all are over. Blocks, without the GIL: run it in a thread."},
    {nullptr, nullptr, 0, nullptr}};

PyType_Slot server_slots[] = {
    {Py_tp_doc, const_cast<char*>("Server()\n--\n\nA gRPC server whose calls go to Python as events.")},
    {Py_tp_new, reinterpret_cast<void*>(ServerNew)},
    {Py_tp_dealloc, reinterpret_cast<void*>(ServerDealloc)},
    {Py_tp_methods, server_methods},
    {0, nullptr}};

PyType_Spec server_spec = {"tritium.frontends.kserve_grpc._native.Server", sizeof(ServerObject), 0,
                           Py_TPFLAGS_DEFAULT, server_slots};

// == split_raw_inputs: a ModelInferRequest's raw_input_contents as views ===========================
// Walks the message's top-level fields (varints and lengths only: no per-byte loop over contents).
constexpr uint64_t kRawInputField = 7;  // ModelInferRequest.raw_input_contents

bool Varint(const uint8_t* p, size_t end, size_t* pos, uint64_t* value) {
  *value = 0;
  for (int shift = 0; shift <= 63 && *pos < end; shift += 7) {
    uint8_t byte = p[(*pos)++];
    *value |= static_cast<uint64_t>(byte & 0x7F) << shift;
    if (byte < 0x80) return true;
  }
  return false;
}

// The [begin, end) ranges of the raw inputs and of the other fields; an error message or null.
const char* Split(const uint8_t* p, size_t end, std::vector<std::pair<size_t, size_t>>* raws,
                  std::vector<std::pair<size_t, size_t>>* rest, int* wire_type) {
  size_t pos = 0;
  while (pos < end) {
    size_t start = pos;
    uint64_t tag, n;
    if (!Varint(p, end, &pos, &tag)) return "truncated varint";
    *wire_type = static_cast<int>(tag & 7);
    if (*wire_type == 2) {
      if (!Varint(p, end, &pos, &n)) return "truncated varint";
      if (n > end - pos) return "field runs past the end";
      pos += n;
      if ((tag >> 3) == kRawInputField) {
        raws->emplace_back(pos - n, pos);
        continue;
      }
    } else if (*wire_type == 0) {
      if (!Varint(p, end, &pos, &n)) return "truncated varint";
    } else if (*wire_type == 1 || *wire_type == 5) {
      size_t size = *wire_type == 1 ? 8 : 4;
      if (size > end - pos) return "field runs past the end";
      pos += size;
    } else {
      return "wire type";
    }
    if (!rest->empty() && rest->back().second == start) rest->back().second = pos;
    else rest->emplace_back(start, pos);
  }
  return nullptr;
}

PyObject* SplitRawInputs(PyObject*, PyObject* data) {
  Py_buffer view;
  if (PyObject_GetBuffer(data, &view, PyBUF_SIMPLE) < 0) return nullptr;
  const auto* p = static_cast<const uint8_t*>(view.buf);
  std::vector<std::pair<size_t, size_t>> raws, rest;
  int wire_type = 0;
  const char* error = Split(p, static_cast<size_t>(view.len), &raws, &rest, &wire_type);
  size_t kept = 0;
  for (auto& [b, e] : rest) kept += e - b;
  PyObject* head = error == nullptr ? PyBytes_FromStringAndSize(nullptr, static_cast<Py_ssize_t>(kept)) : nullptr;
  if (head != nullptr) {
    char* q = PyBytes_AS_STRING(head);
    for (auto& [b, e] : rest) {
      std::memcpy(q, p + b, e - b);
      q += e - b;
    }
  }
  PyBuffer_Release(&view);
  if (error != nullptr) {
    if (std::strcmp(error, "wire type") == 0) return PyErr_Format(PyExc_ValueError, "wire type %d", wire_type);
    return PyErr_Format(PyExc_ValueError, "%s", error);
  }
  PyObject* whole = head != nullptr ? PyMemoryView_FromObject(data) : nullptr;
  PyObject* list = whole != nullptr ? PyList_New(static_cast<Py_ssize_t>(raws.size())) : nullptr;
  for (size_t i = 0; list != nullptr && i < raws.size(); ++i) {
    PyObject* begin = PyLong_FromSize_t(raws[i].first);
    PyObject* end = PyLong_FromSize_t(raws[i].second);
    PyObject* range = begin && end ? PySlice_New(begin, end, nullptr) : nullptr;
    PyObject* part = range != nullptr ? PyObject_GetItem(whole, range) : nullptr;
    Py_XDECREF(begin);
    Py_XDECREF(end);
    Py_XDECREF(range);
    if (part == nullptr) Py_CLEAR(list);
    else PyList_SET_ITEM(list, static_cast<Py_ssize_t>(i), part);
  }
  Py_XDECREF(whole);
  if (list == nullptr) {
    Py_XDECREF(head);
    return nullptr;
  }
  return Py_BuildValue("(NN)", head, list);
}

PyObject* LiveCalls(PyObject*, PyObject*) { return PyLong_FromLong(tritium_grpc::live_calls.load()); }

PyMethodDef module_methods[] = {
    {"split_raw_inputs", SplitRawInputs, METH_O,
     "split_raw_inputs(data)\n--\n\nA serialized ModelInferRequest -> (its other fields, as bytes; its "
     "raw_input_contents, as memoryviews of data). ValueError when it is malformed."},
    {"live_calls", LiveCalls, METH_NOARGS,
     "live_calls()\n--\n\nHow many calls are alive (not yet let go by gRPC, the event queue and Python)."},
    {nullptr, nullptr, 0, nullptr}};

PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "_native",
                          "tritium's native gRPC transport: gRPC's C++ server, with every call handed to Python.",
                          -1, module_methods, nullptr, nullptr, nullptr, nullptr};

}  // namespace

PyMODINIT_FUNC PyInit__native() {
  PyObject* module = PyModule_Create(&module_def);
  if (module == nullptr) return nullptr;
  call_type = reinterpret_cast<PyTypeObject*>(PyType_FromSpec(&call_spec));
  payload_type = reinterpret_cast<PyTypeObject*>(PyType_FromSpec(&payload_spec));
  PyObject* server_type = PyType_FromSpec(&server_spec);
  if (call_type == nullptr || payload_type == nullptr || server_type == nullptr || PyModule_AddObject(module, "Server", server_type) < 0 ||
      PyModule_AddIntConstant(module, "MESSAGE", tritium_grpc::kMessage) < 0 ||
      PyModule_AddIntConstant(module, "READS_DONE", tritium_grpc::kReadsDone) < 0 ||
      PyModule_AddIntConstant(module, "CANCELLED", tritium_grpc::kCancelled) < 0 ||
      PyModule_AddIntConstant(module, "WRITABLE", tritium_grpc::kWritable) < 0 ||
      PyModule_AddStringConstant(module, "GRPC_VERSION", grpc::Version().c_str()) < 0) {
    Py_XDECREF(server_type);
    Py_DECREF(module);
    return nullptr;
  }
  return module;
}
