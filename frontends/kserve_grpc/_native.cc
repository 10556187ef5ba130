// tritium's native gRPC endpoint transport: a CPython extension on the gRPC C++ library.
//
// What it does: a gRPC server with one generic callback service. Every call, whatever its
// method, becomes a Call (a ServerGenericBidiReactor) that reads raw messages and writes raw
// messages; the method name, the message bytes and the status travel to and from Python, where
// the existing servicer parses and serializes them with the generated protobuf modules. C++ needs
// no generated code and knows nothing of KServe.
//
// Threads. gRPC runs every reaction (OnReadDone, OnWriteDone, OnCancel, OnDone) on its own
// threads, which never take the GIL. A reaction that Python must see pushes an Event onto the
// server's Hub under a mutex and, when the queue turns non-empty, signals an eventfd. The asyncio
// loop watches that fd (loop.add_reader) and calls Server.drain(), which takes the whole queue in
// one go and turns each event into a (call, kind, payload) tuple. Python answers with
// call.write()/call.finish(), which copy the bytes into a gRPC slice and start the operation with
// the GIL released. Lock order: the GIL (if held) before Call::mu_ before Hub::mu_; gRPC's threads
// take only the last two.
//
// Lifetimes. A Call is reference counted: one reference for gRPC (dropped in OnDone, after which
// gRPC never touches it), one per queued Event, and one for its Python wrapper (CallObject, at
// most one at a time; Call::py_ points at it, guarded by the GIL). The last Unref deletes it, on
// whichever thread. After OnDone every Python-side operation is a no-op, so a wrapper may outlive
// its call, and even the server.
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <grpc/slice.h>
#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/grpcpp.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace {

// Event kinds, as Python sees them (frontends/kserve_grpc/native_transport.py names them).
enum Kind { kMessage = 0, kReadsDone = 1, kCancelled = 2, kWritable = 3 };

// A stream's queued writes beyond which write() asks Python to wait for kWritable.
constexpr size_t kBacklogMessages = 16;
constexpr size_t kBacklogBytes = 8u << 20;
// Copies at least this large run with the GIL released.
constexpr size_t kReleaseGilBytes = 64u << 10;

class Call;

struct Event {
  Call* call;  // holds a reference
  int kind;
  grpc::ByteBuffer message;  // kMessage only
};

// The queue of events for Python, and the eventfd that says it is not empty.
class Hub {
 public:
  Hub() : fd_(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {}
  ~Hub();
  int fd() const { return fd_; }
  // Any thread, no GIL. Takes a reference on call; swaps *message out when given.
  void Push(Call* call, int kind, grpc::ByteBuffer* message);
  // The Python thread. Clears the eventfd first, then takes the queue: an event pushed after
  // the read signals again, so none is missed (at worst one wake-up finds an empty queue).
  std::vector<Event> Take() {
    uint64_t count;
    ssize_t ignored = read(fd_, &count, sizeof count);
    (void)ignored;
    std::vector<Event> out;
    std::lock_guard<std::mutex> lock(mu_);
    out.swap(events_);
    return out;
  }

 private:
  std::mutex mu_;
  std::vector<Event> events_;
  int fd_;
};

// One RPC. Reads one message at a time (the first on creation, each next one when Python calls
// read()), and writes one message at a time, queueing the rest here.
class Call final : public grpc::ServerGenericBidiReactor {
 public:
  Call(Hub* hub, grpc::GenericCallbackServerContext* ctx) : hub_(hub), ctx_(ctx), method_(ctx->method()) {
    reading_ = true;
    StartRead(&in_);
  }

  void Ref() { refs_.fetch_add(1, std::memory_order_relaxed); }
  void Unref() {
    if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }
  const std::string& method() const { return method_; }
  PyObject* py_ = nullptr;  // the Python wrapper, borrowed; read and written only under the GIL

  // -- operations Python starts (its thread; never under mu_ when calling into gRPC) ----------
  void Read() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (reading_ || finishing_) return;
      reading_ = true;
    }
    StartRead(&in_);
  }

  // Queue or start a write; true when the backlog is full and Python should wait for kWritable.
  bool Write(grpc::ByteBuffer* message) {
    std::unique_lock<std::mutex> lock(mu_);
    if (finishing_) return false;
    if (writing_) {
      queued_bytes_ += message->Length();
      queue_.emplace_back();
      queue_.back().Swap(message);
      bool full = queue_.size() >= kBacklogMessages || queued_bytes_ >= kBacklogBytes;
      if (full) want_writable_ = true;
      return full;
    }
    writing_ = true;
    out_.Swap(message);
    lock.unlock();
    StartWrite(&out_);
    return false;
  }

  // End the call with status (and a last message when given and the status is OK), after any
  // queued writes. Only the first finish (Python's or OnCancel's) counts.
  void Close(grpc::ByteBuffer* message, grpc::Status status) {
    std::unique_lock<std::mutex> lock(mu_);
    if (finishing_) return;
    finishing_ = true;
    bool with_message = message != nullptr && status.ok();
    if (writing_) {
      if (with_message) {
        queue_.emplace_back();
        queue_.back().Swap(message);
      }
      finish_pending_ = true;
      status_ = std::move(status);
      return;
    }
    lock.unlock();
    if (with_message) {
      out_.Swap(message);
      StartWriteAndFinish(&out_, grpc::WriteOptions(), std::move(status));
    } else {
      Finish(std::move(status));
    }
  }

  // The client's metadata; false once the call is over (its context is gone then).
  bool Metadata(std::vector<std::pair<std::string, std::string>>* out) {
    std::lock_guard<std::mutex> lock(mu_);  // OnDone waits for this, so ctx_ stays valid
    if (done_) return false;
    for (const auto& item : ctx_->client_metadata()) {
      out->emplace_back(std::string(item.first.data(), item.first.size()),
                        std::string(item.second.data(), item.second.size()));
    }
    return true;
  }

  bool cancelled() {
    std::lock_guard<std::mutex> lock(mu_);
    return cancelled_;
  }

  // -- reactions (gRPC's threads, no GIL) --------------------------------------------------
  void OnReadDone(bool ok) override {
    bool tell;
    {
      std::lock_guard<std::mutex> lock(mu_);
      reading_ = false;
      tell = !finishing_;  // once Python has finished the call it wants no more reads
    }
    if (tell) hub_->Push(this, ok ? kMessage : kReadsDone, ok ? &in_ : nullptr);
  }

  void OnWriteDone(bool ok) override {
    std::unique_lock<std::mutex> lock(mu_);
    if (ok && !queue_.empty()) {
      out_.Swap(&queue_.front());
      queue_.pop_front();
      queued_bytes_ -= out_.Length();
      lock.unlock();
      StartWrite(&out_);
      return;
    }
    writing_ = false;
    queue_.clear();  // empty unless the write failed; then the stream is broken
    queued_bytes_ = 0;
    bool wake = want_writable_;
    want_writable_ = false;
    bool finish = finish_pending_;
    finish_pending_ = false;
    grpc::Status status = std::move(status_);
    lock.unlock();
    if (finish) Finish(std::move(status));
    if (wake) hub_->Push(this, kWritable, nullptr);
  }

  // The client cancelled, disconnected or ran past its deadline, or the server shut down past
  // its grace period. gRPC still needs a Finish: given here unless Python has given one.
  void OnCancel() override {
    std::unique_lock<std::mutex> lock(mu_);
    cancelled_ = true;
    if (finishing_) return;  // Python is done with it
    finishing_ = true;
    bool finish_now = !writing_;
    if (!finish_now) {  // the write in flight fails; OnWriteDone finishes
      finish_pending_ = true;
      status_ = grpc::Status::CANCELLED;
    }
    lock.unlock();
    if (finish_now) Finish(grpc::Status::CANCELLED);
    hub_->Push(this, kCancelled, nullptr);
  }

  void OnDone() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
    }
    Unref();  // gRPC's reference
  }

 private:
  ~Call() override = default;

  Hub* hub_;
  grpc::GenericCallbackServerContext* ctx_;  // valid until OnDone
  const std::string method_;
  std::atomic<int> refs_{1};
  grpc::ByteBuffer in_;   // the read in flight
  grpc::ByteBuffer out_;  // the write in flight
  std::mutex mu_;         // guards everything below
  std::deque<grpc::ByteBuffer> queue_;
  size_t queued_bytes_ = 0;
  grpc::Status status_;
  bool reading_ = false, writing_ = false, finishing_ = false, finish_pending_ = false;
  bool want_writable_ = false, cancelled_ = false, done_ = false;
};

Hub::~Hub() {
  for (auto& event : events_) event.call->Unref();
  close(fd_);
}

void Hub::Push(Call* call, int kind, grpc::ByteBuffer* message) {
  call->Ref();
  bool wake;
  {
    std::lock_guard<std::mutex> lock(mu_);
    events_.push_back(Event{call, kind, grpc::ByteBuffer()});
    if (message != nullptr) events_.back().message.Swap(message);
    wake = events_.size() == 1;
  }
  if (wake) {
    uint64_t one = 1;
    ssize_t ignored = write(fd_, &one, sizeof one);
    (void)ignored;
  }
}

class Service final : public grpc::CallbackGenericService {
 public:
  explicit Service(Hub* hub) : hub_(hub) {}
  grpc::ServerGenericBidiReactor* CreateReactor(grpc::GenericCallbackServerContext* ctx) override {
    return new Call(hub_, ctx);
  }

 private:
  Hub* hub_;
};

// ===================================== Python types ==========================================

// Bytes-like objects (or a list/tuple of them) -> one gRPC slice, copied once.
bool ToByteBuffer(PyObject* data, grpc::ByteBuffer* out) {
  bool many = PyList_Check(data) || PyTuple_Check(data);
  PyObject* parts = many ? PySequence_Fast(data, "") : PyTuple_Pack(1, data);
  if (parts == nullptr) return false;
  Py_ssize_t n = PySequence_Fast_GET_SIZE(parts);
  std::vector<Py_buffer> views(n);
  size_t total = 0;
  Py_ssize_t got = 0;
  for (; got < n; ++got) {
    if (PyObject_GetBuffer(PySequence_Fast_GET_ITEM(parts, got), &views[got], PyBUF_C_CONTIGUOUS) < 0) break;
    total += views[got].len;
  }
  bool ok = got == n;
  if (ok) {
    grpc_slice slice = grpc_slice_malloc(total);
    auto copy = [&] {
      uint8_t* p = GRPC_SLICE_START_PTR(slice);
      for (auto& view : views) {
        std::memcpy(p, view.buf, view.len);
        p += view.len;
      }
    };
    if (total >= kReleaseGilBytes) {
      Py_BEGIN_ALLOW_THREADS copy();
      Py_END_ALLOW_THREADS
    } else {
      copy();
    }
    grpc::Slice wrapped(slice, grpc::Slice::STEAL_REF);
    grpc::ByteBuffer buffer(&wrapped, 1);
    out->Swap(&buffer);
  }
  for (Py_ssize_t i = 0; i < got; ++i) PyBuffer_Release(&views[i]);
  Py_DECREF(parts);
  return ok;
}

PyObject* ToBytes(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  if (!buffer.Dump(&slices).ok()) return PyErr_Format(PyExc_ValueError, "unreadable message");
  size_t total = 0;
  for (auto& s : slices) total += s.size();
  PyObject* bytes = PyBytes_FromStringAndSize(nullptr, static_cast<Py_ssize_t>(total));
  if (bytes == nullptr) return nullptr;
  char* p = PyBytes_AS_STRING(bytes);
  for (auto& s : slices) {
    std::memcpy(p, s.begin(), s.size());
    p += s.size();
  }
  return bytes;
}

// -- Call: the Python handle on one RPC ----------------------------------------------------
struct CallObject {
  PyObject_HEAD Call* call;
  PyObject* method;   // str
  PyObject* handler;  // what Python attaches (its task or stream state); None by default
};

void CallDealloc(CallObject* self) {
  self->call->py_ = nullptr;
  self->call->Unref();
  Py_XDECREF(self->method);
  Py_XDECREF(self->handler);
  PyTypeObject* type = Py_TYPE(self);
  PyObject_Free(self);
  Py_DECREF(type);  // instances of a heap type hold a reference to it
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
  if (out == nullptr) return nullptr;
  for (size_t i = 0; i < items.size(); ++i) {
    const auto& [key, value] = items[i];
    bool binary = key.size() > 4 && key.compare(key.size() - 4, 4, "-bin") == 0;  // as grpcio gives them
    PyObject* item = binary ? Py_BuildValue("(s#y#)", key.data(), key.size(), value.data(), value.size())
                            : Py_BuildValue("(s#s#)", key.data(), key.size(), value.data(), value.size());
    if (item == nullptr) {
      Py_DECREF(out);
      return nullptr;
    }
    PyTuple_SET_ITEM(out, static_cast<Py_ssize_t>(i), item);
  }
  return out;
}

PyObject* CallCancelled(CallObject* self, void*) { return PyBool_FromLong(self->call->cancelled()); }

PyObject* CallGetHandler(CallObject* self, void*) {
  Py_INCREF(self->handler);
  return self->handler;
}

int CallSetHandler(CallObject* self, PyObject* value, void*) {
  Py_XINCREF(value);
  Py_XSETREF(self->handler, value ? value : (Py_INCREF(Py_None), Py_None));
  return 0;
}

PyMethodDef kCallMethods[] = {
    {"read", reinterpret_cast<PyCFunction>(CallRead), METH_NOARGS,
     "read()\n--\n\nAsk for the stream's next message (one kMessage, or kReadsDone at its end)."},
    {"write", reinterpret_cast<PyCFunction>(CallWrite), METH_O,
     "write(data)\n--\n\nSend one message (bytes-like, or a sequence of them joined); True when "
     "the backlog is full and the caller should wait for kWritable."},
    {"finish", reinterpret_cast<PyCFunction>(CallFinish), METH_VARARGS,
     "finish(data, code, details)\n--\n\nEnd the call after queued writes: the last message "
     "(None for none; dropped unless code is 0) and the status."},
    {"metadata", reinterpret_cast<PyCFunction>(CallMetadata), METH_NOARGS,
     "metadata()\n--\n\nThe client's metadata as (key, value) pairs; () once the call is over."},
    {nullptr, nullptr, 0, nullptr}};

PyMemberDef kCallMembers[] = {
    {"method", T_OBJECT_EX, offsetof(CallObject, method), READONLY, "the full method name"},
    {nullptr, 0, 0, 0, nullptr}};

PyGetSetDef kCallGetSet[] = {
    {"handler", reinterpret_cast<getter>(CallGetHandler), reinterpret_cast<setter>(CallSetHandler),
     "what Python attaches to the call (None by default)", nullptr},
    {"cancelled", reinterpret_cast<getter>(CallCancelled), nullptr, "the client cancelled it", nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr}};

PyType_Slot kCallSlots[] = {
    {Py_tp_doc, const_cast<char*>("One RPC (created by Server.drain).")},
    {Py_tp_dealloc, reinterpret_cast<void*>(CallDealloc)},
    {Py_tp_methods, kCallMethods},
    {Py_tp_members, kCallMembers},
    {Py_tp_getset, kCallGetSet},
    {0, nullptr}};
PyType_Spec kCallSpec = {"tritium.frontends.kserve_grpc._native.Call", sizeof(CallObject), 0,
                         Py_TPFLAGS_DEFAULT | Py_TPFLAGS_DISALLOW_INSTANTIATION, kCallSlots};
PyTypeObject* CallType = nullptr;  // set at module init

// The wrapper of call (created on its first event; one at a time). Steals the event's reference
// when it creates one.
PyObject* WrapCall(Call* call) {
  if (call->py_ != nullptr) {
    call->Unref();
    Py_INCREF(call->py_);
    return call->py_;
  }
  auto* self = PyObject_New(CallObject, CallType);
  if (self == nullptr) {
    call->Unref();
    return nullptr;
  }
  self->call = call;
  self->method = PyUnicode_DecodeUTF8(call->method().data(), call->method().size(), "replace");
  Py_INCREF(Py_None);
  self->handler = Py_None;
  if (self->method == nullptr) {
    Py_DECREF(self);
    return nullptr;
  }
  call->py_ = reinterpret_cast<PyObject*>(self);
  return call->py_;
}

// -- Server: the gRPC server and its event queue -------------------------------------------
struct ServerObject {
  PyObject_HEAD Hub* hub;
  Service* service;
  grpc::Server* server;  // null before start() and after shutdown()
};

// Stop accepting calls, cancel those still running after grace_s, and wait until gRPC is done
// with every call (all OnDone ran). Blocks: the caller releases the GIL.
void StopServer(grpc::Server* server, double grace_s) {
  auto deadline = std::chrono::system_clock::now() +
                  std::chrono::duration_cast<std::chrono::system_clock::duration>(
                      std::chrono::duration<double>(grace_s > 0 ? grace_s : 0));
  server->Shutdown(deadline);
  server->Wait();
  delete server;
}

PyObject* ServerNew(PyTypeObject* type, PyObject*, PyObject*) {
  auto* self = reinterpret_cast<ServerObject*>(type->tp_alloc(type, 0));
  if (self == nullptr) return nullptr;
  self->hub = new Hub();
  if (self->hub->fd() < 0) {
    delete self->hub;
    self->hub = nullptr;
    Py_DECREF(self);
    return PyErr_SetFromErrno(PyExc_OSError);
  }
  self->service = new Service(self->hub);
  self->server = nullptr;
  return reinterpret_cast<PyObject*>(self);
}

void ServerDealloc(ServerObject* self) {
  if (self->server != nullptr) {
    grpc::Server* server = self->server;
    self->server = nullptr;
    Py_BEGIN_ALLOW_THREADS StopServer(server, 0);
    Py_END_ALLOW_THREADS
  }
  delete self->service;  // after the server: gRPC uses it until then
  delete self->hub;      // after the server: no reaction pushes any more
  PyTypeObject* type = Py_TYPE(self);
  type->tp_free(reinterpret_cast<PyObject*>(self));
  Py_DECREF(type);
}

PyObject* ServerStart(ServerObject* self, PyObject* args) {
  const char* address;
  int max_receive;
  PyObject* options;
  if (!PyArg_ParseTuple(args, "siO", &address, &max_receive, &options)) return nullptr;
  if (self->server != nullptr) return PyErr_Format(PyExc_RuntimeError, "already started");
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &port);
  builder.RegisterCallbackGenericService(self->service);
  builder.SetMaxReceiveMessageSize(max_receive);
  builder.SetMaxSendMessageSize(-1);
  PyObject* items = PySequence_Fast(options, "options: a sequence of (name, int or str) pairs");
  if (items == nullptr) return nullptr;
  for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(items); ++i) {
    const char* name;
    PyObject* value;
    if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(items, i), "sO", &name, &value)) {
      Py_DECREF(items);
      return nullptr;
    }
    if (PyLong_Check(value)) {
      builder.AddChannelArgument(name, static_cast<int>(PyLong_AsLong(value)));
    } else if (PyUnicode_Check(value)) {
      builder.AddChannelArgument(name, std::string(PyUnicode_AsUTF8(value)));
    } else {
      Py_DECREF(items);
      return PyErr_Format(PyExc_TypeError, "channel argument %s: expected int or str", name);
    }
  }
  Py_DECREF(items);
  if (PyErr_Occurred()) return nullptr;
  std::unique_ptr<grpc::Server> server;
  Py_BEGIN_ALLOW_THREADS server = builder.BuildAndStart();
  Py_END_ALLOW_THREADS if (server == nullptr || port == 0) {
    return PyErr_Format(PyExc_OSError, "could not bind %s", address);
  }
  self->server = server.release();
  return PyLong_FromLong(port);
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
      payload = event.kind == kMessage ? ToBytes(event.message) : (Py_INCREF(Py_None), Py_None);
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
  grpc::Server* server = self->server;
  self->server = nullptr;
  if (server != nullptr) {
    Py_BEGIN_ALLOW_THREADS StopServer(server, grace);
    Py_END_ALLOW_THREADS
  }
  Py_RETURN_NONE;
}

PyMethodDef kServerMethods[] = {
    {"start", reinterpret_cast<PyCFunction>(ServerStart), METH_VARARGS,
     "start(address, max_receive_message_length, options)\n--\n\nBind and serve; returns the "
     "port. Raises OSError when the address cannot be bound."},
    {"fileno", reinterpret_cast<PyCFunction>(ServerFileno), METH_NOARGS,
     "fileno()\n--\n\nThe eventfd that is readable while events wait for drain()."},
    {"drain", reinterpret_cast<PyCFunction>(ServerDrain), METH_NOARGS,
     "drain()\n--\n\nTake every waiting event: a list of (call, kind, payload) tuples."},
    {"shutdown", reinterpret_cast<PyCFunction>(ServerShutdown), METH_VARARGS,
     "shutdown(grace_s)\n--\n\nRefuse new calls, cancel running ones after grace_s and wait "
     "until all are over. Blocks with the GIL released (run it in a thread)."},
    {nullptr, nullptr, 0, nullptr}};

PyType_Slot kServerSlots[] = {
    {Py_tp_doc, const_cast<char*>("A gRPC server whose calls all go to Python through drain().")},
    {Py_tp_new, reinterpret_cast<void*>(ServerNew)},
    {Py_tp_dealloc, reinterpret_cast<void*>(ServerDealloc)},
    {Py_tp_methods, kServerMethods},
    {0, nullptr}};
PyType_Spec kServerSpec = {"tritium.frontends.kserve_grpc._native.Server", sizeof(ServerObject), 0,
                           Py_TPFLAGS_DEFAULT, kServerSlots};

// -- split_raw_inputs: ModelInferRequest bytes -> (other fields, raw_input_contents views) ----
bool Varint(const uint8_t* p, size_t end, size_t* pos, uint64_t* value) {
  *value = 0;
  for (int shift = 0; shift <= 63; shift += 7) {
    if (*pos >= end) return false;
    uint8_t byte = p[(*pos)++];
    *value |= static_cast<uint64_t>(byte & 0x7F) << shift;
    if (byte < 0x80) return true;
  }
  return false;
}

PyObject* SplitRawInputs(PyObject*, PyObject* data) {
  constexpr uint64_t kRawInputField = 7;
  Py_buffer view;
  if (PyObject_GetBuffer(data, &view, PyBUF_SIMPLE) < 0) return nullptr;
  const auto* p = static_cast<const uint8_t*>(view.buf);
  const size_t end = static_cast<size_t>(view.len);
  std::vector<std::pair<size_t, size_t>> keep, raws;  // [begin, end) ranges
  const char* error = nullptr;
  size_t pos = 0, kept = 0;
  while (pos < end && error == nullptr) {
    size_t start = pos;
    uint64_t tag, n;
    if (!Varint(p, end, &pos, &tag)) {
      error = "truncated varint";
      break;
    }
    switch (tag & 7) {
      case 2:
        if (!Varint(p, end, &pos, &n)) error = "truncated varint";
        else if (n > end - pos) error = "field runs past the end";
        else if ((tag >> 3) == kRawInputField) raws.emplace_back(pos, pos + n);
        pos += error ? 0 : n;
        if (error || (tag >> 3) == kRawInputField) continue;
        break;
      case 0:
        if (!Varint(p, end, &pos, &n)) error = "truncated varint";
        break;
      case 1:
      case 5:
        pos += (tag & 7) == 1 ? 8 : 4;
        if (pos > end) error = "field runs past the end";
        break;
      default:
        PyBuffer_Release(&view);
        return PyErr_Format(PyExc_ValueError, "wire type %d", static_cast<int>(tag & 7));
    }
    if (error) break;
    if (!keep.empty() && keep.back().second == start) keep.back().second = pos;
    else keep.emplace_back(start, pos);
    kept += pos - start;
  }
  if (error != nullptr) {
    PyBuffer_Release(&view);
    return PyErr_Format(PyExc_ValueError, "%s", error);
  }
  PyObject* rest = PyBytes_FromStringAndSize(nullptr, static_cast<Py_ssize_t>(kept));
  if (rest != nullptr) {
    char* q = PyBytes_AS_STRING(rest);
    for (auto& [b, e] : keep) {
      std::memcpy(q, p + b, e - b);
      q += e - b;
    }
  }
  PyBuffer_Release(&view);
  PyObject* whole = rest != nullptr ? PyMemoryView_FromObject(data) : nullptr;
  PyObject* list = whole != nullptr ? PyList_New(static_cast<Py_ssize_t>(raws.size())) : nullptr;
  for (size_t i = 0; list != nullptr && i < raws.size(); ++i) {
    PyObject* range = PySlice_New(PyLong_FromSize_t(raws[i].first), PyLong_FromSize_t(raws[i].second), nullptr);
    PyObject* part = range != nullptr ? PyObject_GetItem(whole, range) : nullptr;
    Py_XDECREF(range);
    if (part == nullptr) Py_CLEAR(list);
    else PyList_SET_ITEM(list, static_cast<Py_ssize_t>(i), part);
  }
  Py_XDECREF(whole);
  if (list == nullptr) {
    Py_XDECREF(rest);
    return nullptr;
  }
  return Py_BuildValue("(NN)", rest, list);
}

PyMethodDef kModuleMethods[] = {
    {"split_raw_inputs", SplitRawInputs, METH_O,
     "split_raw_inputs(data)\n--\n\nA serialized ModelInferRequest -> (its other fields as bytes, "
     "its raw_input_contents as memoryviews of data). Raises ValueError when malformed."},
    {nullptr, nullptr, 0, nullptr}};

PyModuleDef kModule = {PyModuleDef_HEAD_INIT, "_native",
                       "tritium's native gRPC transport (gRPC C++ callback API, generic service).",
                       -1, kModuleMethods, nullptr, nullptr, nullptr, nullptr};

}  // namespace

PyMODINIT_FUNC PyInit__native() {
  PyObject* module = PyModule_Create(&kModule);
  if (module == nullptr) return nullptr;
  CallType = reinterpret_cast<PyTypeObject*>(PyType_FromSpec(&kCallSpec));
  PyObject* server_type = PyType_FromSpec(&kServerSpec);
  if (CallType == nullptr || server_type == nullptr || PyModule_AddObject(module, "Server", server_type) < 0 ||
      PyModule_AddIntConstant(module, "MESSAGE", kMessage) < 0 ||
      PyModule_AddIntConstant(module, "READS_DONE", kReadsDone) < 0 ||
      PyModule_AddIntConstant(module, "CANCELLED", kCancelled) < 0 ||
      PyModule_AddIntConstant(module, "WRITABLE", kWritable) < 0) {
    Py_DECREF(module);
    return nullptr;
  }
  return module;
}
