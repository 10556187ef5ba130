// tritium's native gRPC transport, the C++ half: a gRPC server on the async API with one generic
// service, whose calls are handed to Python as events. No Python here (_native_module.cc has that).
//
// What it does. Every call, whatever its method, is a Call that reads raw messages and writes raw
// messages. Its method name, message bytes and status travel to and from Python, where the
// servicer parses and serializes them with the generated protobuf modules; C++ needs no generated
// code and knows nothing of KServe.
//
// Threads. One polling thread (Engine::Poll) takes every completion off the server's completion
// queue and hands it to its Call (Call::Completed). It never takes the GIL. What Python must see
// (a message, the client's half-close, a cancellation, room in a write backlog) it pushes onto the
// Hub under a mutex; when the queue turns non-empty it signals an eventfd, which the asyncio loop
// watches, and Python takes the whole queue in one call (Hub::Take). Python starts operations
// (read, write, finish) from its own thread. Locks: Call::mu_ before Hub::gate_ or Hub::mu_; the
// GIL is never needed while one of them is held.
//
// Lifetimes. A Call is reference counted: one reference per operation in flight (each returns a
// tag on the queue), one per queued event, one for its Python wrapper. The last Unref deletes it,
// on either thread. Once a call is over (its done-notification came) no operation starts on it,
// and once the queue is shut down none starts at all (Hub::Start), so a Python wrapper may outlive
// its call and the server.
//
// Why the async API and not the callback API: the callback API of gRPC 1.51 runs reactions on at
// least two "nexting" threads that hand completions between them; measured here (a bare server,
// perf_analyzer) that cost 50-80 µs more CPU per unary call at concurrency 1, and 25-30 µs at 8,
// than one polling thread (docs/architecture.md).
#pragma once

#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace tritium_grpc {

// Event kinds, as Python sees them (native_transport.py names them).
enum Kind { kMessage = 0, kReadsDone = 1, kCancelled = 2, kWritable = 3 };

// How many Call objects are alive (a leak check for the tests).
extern std::atomic<long> live_calls;

// Buffers for large messages (kMin bytes and up, in power-of-two classes), kept for reuse. A
// message copied into fresh memory costs page faults and page clearing on every call, which
// measured here cost more than the copy itself (reuse cut a 1 MiB echo's CPU by 40-50 %).
// Up to kKeep bytes wait for reuse; buffers over kMax are not kept. Any thread.
namespace pool {
constexpr size_t kMin = 64u << 10, kMax = 64u << 20, kKeep = 64u << 20;
void* Get(size_t size);  // at least size bytes; throws std::bad_alloc
void Put(void* data);    // a buffer from Get
}  // namespace pool

class Call;

struct Event {
  Call* call;  // holds a reference
  int kind;
  grpc::ByteBuffer message;  // kMessage only
};

// The queue of events for Python, the eventfd that says it is not empty, and the gate that keeps
// operations from starting once the completion queue shuts down.
class Hub {
 public:
  Hub();
  // The largest request message once inflated, bytes (SIZE_MAX: no limit). Set before serving.
  size_t max_message = SIZE_MAX;
  ~Hub();
  int fd() const { return fd_; }
  // Any thread. Takes a reference on call; swaps *message out when given.
  void Push(Call* call, int kind, grpc::ByteBuffer* message);
  // Python's thread. Clears the eventfd, then takes the queue: an event pushed after that read
  // signals again, so none is missed (at worst a wake-up finds the queue empty).
  std::vector<Event> Take();
  // Run start() (which starts an operation) unless the queue is closed; false when closed.
  // Starts share the gate (a write started inline may take a while); only Close excludes them.
  template <class F>
  bool Start(F start) {
    std::shared_lock<std::shared_mutex> lock(gate_);
    if (closed_) return false;
    start();
    return true;
  }
  // Close the gate and shut the queue down with shutdown(), atomically with respect to Start.
  template <class F>
  void Close(F shutdown) {
    std::unique_lock<std::shared_mutex> lock(gate_);
    closed_ = true;
    shutdown();
  }

 private:
  std::mutex mu_;
  std::vector<Event> events_;
  int fd_;
  std::shared_mutex gate_;
  bool closed_ = false;
};

// One RPC. Every operation started on it (request, read, write, finish, done-notification)
// returns its Tag on the completion queue. Reads one message at a time: the first once the call
// arrives, each next one when Python asks (Read). Writes one at a time, queueing the rest here.
class Call {
 public:
  enum Op { kRequest, kRead, kWrite, kFinish, kDone };
  struct Tag {
    Call* call;
    Op op;
  };
  // A stream's queued writes beyond which Write asks Python to wait for kWritable.
  static constexpr size_t kBacklogMessages = 16;
  static constexpr size_t kBacklogBytes = 8u << 20;

  explicit Call(Hub* hub);
  void Ref() { refs_.fetch_add(1, std::memory_order_relaxed); }
  void Unref() {
    if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }
  // Ask gRPC for the next incoming call, to arrive as this one.
  void Arm(grpc::AsyncGenericService* service, grpc::ServerCompletionQueue* cq);

  // Python's thread (valid once the call arrived).
  const std::string& method() const { return ctx_.method(); }
  void Metadata(std::vector<std::pair<std::string, std::string>>* out) const;
  bool cancelled();
  void Read();
  // Queue or start a write; true when the backlog is full and Python should wait for kWritable.
  bool Write(grpc::ByteBuffer* message);
  // End the call after the queued writes, with status and (when given and status is OK) a last
  // message. Only the first finish counts, and none once the call is over.
  void Close(grpc::ByteBuffer* message, grpc::Status status);
  void* py = nullptr;  // the Python wrapper (borrowed; read and written only under the GIL)

  // The polling thread: the operation op completed. True for a call that arrived.
  bool Completed(Op op, bool ok);

 private:
  ~Call();
  // A message that came compressed (gzip or deflate; the server leaves per-message decompression
  // to tritium) is inflated in place, a step at a time, and refused once past hub_->max_message:
  // gRPC C++ 1.51 inflates a message whole before it checks its size, so a small compression bomb
  // took gigabytes. Under mu_; OK for a message that was not compressed.
  grpc::Status Inflate();
  void StartRead();  // these three run under mu_
  void StartWrite();
  void StartFinish();

  Hub* hub_;
  grpc::GenericServerContext ctx_;
  grpc::GenericServerAsyncReaderWriter stream_;
  Tag tags_[kDone + 1];
  std::atomic<int> refs_{1};  // the request's
  grpc::ByteBuffer in_;       // the read in flight
  grpc::ByteBuffer out_;      // the write in flight
  std::mutex mu_;             // guards what follows, and the starting of operations
  std::deque<grpc::ByteBuffer> queue_;
  size_t queued_bytes_ = 0;
  grpc::Status status_;
  bool reading_ = false, writing_ = false, finishing_ = false;
  bool want_writable_ = false, cancelled_ = false, over_ = false;
};

// The gRPC server, its completion queue and the thread that polls it. One call is armed (asked
// for) at a time; arming stops when the server shuts down.
class Engine {
 public:
  // Bind address and serve. options: channel arguments (int or string values).
  // Throws std::runtime_error when the address cannot be bound.
  Engine(Hub* hub, const std::string& address, int max_receive_message_length,
         const std::vector<std::pair<std::string, int>>& int_options,
         const std::vector<std::pair<std::string, std::string>>& string_options);
  // Refuse new calls, cancel those still running once the grace period set by set_grace has
  // passed, and wait until every tag is back. Blocks: call it without the GIL.
  ~Engine();
  void set_grace(double grace_s);

 private:
  void Arm();
  void Poll();

  Hub* hub_;
  std::unique_ptr<grpc::AsyncGenericService> service_;  // destroyed last, the server first
  std::unique_ptr<grpc::ServerCompletionQueue> cq_;
  std::unique_ptr<grpc::Server> server_;
  std::chrono::system_clock::time_point deadline_;
  std::mutex mu_;  // guards stopping_
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace tritium_grpc
