#include "tests/server/http_client.h"

#include <signal.h>

#include "client/sse.h"

namespace linserve {
namespace {

nlohmann::json ParseOrDiscard(const std::string& text) {
  return nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
}

// A server that closes the connection while a request is written (a TLS
// handshake it refuses) must fail that request, not kill the test with
// SIGPIPE: cpp-httplib's client does not ignore it.
void IgnoreSigpipe() { signal(SIGPIPE, SIG_IGN); }

}  // namespace

HttpReply FromResult(const httplib::Result& result) {
  HttpReply reply;
  reply.error = result.error();
  if (result) {
    reply.status = result->status;
    reply.headers = result->headers;
    reply.body = result->body;
    reply.json = ParseOrDiscard(reply.body);
  }
  return reply;
}


HttpTestClient::HttpTestClient(int port)
    : client_(std::make_unique<httplib::Client>("http://127.0.0.1:" + std::to_string(port))) {
  IgnoreSigpipe();
  client_->set_read_timeout(120, 0);
}

HttpTestClient::HttpTestClient(int port, const std::string& ca_file, const std::string& cert_file,
                               const std::string& key_file)
    : client_(cert_file.empty()
                  ? std::make_unique<httplib::Client>("https://localhost:" + std::to_string(port))
                  : std::make_unique<httplib::Client>("https://localhost:" + std::to_string(port),
                                                      cert_file, key_file)) {
  IgnoreSigpipe();
  client_->set_ca_cert_path(ca_file.c_str());
  client_->enable_server_certificate_verification(true);
  client_->set_read_timeout(120, 0);
}

HttpReply HttpTestClient::Get(const std::string& path, const httplib::Headers& headers) {
  return FromResult(client_->Get(path.c_str(), headers));
}

HttpReply HttpTestClient::Post(const std::string& path, const std::string& body,
                               const httplib::Headers& headers) {
  return FromResult(client_->Post(path.c_str(), headers, body, "application/json"));
}

HttpReply HttpTestClient::Stream(const std::string& path, const nlohmann::json& body,
                                 const httplib::Headers& headers,
                                 std::function<bool(const nlohmann::json&)> keep_reading) {
  HttpReply reply;
  SseReader reader;
  httplib::Request request;
  request.method = "POST";
  request.path = path;
  request.headers = headers;
  request.body = body.dump();
  request.set_header("Content-Type", "application/json");
  request.response_handler = [&](const httplib::Response& response) {
    reply.status = response.status;
    reply.headers = response.headers;
    return true;
  };
  request.content_receiver = [&](const char* data, size_t size, uint64_t, uint64_t) {
    const std::string_view bytes(data, size);
    if (reply.status != 200) {  // an error answers with one JSON body
      reply.body.append(bytes);
      return true;
    }
    for (const std::string& event : reader.Feed(bytes)) {
      if (event == "[DONE]") {
        reply.done = true;
        continue;
      }
      reply.events.push_back(ParseOrDiscard(event));
      if (keep_reading && !keep_reading(reply.events.back())) return false;
    }
    return true;
  };
  httplib::Response response;
  client_->send(request, response, reply.error);
  if (!reply.body.empty()) reply.json = ParseOrDiscard(reply.body);
  return reply;
}

std::string Header(const HttpReply& reply, const std::string& name) {
  const auto it = reply.headers.find(name);
  return it == reply.headers.end() ? "" : it->second;
}

std::string CompletionText(const HttpReply& reply) {
  std::string text;
  auto take = [&](const nlohmann::json& body) {
    if (!body.contains("choices")) return;
    for (const nlohmann::json& choice : body["choices"]) {
      if (choice.contains("text")) text += choice["text"].get<std::string>();
      if (choice.contains("message")) text += choice["message"].value("content", "");
      if (choice.contains("delta")) text += choice["delta"].value("content", "");
    }
  };
  if (reply.events.empty()) take(reply.json);
  for (const nlohmann::json& event : reply.events) take(event);
  return text;
}

}  // namespace linserve
