#ifndef LINSERVE_SERVER_STREAM_EMITTER_H_
#define LINSERVE_SERVER_STREAM_EMITTER_H_

#include <memory>

#include "server/scheduling/turn_sink.h"
#include "server/sessions/store_worker.h"

namespace linserve {

// Hands the streams their pieces on a thread of its own, so that the engine
// thread goes on to the next step while a step's pieces are serialized and
// written (gRPC's StartWrite, an HTTP chunk): with a small vocabulary that
// was a sixth of each iteration at concurrency 32 (bench/RESULTS.md).
// Wrap() gives a turn a sink whose Send and Finish are queued, in the order
// they are called, for the stream's own sink; Cancelled and Buffered answer at
// once (Buffered counts what is still queued). The thread is a StoreWorker:
// a FIFO of jobs, which is all this needs. Thread-safe.
class StreamEmitter {
 public:
  std::shared_ptr<TurnSink> Wrap(std::shared_ptr<TurnSink> sink);
  // Returns once everything queued before the call reached its stream.
  void Flush() { worker_.Flush(); }

 private:
  class QueuedSink;

  StoreWorker worker_;
};

}  // namespace linserve

#endif  // LINSERVE_SERVER_STREAM_EMITTER_H_
