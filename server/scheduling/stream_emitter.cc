#include "server/scheduling/stream_emitter.h"

#include <atomic>
#include <utility>

namespace linserve {

class StreamEmitter::QueuedSink : public TurnSink,
                                  public std::enable_shared_from_this<QueuedSink> {
 public:
  QueuedSink(StoreWorker& worker, std::shared_ptr<TurnSink> sink)
      : worker_(worker), sink_(std::move(sink)) {}

  void Send(TurnPiece piece) override {
    Queue([piece = std::move(piece)](TurnSink& sink) mutable { sink.Send(std::move(piece)); });
  }

  void Finish(absl::StatusOr<TurnSummary> result) override {
    Queue([result = std::move(result)](TurnSink& sink) mutable { sink.Finish(std::move(result)); });
  }

  bool Cancelled() const override { return sink_->Cancelled(); }

  int Buffered() const override { return sink_->Buffered() + queued_.load(); }

 private:
  template <typename Call>
  void Queue(Call call) {
    ++queued_;
    worker_.Run([self = shared_from_this(), call = std::move(call)]() mutable {
      call(*self->sink_);
      --self->queued_;
    });
  }

  StoreWorker& worker_;
  const std::shared_ptr<TurnSink> sink_;
  std::atomic<int> queued_{0};
};

std::shared_ptr<TurnSink> StreamEmitter::Wrap(std::shared_ptr<TurnSink> sink) {
  if (sink == nullptr) return nullptr;
  return std::make_shared<QueuedSink>(worker_, std::move(sink));
}

}  // namespace linserve
