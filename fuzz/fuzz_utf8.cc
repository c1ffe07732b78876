// libFuzzer target: the engine's streaming text pieces, Utf8Assembler and
// StopMatcher. The input is a byte stream, cut into pieces where the fuzzer
// says, plus up to three stop sequences. Both classes promise a result that
// does not depend on how the stream is split; the assembler also promises
// valid UTF-8, which a second assembler checks by passing it through
// unchanged. Any broken promise aborts, which libFuzzer reports as a crash.

#include <fuzzer/FuzzedDataProvider.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "engine/text/stop_matcher.h"
#include "engine/text/utf8_assembler.h"

namespace {

void Require(bool condition, const char* what) {
  if (condition) return;
  std::fprintf(stderr, "fuzz_utf8: broken promise: %s\n", what);
  std::abort();
}

struct Split {
  std::vector<std::string> pieces;
  std::string whole;
};

// The stream's bytes in pieces of 0..8 bytes (empty pieces are legal calls).
Split ReadPieces(FuzzedDataProvider& input) {
  Split split;
  while (input.remaining_bytes() > 0) {
    std::string piece = input.ConsumeBytesAsString(input.ConsumeIntegralInRange<size_t>(0, 8));
    split.whole += piece;
    split.pieces.push_back(std::move(piece));
  }
  return split;
}

void CheckUtf8Assembler(const Split& split) {
  linserve::Utf8Assembler pieces;
  std::string streamed;
  for (const std::string& piece : split.pieces) streamed += pieces.Push(piece);
  streamed += pieces.Flush();

  linserve::Utf8Assembler once;
  std::string whole = once.Push(split.whole);
  whole += once.Flush();
  Require(streamed == whole, "Utf8Assembler output depends on the split");

  // Valid UTF-8 passes through unchanged.
  linserve::Utf8Assembler again;
  std::string twice = again.Push(streamed);
  twice += again.Flush();
  Require(twice == streamed, "Utf8Assembler output is not valid UTF-8");
  if (split.whole == streamed) return;
  // Anything it changed was invalid, so at least one U+FFFD stands in for it.
  Require(streamed.find("\xEF\xBF\xBD") != std::string::npos,
          "Utf8Assembler changed bytes without a replacement character");
}

void CheckStopMatcher(const std::vector<std::string>& stops, const Split& split) {
  linserve::StopMatcher pieces(stops);
  std::string streamed;
  bool stopped = false;
  for (const std::string& piece : split.pieces) {
    linserve::StopMatcher::Result result = pieces.Push(piece);
    Require(!stopped || result.emit.empty(), "StopMatcher emitted after a stop");
    streamed += result.emit;
    stopped = result.stopped;
  }
  streamed += pieces.Flush();

  linserve::StopMatcher once(stops);
  linserve::StopMatcher::Result whole = once.Push(split.whole);
  std::string whole_text = whole.emit + once.Flush();
  Require(streamed == whole_text, "StopMatcher output depends on the split");
  Require(stopped == whole.stopped, "StopMatcher stop depends on the split");
  // Output is a prefix of the input; without a stop it is all of it.
  Require(split.whole.compare(0, streamed.size(), streamed) == 0,
          "StopMatcher output is not a prefix of its input");
  if (!stopped) Require(streamed == split.whole, "StopMatcher lost bytes without a stop");
  for (const std::string& stop : stops) {
    if (stop.empty()) continue;
    // The emitted text may not contain a whole stop: the stream would have
    // stopped at its end.
    Require(streamed.find(stop) == std::string::npos, "StopMatcher emitted a stop sequence");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider input(data, size);
  std::vector<std::string> stops;
  const int stop_count = input.ConsumeIntegralInRange<int>(0, 3);
  for (int i = 0; i < stop_count; ++i) {
    stops.push_back(input.ConsumeBytesAsString(input.ConsumeIntegralInRange<size_t>(0, 6)));
  }
  const Split split = ReadPieces(input);
  CheckUtf8Assembler(split);
  CheckStopMatcher(stops, split);
  return 0;
}
