#ifndef LINSERVE_TESTS_SERVER_HTTP_CLIENT_H_
#define LINSERVE_TESTS_SERVER_HTTP_CLIENT_H_

// A real HTTP client (cpp-httplib) for the end-to-end tests of the HTTP API.

#include <httplib.h>

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace linserve {

struct HttpReply {
  int status = 0;  // 0: the request failed (no answer; see `error`)
  httplib::Error error = httplib::Error::Success;
  httplib::Headers headers;
  std::string body;
  nlohmann::json json;                 // the body parsed, or discarded when it is not JSON
  std::vector<nlohmann::json> events;  // a stream's data events ([DONE] excluded)
  bool done = false;                   // the stream ended with data: [DONE]
};

class HttpTestClient {
 public:
  // Plain HTTP to 127.0.0.1:`port`.
  explicit HttpTestClient(int port);
  // HTTPS, verifying the server with the PEM roots in `ca_file`, and
  // presenting a client certificate when `cert_file` is set.
  HttpTestClient(int port, const std::string& ca_file, const std::string& cert_file = "",
                 const std::string& key_file = "");

  // How long a read may wait (default 120 s).
  void SetReadTimeout(int seconds) { client_->set_read_timeout(seconds, 0); }

  HttpReply Get(const std::string& path, const httplib::Headers& headers = {});
  HttpReply Post(const std::string& path, const std::string& body,
                 const httplib::Headers& headers = {});
  HttpReply Post(const std::string& path, const nlohmann::json& body,
                 const httplib::Headers& headers = {}) {
    return Post(path, body.dump(), headers);
  }
  // A streamed POST read event by event; `keep_reading` sees each data
  // event and returns false to close the connection there.
  HttpReply Stream(const std::string& path, const nlohmann::json& body,
                   const httplib::Headers& headers = {},
                   std::function<bool(const nlohmann::json&)> keep_reading = nullptr);

 private:
  std::unique_ptr<httplib::Client> client_;
};

// The reply of a request made on a cpp-httplib client directly (PUT,
// DELETE, a POST of another media type).
HttpReply FromResult(const httplib::Result& result);

// A response header's value ("" when absent).
std::string Header(const HttpReply& reply, const std::string& name);

// The text of a completion (or chat completion) answer: whole or streamed.
std::string CompletionText(const HttpReply& reply);

}  // namespace linserve

#endif  // LINSERVE_TESTS_SERVER_HTTP_CLIENT_H_
