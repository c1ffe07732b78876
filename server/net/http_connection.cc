#include "server/net/http_connection.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <deque>
#include <limits>
#include <optional>
#include <utility>
#include <vector>

#include <boost/asio/post.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace linserve {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using ErrorCode = boost::system::error_code;
using Strand = HttpListenerShared::Strand;
using TlsStream = asio::ssl::stream<tcp::socket>;

constexpr size_t kReadBytes = 16 << 10;  // one read's room in the buffer
// After a refusal the connection stops sending and reads (and drops) what
// the client is still sending for a while before it closes: closing a socket
// with unread bytes resets it, and the client could lose the answer. A proxy
// that buffered a body (nginx: up to 8 MiB) sends all of it before it reads.
constexpr absl::Duration kLinger = absl::Seconds(2);
constexpr size_t kLingerBytes = 16 << 20;

tcp::socket& Socket(tcp::socket& stream) { return stream; }
tcp::socket& Socket(TlsStream& stream) { return stream.next_layer(); }

// Errors that mean the client closed or broke the connection, or we did:
// nothing to answer.
bool IsGone(const ErrorCode& error) {
  return error == http::error::end_of_stream || error == http::error::partial_message ||
         error == asio::error::eof || error == asio::error::connection_reset ||
         error == asio::error::operation_aborted || error == asio::error::broken_pipe ||
         error == asio::ssl::error::stream_truncated;
}

bool IsHttpSyntaxError(const ErrorCode& error) {
  return &error.category() == &http::make_error_code(http::error::bad_target).category();
}

void AppendField(std::string& out, absl::string_view name, absl::string_view value) {
  absl::StrAppend(&out, name, ": ");
  // Values are the server's own or echo fields the parser accepted; a CR or
  // LF must still never split a header.
  for (const char c : value) {
    if (c != '\r' && c != '\n') out.push_back(c);
  }
  out += "\r\n";
}

// The status line and headers of an answer. `length` unset: chunked (HTTP/1.1)
// or ended by the close (HTTP/1.0).
std::string ResponseHead(const HttpResponse& response, int version, bool keep_alive,
                         std::optional<size_t> length) {
  std::string head = absl::StrCat(version == 10 ? "HTTP/1.0 " : "HTTP/1.1 ", response.status, " ",
                                  HttpReason(response.status), "\r\n");
  if (!response.content_type.empty()) AppendField(head, "Content-Type", response.content_type);
  for (const auto& [name, value] : response.headers) AppendField(head, name, value);
  if (length.has_value()) {
    AppendField(head, "Content-Length", std::to_string(*length));
  } else if (version != 10) {
    AppendField(head, "Transfer-Encoding", "chunked");
  }
  AppendField(head, "Connection", keep_alive ? "keep-alive" : "close");
  head += "\r\n";
  return head;
}

template <typename Stream>
class Connection;

// The handler's side of one request: every call goes to the connection's
// strand, and calls for an answer that has ended are dropped there.
template <typename Stream>
class Exchange : public HttpExchange {
 public:
  Exchange(std::shared_ptr<Connection<Stream>> connection, uint64_t serial)
      : connection_(std::move(connection)), serial_(serial) {}

  void Reply(HttpResponse response) override {
    Run([response = std::move(response)](Connection<Stream>& c, uint64_t serial) mutable {
      c.QueueReply(serial, std::move(response));
    });
  }
  void StartStream(HttpResponse head) override {
    Run([head = std::move(head)](Connection<Stream>& c, uint64_t serial) mutable {
      c.QueueStreamStart(serial, std::move(head));
    });
  }
  void SendChunk(std::string data) override {
    connection_->unsent_chunks_.fetch_add(1);
    Run([data = std::move(data)](Connection<Stream>& c, uint64_t serial) mutable {
      c.QueueChunk(serial, std::move(data));
    });
  }
  void EndStream() override {
    Run([](Connection<Stream>& c, uint64_t serial) { c.QueueStreamEnd(serial); });
  }
  int64_t UnsentChunks() const override { return connection_->unsent_chunks_.load(); }
  void Abandon() override {
    Run([](Connection<Stream>& c, uint64_t serial) { c.Abandon(serial); });
  }
  void OnClientGone(std::function<void()> callback) override {
    Run([callback = std::move(callback)](Connection<Stream>& c, uint64_t serial) mutable {
      c.SetGoneCallback(serial, std::move(callback));
    });
  }
  void Post(std::function<void()> work) override {
    connection_->Post([work = std::move(work)](Connection<Stream>&) { work(); });
  }

 private:
  template <typename Work>
  void Run(Work work) {
    connection_->Post([work = std::move(work), serial = serial_](Connection<Stream>& c) mutable {
      work(c, serial);
    });
  }

  const std::shared_ptr<Connection<Stream>> connection_;
  const uint64_t serial_;
};

// Reads requests one at a time within the limits, hands each to the service
// and writes its answer; everything runs on the connection's strand.
template <typename Stream>
class Connection : public std::enable_shared_from_this<Connection<Stream>> {
 public:
  Connection(std::shared_ptr<HttpListenerShared> shared, Stream stream, Strand strand)
      : shared_(std::move(shared)),
        limits_(shared_->limits),
        stream_(std::move(stream)),
        strand_(std::move(strand)),
        timer_(strand_),
        buffer_(static_cast<size_t>(limits_.max_header_bytes) + kReadBytes) {
    ErrorCode error;
    const tcp::endpoint peer = Socket(stream_).remote_endpoint(error);
    if (!error) peer_ = absl::StrCat(peer.address().to_string(), ":", peer.port());
    Socket(stream_).set_option(tcp::no_delay(true), error);  // one event per token: no Nagle
  }

  ~Connection() { shared_->open.fetch_sub(1); }

  void Start() {
    std::weak_ptr<Connection> weak = this->shared_from_this();
    id_ = shared_->Track([weak] {
      if (auto connection = weak.lock()) {
        asio::post(connection->strand_, [connection] { connection->Close(); });
      }
    });
    if (id_ == 0) return Close();  // accepted as the listener stops
    Begin();
  }

  // Runs `work` on the strand with this connection alive.
  void Post(std::function<void(Connection&)> work) {
    shared_->Post(strand_, [self = this->shared_from_this(), work = std::move(work)] {
      work(*self);
    });
  }

  // The exchange's calls, on the strand.
  void QueueReply(uint64_t serial, HttpResponse response) {
    if (!Answering(serial) || started_) return;
    started_ = ended_ = true;
    std::string bytes = ResponseHead(response, version_, keep_alive_, response.body.size());
    bytes += response.body;
    Queue(std::move(bytes), 0);
  }
  void QueueStreamStart(uint64_t serial, HttpResponse head) {
    if (!Answering(serial) || started_) return;
    started_ = streaming_ = true;
    if (version_ == 10) keep_alive_ = false;  // no chunks: the close ends it
    Queue(ResponseHead(head, version_, keep_alive_, std::nullopt), 0);
  }
  void QueueChunk(uint64_t serial, std::string data) {
    if (!Answering(serial) || !streaming_ || ended_ || data.empty()) {
      unsent_chunks_.fetch_sub(1);
      return;
    }
    if (version_ == 10) return Queue(std::move(data), 1);
    Queue(absl::StrCat(absl::Hex(data.size()), "\r\n", data, "\r\n"), 1);
  }
  void QueueStreamEnd(uint64_t serial) {
    if (!Answering(serial) || !streaming_ || ended_) return;
    ended_ = true;
    Queue(version_ == 10 ? "" : "0\r\n\r\n", 0);
  }
  void Abandon(uint64_t serial) {
    if (Answering(serial)) Close();
  }
  void SetGoneCallback(uint64_t serial, std::function<void()> callback) {
    if (serial != serial_ || !in_answer_) return;
    if (gone_) return callback();
    gone_callback_ = std::move(callback);
  }

  void Close() {
    if (closed_) return;
    closed_ = true;
    Disarm();
    ErrorCode ignored;
    Socket(stream_).shutdown(tcp::socket::shutdown_both, ignored);
    Socket(stream_).close(ignored);
    shared_->Untrack(id_);
    if (in_answer_) Gone();
  }

  // The client has gone, or stopped sending: the handler hears of it once.
  void Gone() {
    if (gone_) return;
    gone_ = true;
    if (auto callback = std::exchange(gone_callback_, nullptr)) callback();
  }

  std::atomic<int64_t> unsent_chunks_{0};

 private:
  struct Outgoing {
    std::string bytes;
    int chunks = 0;  // SendChunk calls it carries
  };

  void Begin();  // the TLS handshake, if any, then the first request

  bool Answering(uint64_t serial) const { return serial == serial_ && in_answer_ && !closed_; }

  // --- Reading ---

  void ReadHead() {
    parser_.emplace();
    parser_->header_limit(static_cast<uint32_t>(limits_.max_header_bytes));
    // Judged once the head says where the body goes. Not boost::none: 1.74's
    // parser compares a Content-Length with the unset optional and refuses
    // every body.
    parser_->body_limit(std::numeric_limits<uint64_t>::max());
    Arm(limits_.head_timeout);
    http::async_read_header(
        stream_, buffer_, *parser_,
        [self = this->shared_from_this()](ErrorCode error, size_t) { self->OnHead(error); });
  }

  void OnHead(ErrorCode error) {
    Disarm();
    if (closed_) return;
    if (error == http::error::header_limit || error == http::error::buffer_overflow) {
      return Refuse(431, absl::StrCat("the request's head is over --max_http_header_bytes = ",
                                      limits_.max_header_bytes, " bytes"));
    }
    if (IsGone(error)) return Close();
    if (IsHttpSyntaxError(error)) {
      return Refuse(400, absl::StrCat("the request is not valid HTTP/1.1: ", error.message()));
    }
    if (error) return Close();

    const auto& message = parser_->get();
    request_ = HttpRequest();
    int fields = 0;
    for (const auto& field : message) {
      if (++fields > limits_.max_header_count) {
        return Refuse(431, absl::StrCat("the request has over --max_http_header_count = ",
                                        limits_.max_header_count, " header fields"));
      }
      request_.headers.emplace_back(std::string(field.name_string()), std::string(field.value()));
    }
    request_.method = std::string(message.method_string());
    request_.target = std::string(message.target());
    request_.path = request_.target.substr(0, request_.target.find('?'));
    request_.peer = peer_;
    version_ = message.version();
    keep_alive_ = message.keep_alive();

    const std::string coding = request_.Header("Transfer-Encoding");
    if (!coding.empty() && !absl::EqualsIgnoreCase(absl::StripAsciiWhitespace(coding), "chunked")) {
      return Refuse(501, absl::StrCat("Transfer-Encoding \"", coding,
                                      "\" is not served; only chunked is"));
    }
    const bool framed = parser_->content_length().has_value() || parser_->chunked();
    if (!framed && (request_.method == "POST" || request_.method == "PUT" ||
                    request_.method == "PATCH")) {
      return Refuse(411, absl::StrCat("a ", request_.method,
                                      " needs Content-Length or Transfer-Encoding: chunked"));
    }
    HttpHeadVerdict verdict = shared_->service->Judge(request_);
    if (verdict.refusal.has_value()) return Refuse(*std::move(verdict.refusal));
    max_body_bytes_ = verdict.max_body_bytes;
    body_limit_name_ = verdict.body_limit_name;
    if (parser_->content_length().has_value() &&
        *parser_->content_length() > static_cast<uint64_t>(max_body_bytes_)) {
      return RefuseBody(absl::StrCat(*parser_->content_length(), " bytes"));
    }
    parser_->body_limit(static_cast<uint64_t>(max_body_bytes_));
    if (parser_->is_done()) return OnBody(ErrorCode());
    if (absl::EqualsIgnoreCase(request_.Header("Expect"), "100-continue") && version_ != 10) {
      // The client waits for this before it sends the body (curl does for
      // large bodies).
      interim_ = "HTTP/1.1 100 Continue\r\n\r\n";
      Arm(limits_.write_timeout);
      return asio::async_write(stream_, asio::buffer(interim_),
                               [self = this->shared_from_this()](ErrorCode error, size_t) {
                                 self->Disarm();
                                 if (error) return self->Close();
                                 self->ReadBody();
                               });
    }
    ReadBody();
  }

  void ReadBody() {
    Arm(limits_.body_timeout);
    http::async_read(
        stream_, buffer_, *parser_,
        [self = this->shared_from_this()](ErrorCode error, size_t) { self->OnBody(error); });
  }

  void OnBody(ErrorCode error) {
    Disarm();
    if (closed_) return;
    if (error == http::error::body_limit) return RefuseBody("over that");
    if (IsGone(error)) return Close();
    if (IsHttpSyntaxError(error) || error == http::error::buffer_overflow) {
      return Refuse(400, absl::StrCat("the request body is not valid HTTP/1.1: ", error.message()));
    }
    if (error) return Close();
    request_.body = std::move(parser_->get().body());
    parser_.reset();
    if (++served_ >= limits_.keepalive_requests) keep_alive_ = false;
    BeginAnswer();
    auto exchange = std::make_shared<Exchange<Stream>>(this->shared_from_this(), serial_);
    // Watch the socket while the answer is made: a client that leaves is
    // noticed at once, even when nothing is written to it for a long time.
    if (buffer_.size() == 0) ReadSome();
    shared_->service->Handle(std::move(request_), std::move(exchange));
  }

  // One read into the buffer: while an answer is made, to notice the client
  // leave; after it, to wait (idle) for the next request's first bytes. Bytes
  // that come are kept as the start of the next request and stop the watch.
  void ReadSome() {
    reading_ = true;
    stream_.async_read_some(buffer_.prepare(kReadBytes),
                            [self = this->shared_from_this()](ErrorCode error, size_t bytes) {
                              self->OnReadSome(error, bytes);
                            });
  }

  void OnReadSome(ErrorCode error, size_t bytes) {
    reading_ = false;
    buffer_.commit(bytes);
    if (closed_) return;
    if (in_answer_ && !refused_ &&
        (error == asio::error::eof || error == asio::ssl::error::stream_truncated)) {
      // The client ended its sending side: it may still read. It counts as
      // gone for the handler; an answer already given (or given now) is
      // still written, and then the connection closes. A handler with no
      // answer for a gone client abandons it; the write deadline bounds
      // one that does neither.
      keep_alive_ = false;
      if (!started_) Arm(limits_.write_timeout);
      return Gone();
    }
    if (error) return Close();
    if (refused_) return Discard();
    if (in_answer_) return;  // the client is there; its next request waits
    Disarm();
    ReadHead();
  }

  // --- Answering ---

  void BeginAnswer() {
    ++serial_;
    in_answer_ = true;
    started_ = streaming_ = ended_ = gone_ = false;
  }

  void Refuse(int status, const std::string& message) {
    Refuse(shared_->service->Refusal(status, message));
  }
  void RefuseBody(const std::string& size) {
    Refuse(413, absl::StrCat("the request body is ", size, "; at most ", body_limit_name_, " = ",
                             max_body_bytes_, " bytes are allowed"));
  }
  // Answers and closes: the request's unread bytes are never parsed.
  void Refuse(HttpResponse response) {
    parser_.reset();
    keep_alive_ = false;
    refused_ = true;
    BeginAnswer();
    QueueReply(serial_, std::move(response));
  }

  void Queue(std::string bytes, int chunks) {
    outbox_.push_back({std::move(bytes), chunks});
    Flush();
  }

  void Flush() {
    if (writing_ || closed_ || outbox_.empty()) return;
    writing_ = true;
    in_flight_.clear();
    std::vector<asio::const_buffer> buffers;
    while (!outbox_.empty()) {
      in_flight_.push_back(std::move(outbox_.front()));
      outbox_.pop_front();
    }
    for (const Outgoing& out : in_flight_) buffers.push_back(asio::buffer(out.bytes));
    Arm(limits_.write_timeout);
    asio::async_write(stream_, buffers,
                      [self = this->shared_from_this()](ErrorCode error, size_t) {
                        self->OnWritten(error);
                      });
  }

  void OnWritten(ErrorCode error) {
    writing_ = false;
    int chunks = 0;
    for (const Outgoing& out : in_flight_) chunks += out.chunks;
    unsent_chunks_.fetch_sub(chunks);
    in_flight_.clear();
    if (closed_) return;
    if (error) return Close();
    if (!outbox_.empty()) return Flush();
    Disarm();
    if (ended_) EndAnswer();
  }

  void EndAnswer() {
    in_answer_ = false;
    gone_callback_ = nullptr;
    if (refused_) return Linger();
    if (!keep_alive_) {
      ErrorCode ignored;
      Socket(stream_).shutdown(tcp::socket::shutdown_send, ignored);
      return Close();
    }
    if (buffer_.size() > 0) return ReadHead();  // the next request has begun
    Arm(limits_.idle_timeout);
    if (!reading_) ReadSome();  // else the watch's read goes on as the idle wait
  }

  void Linger() {
    ErrorCode ignored;
    Socket(stream_).shutdown(tcp::socket::shutdown_send, ignored);
    buffer_.clear();
    Arm(kLinger);
    if (!reading_) Discard();
  }

  void Discard() {
    reading_ = true;
    Socket(stream_).async_read_some(
        asio::buffer(discard_), [self = this->shared_from_this()](ErrorCode error, size_t bytes) {
          self->reading_ = false;
          self->lingered_ += bytes;
          if (error || self->closed_ || self->lingered_ > kLingerBytes) return self->Close();
          self->Discard();
        });
  }

  // --- Deadlines ---

  void Arm(absl::Duration timeout) {
    timer_.expires_after(absl::ToChronoNanoseconds(timeout));
    timer_.async_wait([self = this->shared_from_this(), armed = ++timer_serial_](ErrorCode error) {
      if (error || armed != self->timer_serial_) return;
      self->Close();
    });
  }
  void Disarm() {
    ++timer_serial_;
    timer_.cancel();
  }

  const std::shared_ptr<HttpListenerShared> shared_;
  const HttpLimits limits_;
  Stream stream_;
  Strand strand_;
  asio::steady_timer timer_;
  uint64_t timer_serial_ = 0;
  uint64_t id_ = 0;
  std::string peer_;

  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  HttpRequest request_;
  int64_t max_body_bytes_ = 0;
  std::string body_limit_name_;
  int version_ = 11;
  bool keep_alive_ = true;
  int served_ = 0;
  bool reading_ = false;
  std::string interim_;
  std::array<char, 16 << 10> discard_;
  size_t lingered_ = 0;

  uint64_t serial_ = 0;     // the request being answered
  bool in_answer_ = false;  // handed to the service, its answer not yet all written
  bool started_ = false;    // a reply or a stream's head is queued
  bool streaming_ = false;
  bool ended_ = false;  // the answer's last bytes are queued
  bool refused_ = false;
  bool gone_ = false;
  bool closed_ = false;
  std::function<void()> gone_callback_;

  std::deque<Outgoing> outbox_;
  std::vector<Outgoing> in_flight_;
  bool writing_ = false;

  friend class Exchange<Stream>;
};

template <>
void Connection<tcp::socket>::Begin() {
  ReadHead();
}

template <>
void Connection<TlsStream>::Begin() {
  Arm(limits_.head_timeout);
  stream_.async_handshake(asio::ssl::stream_base::server,
                          [self = this->shared_from_this()](ErrorCode error) {
                            self->Disarm();
                            if (error || self->closed_) return self->Close();
                            self->ReadHead();
                          });
}

}  // namespace

void HttpListenerShared::Post(const Strand& strand, std::function<void()> work) {
  absl::MutexLock lock(&mu);
  if (stopped) return;
  asio::post(strand, std::move(work));
}

uint64_t HttpListenerShared::Track(std::function<void()> close) {
  absl::MutexLock lock(&mu);
  if (closing) return 0;
  const uint64_t id = ++next_id;
  closers.emplace(id, std::move(close));
  return id;
}

void HttpListenerShared::Untrack(uint64_t id) {
  absl::MutexLock lock(&mu);
  closers.erase(id);
}

void HttpListenerShared::CloseAll() {
  std::vector<std::function<void()>> close;
  {
    absl::MutexLock lock(&mu);
    closing = true;
    for (auto& [id, closer] : closers) close.push_back(closer);
  }
  for (auto& closer : close) closer();
}

void HttpListenerShared::MarkStopped() {
  absl::MutexLock lock(&mu);
  stopped = true;
}

void ServeHttpConnection(std::shared_ptr<HttpListenerShared> shared, tcp::socket socket,
                         Strand strand, asio::ssl::context* tls) {
  if (tls == nullptr) {
    std::make_shared<Connection<tcp::socket>>(std::move(shared), std::move(socket),
                                              std::move(strand))
        ->Start();
  } else {
    std::make_shared<Connection<TlsStream>>(std::move(shared), TlsStream(std::move(socket), *tls),
                                            std::move(strand))
        ->Start();
  }
}

}  // namespace linserve
