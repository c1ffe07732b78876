#ifndef LINSERVE_SERVER_NET_HTTP_CONNECTION_H_
#define LINSERVE_SERVER_NET_HTTP_CONNECTION_H_

// One HTTP/1.1 connection of an HttpListener (internal to server/net/: it
// includes Boost.Asio, which the rest of the server never sees).

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/strand.hpp>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "server/net/http_listener.h"
#include "server/net/http_service.h"

namespace linserve {

// What the listener and all its connections share. Connections hold it, so
// the io_context outlives every socket, even one whose exchange a handler
// still holds after the listener is gone.
struct HttpListenerShared {
  HttpListenerShared(HttpService* service, HttpLimits limits, std::string name)
      : service(service), limits(limits), name(std::move(name)) {}

  HttpService* const service;
  const HttpLimits limits;
  const std::string name;
  boost::asio::io_context io;
  std::atomic<int64_t> open{0};
  std::atomic<int64_t> refused{0};

  using Strand = boost::asio::strand<boost::asio::io_context::executor_type>;

  // Runs `work` on `strand` unless the listener has stopped: once it has,
  // work is dropped (nothing runs the io_context any more).
  void Post(const Strand& strand, std::function<void()> work);

  // Each open connection's way to close itself, for the stop; returns the
  // id that Untrack takes, or 0 once CloseAll has run (the connection
  // closes at once).
  uint64_t Track(std::function<void()> close);
  void Untrack(uint64_t id);
  // Closes every connection; after it, Post drops all work.
  void CloseAll();
  void MarkStopped();

  absl::Mutex mu;
  bool closing ABSL_GUARDED_BY(mu) = false;
  bool stopped ABSL_GUARDED_BY(mu) = false;
  uint64_t next_id ABSL_GUARDED_BY(mu) = 0;
  absl::flat_hash_map<uint64_t, std::function<void()>> closers ABSL_GUARDED_BY(mu);
};

// Serves one accepted socket, whose executor is `strand`, until it closes.
// `tls` null: plain HTTP.
void ServeHttpConnection(std::shared_ptr<HttpListenerShared> shared,
                         boost::asio::ip::tcp::socket socket, HttpListenerShared::Strand strand,
                         boost::asio::ssl::context* tls);

}  // namespace linserve

#endif  // LINSERVE_SERVER_NET_HTTP_CONNECTION_H_
