#include "client/sse.h"

namespace linserve {

std::vector<std::string> SseReader::Feed(std::string_view bytes) {
  std::vector<std::string> events;
  for (const char c : bytes) {
    if (c == '\n' && after_cr_) {
      after_cr_ = false;
      continue;
    }
    after_cr_ = c == '\r';
    if (c == '\n' || c == '\r') {
      Line(line_, events);
      line_.clear();
    } else {
      line_ += c;
    }
  }
  return events;
}

void SseReader::Line(std::string_view line, std::vector<std::string>& events) {
  if (line.empty()) {  // the blank line that ends an event
    if (has_data_) events.push_back(std::move(data_));
    data_.clear();
    has_data_ = false;
    return;
  }
  const size_t colon = line.find(':');
  if (line.substr(0, colon) != "data") return;  // "event:", "id:", ": comment", ...
  std::string_view value = colon == std::string_view::npos ? "" : line.substr(colon + 1);
  if (!value.empty() && value[0] == ' ') value.remove_prefix(1);
  if (has_data_) data_ += '\n';
  data_.append(value);
  has_data_ = true;
}

}  // namespace linserve
