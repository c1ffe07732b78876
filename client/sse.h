#ifndef LINSERVE_CLIENT_SSE_H_
#define LINSERVE_CLIENT_SSE_H_

// Server-sent events (text/event-stream) split into their data, as the bytes
// of a response body arrive in arbitrary pieces.

#include <string>
#include <string_view>
#include <vector>

namespace linserve {

class SseReader {
 public:
  // Takes the next bytes of the body; returns the data of every event they
  // complete, in order (the "data:" lines of one event joined by "\n").
  // Lines end in "\n", "\r\n" or "\r"; comments and other fields are skipped.
  std::vector<std::string> Feed(std::string_view bytes);

 private:
  void Line(std::string_view line, std::vector<std::string>& events);

  std::string line_;  // the incomplete last line
  std::string data_;  // the current event's data so far
  bool has_data_ = false;
  bool after_cr_ = false;  // the last byte was "\r": a "\n" next ends no line
};

}  // namespace linserve

#endif  // LINSERVE_CLIENT_SSE_H_
