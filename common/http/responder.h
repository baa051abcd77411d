// Responder: how a route answers one HTTP request, from whichever thread it runs on, while the
// server's I/O thread writes the bytes. A route either sends one whole Response, or begins a
// stream and writes pieces until it ends it. The responder queues wire-framed bytes under a short
// mutex and wakes the connection; the I/O thread takes them and reports what was written.
//
// Backpressure and departure: Write blocks while more than `max_unsent_bytes` wait for the
// socket; if the client takes none of them for `stall_timeout`, or the connection closes (the
// client left, a write failed, the server stops), the client counts as gone: Write returns false
// and ClientGone() true, so the route can cancel its work.
//
// Threading: the route side (Send, Begin, Write, End, ClientGone) from one route thread at a
// time; the connection side (SetWake, TakeOutput, Written, MarkGone) from the I/O thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>

#include "common/http/http_message.h"

namespace tessera::http {

class Responder {
 public:
  Responder(int version, bool keep_alive, size_t max_unsent_bytes,
            std::chrono::milliseconds stall_timeout);

  // --- route side ---
  // The whole response; the request is done. Ignored after the first Send/Begin.
  void Send(Response response);
  // Starts a streamed response; false when the client is already gone (or it began before).
  bool Begin(int status, std::string_view content_type, const HeaderList& headers = {});
  // One piece of the stream; false once the client is gone (stop producing).
  bool Write(std::string_view data);
  // Ends the stream; the request is done.
  void End();
  bool ClientGone() const;
  // Whether the route answered at all (the server answers 500 for one that did not).
  bool Answered() const;

  // --- connection side (I/O thread) ---
  // `wake` is called, from the thread that queued output, whenever output or the end is queued.
  void SetWake(std::function<void()> wake);
  struct Output {
    std::string bytes;         // everything queued since the last take
    bool finished = false;     // the response is complete once `bytes` are written
    bool close_after = false;  // the connection must close after it (HTTP/1.0 stream, ...)
  };
  Output TakeOutput();
  void Written(size_t bytes);
  void MarkGone();

 private:
  // Queues `bytes` (and the end when `finish`), then wakes the connection.
  void Queue(std::string bytes, bool finish, bool close_after);

  const int version_;
  const bool keep_alive_;
  const size_t max_unsent_bytes_;
  const std::chrono::milliseconds stall_timeout_;
  mutable std::mutex mutex_;
  std::condition_variable room_;
  std::string pending_;    // guarded by mutex_: queued, not yet taken
  size_t unsent_ = 0;      // guarded by mutex_: queued or taken, not yet written
  bool began_ = false;     // guarded by mutex_
  bool finished_ = false;  // guarded by mutex_
  bool close_after_ = false;
  bool gone_ = false;  // guarded by mutex_
  std::function<void()> wake_;
};

}  // namespace tessera::http
