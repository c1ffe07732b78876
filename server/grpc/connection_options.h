#ifndef LINSERVE_SERVER_CONNECTION_OPTIONS_H_
#define LINSERVE_SERVER_CONNECTION_OPTIONS_H_

// What the server allows one HTTP/2 connection: how many streams at once,
// and the keepalive that finds and closes connections whose peer is gone
// (a crashed client, a dropped NAT mapping) instead of holding their fds and
// streams forever.

#include <cstdint>

#include <grpcpp/server_builder.h>

namespace linserve {

struct ConnectionOptions {
  // Streams one connection may have open at once (HTTP/2
  // SETTINGS_MAX_CONCURRENT_STREAMS): a client multiplexing more waits in
  // its own channel until one ends; it is not refused.
  int32_t max_streams_per_connection = 100;
  // The server pings a connection quiet for this long and closes it when
  // the ping is not answered within keepalive_timeout_ms.
  int32_t keepalive_time_ms = 60000;
  int32_t keepalive_timeout_ms = 20000;
  // Ping connections with no call too, so dead idle ones are reaped.
  bool keepalive_permit_without_calls = true;
  // Close connections without calls for this long / older than this (after
  // max_connection_age_grace_ms for running calls); 0: never.
  int32_t max_connection_idle_ms = 0;
  int32_t max_connection_age_ms = 0;
  int32_t max_connection_age_grace_ms = 30000;
  // A client may ping a connection without data this often; pinging faster
  // counts a strike, and past http2_max_ping_strikes the server closes the
  // connection (GOAWAY too_many_pings).
  int32_t http2_min_ping_interval_ms = 10000;
  int32_t http2_max_ping_strikes = 2;
};

// Sets the channel arguments of `options` on `builder`.
void ApplyConnectionOptions(const ConnectionOptions& options, grpc::ServerBuilder& builder);

}  // namespace linserve

#endif  // LINSERVE_SERVER_CONNECTION_OPTIONS_H_
