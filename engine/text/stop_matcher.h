#ifndef LINSERVE_ENGINE_STOP_MATCHER_H_
#define LINSERVE_ENGINE_STOP_MATCHER_H_

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace linserve {

// Finds stop sequences in a byte stream that arrives in arbitrary pieces, and
// releases only bytes that can no longer belong to one. A stop sequence is
// found at the first byte that completes any of them (the earliest end;
// among those ending there, the longest), which is what a token-by-token
// generator sees, so the result does not depend on how the stream is split.
// The stop sequence itself is never emitted (as in OpenAI and TGI). Each
// stop runs a Knuth-Morris-Pratt automaton, so a byte costs O(number of
// stops) amortised. Not thread-safe.
class StopMatcher {
 public:
  // Empty stop sequences are ignored (ValidateSamplingParams rejects them).
  explicit StopMatcher(std::vector<std::string> stops);

  struct Result {
    std::string emit;  // bytes released by this call
    bool stopped;      // a stop sequence ended within this call, or earlier
  };

  // Returns the bytes that can no longer be part of a stop sequence, holding
  // back the longest suffix that is a proper prefix of some stop sequence. On
  // a match, emits everything before it and sets stopped; later calls emit
  // nothing.
  Result Push(std::string_view bytes);

  // Ends the stream: returns the held-back bytes (empty after a stop).
  std::string Flush();

  bool stopped() const { return stopped_; }

 private:
  struct Stop {
    std::string bytes;
    std::vector<size_t> failure;  // KMP: longest proper border of bytes[0..i]
    size_t matched = 0;           // longest suffix of the stream that is a prefix
  };

  std::vector<Stop> stops_;
  std::string held_;  // the stream's last max(matched) bytes, not yet emitted
  bool stopped_ = false;
};

}  // namespace linserve

#endif  // LINSERVE_ENGINE_STOP_MATCHER_H_
