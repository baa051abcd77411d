#include "common/http/responder.h"

#include <utility>

#include "common/http/wire_format.h"

namespace tessera::http {

Responder::Responder(int version, bool keep_alive, size_t max_unsent_bytes,
                     std::chrono::milliseconds stall_timeout)
    : version_(version),
      keep_alive_(keep_alive),
      max_unsent_bytes_(max_unsent_bytes),
      stall_timeout_(stall_timeout) {}

void Responder::Send(Response response) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (began_) return;
    began_ = true;
  }
  Queue(FormatResponse(response, version_, keep_alive_), /*finish=*/true, !keep_alive_);
}

bool Responder::Begin(int status, std::string_view content_type, const HeaderList& headers) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (began_ || gone_) return false;
    began_ = true;
  }
  Queue(FormatStreamHead(status, content_type, headers, version_, keep_alive_), false, false);
  return !ClientGone();
}

bool Responder::Write(std::string_view data) {
  {
    std::unique_lock<std::mutex> lock(mutex_);
    if (!began_ || finished_) return false;
    const bool room = room_.wait_for(lock, stall_timeout_, [this] {
      return gone_ || unsent_ <= max_unsent_bytes_;
    });
    if (!room) gone_ = true;  // the client accepted nothing for the whole stall timeout
    if (gone_) return false;
  }
  Queue(FrameStreamPiece(data, version_), false, false);
  return !ClientGone();
}

void Responder::End() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!began_ || finished_) return;
  }
  // An HTTP/1.0 stream has no length: only closing the connection ends it.
  Queue(std::string(StreamTrailer(version_)), /*finish=*/true, version_ == 10 || !keep_alive_);
}

bool Responder::ClientGone() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return gone_;
}

bool Responder::Answered() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return began_;
}

void Responder::SetWake(std::function<void()> wake) {
  std::lock_guard<std::mutex> lock(mutex_);
  wake_ = std::move(wake);
}

Responder::Output Responder::TakeOutput() {
  std::lock_guard<std::mutex> lock(mutex_);
  Output output{.bytes = std::move(pending_), .finished = finished_, .close_after = close_after_};
  pending_.clear();
  return output;
}

void Responder::Written(size_t bytes) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    unsent_ -= std::min(unsent_, bytes);
  }
  room_.notify_all();
}

void Responder::MarkGone() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    gone_ = true;
  }
  room_.notify_all();
}

void Responder::Queue(std::string bytes, bool finish, bool close_after) {
  std::function<void()> wake;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (finished_) return;
    unsent_ += bytes.size();
    pending_ += bytes;
    finished_ = finish;
    close_after_ = close_after_ || close_after;
    wake = wake_;
  }
  if (wake) wake();
}

}  // namespace tessera::http
