// The C++ half of tritium's native gRPC transport (see _native_transport.h for threads and lifetimes).
#include "_native_transport.h"

#include <sys/eventfd.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdlib>
#include <new>
#include <stdexcept>

// gRPC's sanctioned way into a ByteBuffer's C buffer (ByteBuffer names it a friend; gRPC's own
// definition is in its test utilities, which are not linked here).
namespace grpc::internal {
class GrpcByteBufferPeer {
 public:
  explicit GrpcByteBufferPeer(ByteBuffer* buffer) : buffer_(buffer) {}
  grpc_byte_buffer* c_buffer() { return buffer_->c_buffer(); }

 private:
  ByteBuffer* buffer_;
};
}  // namespace grpc::internal

namespace tritium_grpc {

std::atomic<long> live_calls{0};

// -- pool --------------------------------------------------------------------------------------
namespace pool {
namespace {
constexpr size_t kHeader = 64;  // before the data: the buffer's class (keeps the data aligned)
constexpr int kClasses = 11;    // kMin << 0 .. kMin << 10 == kMax
std::mutex mu;
std::vector<void*> free_lists[kClasses];
size_t kept = 0;

int ClassOf(size_t size) {
  int c = 0;
  while (c < kClasses && (kMin << c) < size) ++c;
  return c;  // kClasses: too large to keep
}
}  // namespace

void* Get(size_t size) {
  int c = ClassOf(size);
  if (c < kClasses) {
    std::lock_guard<std::mutex> lock(mu);
    if (!free_lists[c].empty()) {
      void* data = free_lists[c].back();
      free_lists[c].pop_back();
      kept -= kMin << c;
      return data;
    }
  }
  auto* block = static_cast<char*>(std::malloc(kHeader + (c < kClasses ? kMin << c : size)));
  if (block == nullptr) throw std::bad_alloc();
  *reinterpret_cast<int*>(block) = c;
  return block + kHeader;
}

void Put(void* data) {
  char* block = static_cast<char*>(data) - kHeader;
  int c = *reinterpret_cast<int*>(block);
  if (c < kClasses) {
    std::lock_guard<std::mutex> lock(mu);
    if (kept + (kMin << c) <= kKeep) {
      free_lists[c].push_back(data);
      kept += kMin << c;
      return;
    }
  }
  std::free(block);
}
}  // namespace pool

// -- Hub ---------------------------------------------------------------------------------------
Hub::Hub() : fd_(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {}

Hub::~Hub() {
  for (auto& event : events_) event.call->Unref();
  if (fd_ >= 0) close(fd_);
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

std::vector<Event> Hub::Take() {
  uint64_t count;
  ssize_t ignored = read(fd_, &count, sizeof count);
  (void)ignored;
  std::vector<Event> out;
  std::lock_guard<std::mutex> lock(mu_);
  out.swap(events_);
  return out;
}

// -- Call --------------------------------------------------------------------------------------
Call::Call(Hub* hub) : hub_(hub), stream_(&ctx_) {
  live_calls.fetch_add(1, std::memory_order_relaxed);
  for (int op = kRequest; op <= kDone; ++op) tags_[op] = Tag{this, static_cast<Op>(op)};
  ctx_.AsyncNotifyWhenDone(&tags_[kDone]);  // comes only for a call that arrives
}

Call::~Call() { live_calls.fetch_sub(1, std::memory_order_relaxed); }

void Call::Arm(grpc::AsyncGenericService* service, grpc::ServerCompletionQueue* cq) {
  service->RequestCall(&ctx_, &stream_, cq, cq, &tags_[kRequest]);
}

void Call::Metadata(std::vector<std::pair<std::string, std::string>>* out) const {
  for (const auto& item : ctx_.client_metadata()) {  // set when the call arrived, then constant
    out->emplace_back(std::string(item.first.data(), item.first.size()),
                      std::string(item.second.data(), item.second.size()));
  }
}

bool Call::cancelled() {
  std::lock_guard<std::mutex> lock(mu_);
  return cancelled_;
}

void Call::Read() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!reading_ && !finishing_) StartRead();
}

bool Call::Write(grpc::ByteBuffer* message) {
  std::lock_guard<std::mutex> lock(mu_);
  if (finishing_) return false;
  if (!writing_) {
    out_.Swap(message);
    StartWrite();
    return false;
  }
  queued_bytes_ += message->Length();
  queue_.emplace_back();
  queue_.back().Swap(message);
  bool full = queue_.size() >= kBacklogMessages || queued_bytes_ >= kBacklogBytes;
  if (full) want_writable_ = true;
  return full;
}

void Call::Close(grpc::ByteBuffer* message, grpc::Status status) {
  std::lock_guard<std::mutex> lock(mu_);
  if (finishing_) return;
  finishing_ = true;
  if (message != nullptr && status.ok()) {
    queue_.emplace_back();
    queue_.back().Swap(message);
  }
  status_ = std::move(status);
  if (!writing_) StartFinish();
}

bool Call::Completed(Op op, bool ok) {
  bool arrived = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    switch (op) {
      case kRequest:  // a call arrived (ok), or the server shut down before one did
        arrived = ok;
        if (ok) {
          Ref();  // the done-notification's: it will come now
          StartRead();
        }
        break;
      case kRead:  // a message, or (not ok) the client's half-close or a broken call
        reading_ = false;
        if (finishing_) break;
        if (ok) {
          grpc::Status refused = Inflate();
          if (!refused.ok()) {  // the call ends here; Python hears of it as a cancellation
            in_.Clear();
            finishing_ = true;
            status_ = std::move(refused);
            if (!writing_) StartFinish();
            hub_->Push(this, kCancelled, nullptr);
            break;
          }
        }
        hub_->Push(this, ok ? kMessage : kReadsDone, ok ? &in_ : nullptr);
        break;
      case kWrite:
        writing_ = false;
        if (!ok) queue_.clear();  // the stream is broken
        if (queue_.size() > (finishing_ ? 1u : 0u)) {
          out_.Swap(&queue_.front());
          queue_.pop_front();
          queued_bytes_ -= out_.Length();
          StartWrite();
        } else if (finishing_) {
          StartFinish();  // with the last message, if one is queued
        } else if (want_writable_) {
          want_writable_ = false;
          hub_->Push(this, kWritable, nullptr);
        }
        break;
      case kFinish:
        break;
      case kDone:  // over: finished, or cancelled (client, deadline, disconnect or shutdown)
        cancelled_ = ctx_.IsCancelled();
        if (cancelled_ && !finishing_) hub_->Push(this, kCancelled, nullptr);
        finishing_ = over_ = true;
        break;
    }
  }
  Unref();  // the completed operation's reference
  return arrived;
}

grpc::Status Call::Inflate() {
  grpc_byte_buffer* raw = grpc::internal::GrpcByteBufferPeer(&in_).c_buffer();
  if (raw == nullptr || raw->type != GRPC_BB_RAW || raw->data.raw.compression == GRPC_COMPRESS_NONE) {
    return grpc::Status::OK;
  }
  if (raw->data.raw.compression != GRPC_COMPRESS_GZIP && raw->data.raw.compression != GRPC_COMPRESS_DEFLATE) {
    return grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "Unexpected compression algorithm");
  }
  const grpc::Status too_large(grpc::StatusCode::RESOURCE_EXHAUSTED, "Decompressed message larger than max");
  const grpc::Status corrupt(grpc::StatusCode::INTERNAL, "Decompression failed due to data error");
  std::vector<grpc::Slice> slices;
  if (!in_.Dump(&slices).ok()) return corrupt;
  z_stream zs{};
  if (inflateInit2(&zs, 15 + 32) != Z_OK) return corrupt;  // 15 + 32: a zlib (deflate) or gzip header
  constexpr size_t kStep = 1u << 20;
  const size_t limit = hub_->max_message;
  size_t size = 0, capacity = 0;
  char* out = nullptr;
  int rc = Z_OK;
  grpc::Status status = grpc::Status::OK;
  for (size_t i = 0; i < slices.size() && rc != Z_STREAM_END && status.ok(); ++i) {
    zs.next_in = const_cast<Bytef*>(slices[i].begin());
    zs.avail_in = static_cast<uInt>(slices[i].size());
    do {
      if (size == capacity) {
        if (size > limit) {  // a byte past the limit is out: refuse, without inflating more
          status = too_large;
          break;
        }
        size_t next = capacity + (capacity < kStep ? kStep : capacity);  // doubling, from 1 MiB
        if (limit != SIZE_MAX && next > limit + 1) next = limit + 1;
        char* bigger = static_cast<char*>(std::realloc(out, next));
        if (bigger == nullptr) {
          status = too_large;
          break;
        }
        out = bigger;
        capacity = next;
      }
      zs.next_out = reinterpret_cast<Bytef*>(out + size);
      zs.avail_out = static_cast<uInt>(capacity - size);
      rc = inflate(&zs, Z_NO_FLUSH);
      size = capacity - zs.avail_out;
      if (rc != Z_OK && rc != Z_STREAM_END && rc != Z_BUF_ERROR) {
        status = corrupt;
        break;
      }
    } while (rc != Z_STREAM_END && (zs.avail_in > 0 || zs.avail_out == 0));
  }
  inflateEnd(&zs);
  if (status.ok() && size > limit) status = too_large;
  if (status.ok() && rc != Z_STREAM_END) status = corrupt;  // the data ended before the stream did
  if (!status.ok() || size == 0) {
    std::free(out);
    if (status.ok()) {
      grpc::Slice empty;
      in_ = grpc::ByteBuffer(&empty, 1);
    }
    return status;
  }
  grpc::Slice slice(out, size, std::free);  // the slice owns out from here
  in_ = grpc::ByteBuffer(&slice, 1);
  return status;
}

void Call::StartRead() {
  reading_ = !over_ && hub_->Start([this] {
    Ref();
    stream_.Read(&in_, &tags_[kRead]);
  });
}

void Call::StartWrite() {
  writing_ = !over_ && hub_->Start([this] {
    Ref();
    stream_.Write(out_, &tags_[kWrite]);
  });
}

void Call::StartFinish() {
  bool with_message = !queue_.empty();
  if (with_message) out_.Swap(&queue_.front());
  queue_.clear();
  if (over_) return;
  hub_->Start([this, with_message] {
    Ref();
    if (with_message) {
      stream_.WriteAndFinish(out_, grpc::WriteOptions(), status_, &tags_[kFinish]);
    } else {
      stream_.Finish(status_, &tags_[kFinish]);
    }
  });
}

// -- Engine ------------------------------------------------------------------------------------
Engine::Engine(Hub* hub, const std::string& address, int max_receive_message_length,
               const std::vector<std::pair<std::string, int>>& int_options,
               const std::vector<std::pair<std::string, std::string>>& string_options)
    : hub_(hub), service_(std::make_unique<grpc::AsyncGenericService>()) {
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &port);
  builder.RegisterAsyncGenericService(service_.get());
  for (const auto& [name, value] : int_options) builder.AddChannelArgument(name, value);
  for (const auto& [name, value] : string_options) builder.AddChannelArgument(name, value);
  builder.SetMaxReceiveMessageSize(max_receive_message_length);
  // compressed messages reach Call::Inflate still compressed (gRPC C++ 1.51 would inflate them
  // whole before checking their size)
  builder.AddChannelArgument(GRPC_ARG_ENABLE_PER_MESSAGE_DECOMPRESSION, 0);
  hub_->max_message = max_receive_message_length < 0 ? SIZE_MAX : static_cast<size_t>(max_receive_message_length);
  builder.SetMaxSendMessageSize(-1);
  cq_ = builder.AddCompletionQueue();
  server_ = builder.BuildAndStart();
  if (server_ == nullptr || port == 0) {  // could not bind: nothing was started
    if (server_ != nullptr) server_->Shutdown();
    cq_->Shutdown();
    void* tag;
    bool ok;
    while (cq_->Next(&tag, &ok)) {
    }
    throw std::runtime_error("could not bind " + address);
  }
  set_grace(0);
  Arm();
  thread_ = std::thread([this] { Poll(); });
}

Engine::~Engine() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  server_->Shutdown(deadline_);  // calls still running at the deadline are cancelled
  hub_->Close([this] { cq_->Shutdown(); });
  thread_.join();  // Poll returns once the queue is drained: every tag has come back
}

void Engine::set_grace(double grace_s) {
  deadline_ = std::chrono::system_clock::now() +
              std::chrono::duration_cast<std::chrono::system_clock::duration>(
                  std::chrono::duration<double>(grace_s > 0 ? grace_s : 0));
}

void Engine::Arm() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!stopping_) (new Call(hub_))->Arm(service_.get(), cq_.get());
}

void Engine::Poll() {
  void* tag;
  bool ok;
  while (cq_->Next(&tag, &ok)) {
    auto* t = static_cast<Call::Tag*>(tag);
    if (t->call->Completed(t->op, ok)) Arm();  // the armed call arrived: ask for the next
  }
}

}  // namespace tritium_grpc
