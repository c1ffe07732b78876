#include "engine/text/stop_matcher.h"

#include <algorithm>
#include <utility>

namespace linserve {

StopMatcher::StopMatcher(std::vector<std::string> stops) {
  for (std::string& bytes : stops) {
    if (bytes.empty()) continue;
    Stop stop;
    stop.bytes = std::move(bytes);
    const std::string& s = stop.bytes;
    stop.failure.assign(s.size(), 0);
    size_t k = 0;
    for (size_t i = 1; i < s.size(); ++i) {
      while (k > 0 && s[i] != s[k]) k = stop.failure[k - 1];
      if (s[i] == s[k]) ++k;
      stop.failure[i] = k;
    }
    stops_.push_back(std::move(stop));
  }
}

StopMatcher::Result StopMatcher::Push(std::string_view bytes) {
  Result result{std::string(), stopped_};
  if (stopped_) return result;
  size_t hold = held_.size();
  for (char c : bytes) {
    held_.push_back(c);
    hold = 0;
    size_t match_length = 0;  // of the longest stop completed by this byte
    for (Stop& stop : stops_) {
      size_t m = stop.matched;
      while (m > 0 && stop.bytes[m] != c) m = stop.failure[m - 1];
      if (stop.bytes[m] == c) ++m;
      if (m == stop.bytes.size()) {
        match_length = std::max(match_length, m);
        m = stop.failure[m - 1];
      }
      stop.matched = m;
      hold = std::max(hold, m);
    }
    if (match_length > 0) {
      // held_ ends with the match: a stop's matched prefix is never released.
      held_.resize(held_.size() - match_length);
      result.emit = std::move(held_);
      held_.clear();
      stopped_ = result.stopped = true;
      return result;
    }
  }
  // Everything before the longest partial match is safe to release.
  result.emit.assign(held_, 0, held_.size() - hold);
  held_.erase(0, held_.size() - hold);
  return result;
}

std::string StopMatcher::Flush() {
  std::string out = std::move(held_);
  held_.clear();
  for (Stop& stop : stops_) stop.matched = 0;
  return out;
}

}  // namespace linserve
