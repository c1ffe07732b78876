#ifndef LINSERVE_SERVER_NET_HTTP_EXCHANGE_H_
#define LINSERVE_SERVER_NET_HTTP_EXCHANGE_H_

#include <cstdint>
#include <functional>
#include <string>

#include "server/net/http_message.h"

namespace linserve {

// One request's answer, as its handler gives it: whole, or as a chunked
// stream. A handler may answer at once or later, from any thread; the
// connection does its work on its own strand and reads no further request
// until the answer has ended. Thread-safe.
class HttpExchange {
 public:
  virtual ~HttpExchange() = default;

  // The whole answer. Once, and nothing else after it.
  virtual void Reply(HttpResponse response) = 0;

  // A streamed answer: `head`'s status and headers now (its body is
  // ignored), then each chunk in order, then the end.
  virtual void StartStream(HttpResponse head) = 0;
  virtual void SendChunk(std::string data) = 0;
  virtual void EndStream() = 0;
  // Chunks given to SendChunk that are not yet on the wire: what a slow
  // reader leaves queued.
  virtual int64_t UnsentChunks() const = 0;

  // `callback` runs once, on the connection's strand, if the client goes
  // away (the connection reads its end or fails, a write fails or misses its
  // deadline, the server stops) before the answer has ended. It runs at
  // once when that has happened already. A client that only ended its
  // sending side still gets an answer the handler gives, as nginx would
  // take it; a handler that has none to give calls Abandon.
  virtual void OnClientGone(std::function<void()> callback) = 0;
  // The handler gives up its answer (its client has gone): the connection
  // closes.
  virtual void Abandon() = 0;
  // Runs `work` on the connection's strand (never inside this call).
  virtual void Post(std::function<void()> work) = 0;
};

}  // namespace linserve

#endif  // LINSERVE_SERVER_NET_HTTP_EXCHANGE_H_
