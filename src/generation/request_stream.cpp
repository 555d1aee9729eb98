#include "inferlab/generation/request_stream.h"

namespace inferlab {

const char* to_string(FinishReason reason) {
  switch (reason) {
    case FinishReason::stop: return "stop";
    case FinishReason::length: return "length";
    case FinishReason::cancelled: return "cancelled";
    case FinishReason::timeout: return "timeout";
    case FinishReason::error: return "error";
  }
  return "error";
}

std::vector<StreamEvent> RequestStream::wait(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  ready_.wait_for(lock, timeout, [&] { return !events_.empty(); });
  std::vector<StreamEvent> out(std::make_move_iterator(events_.begin()), std::make_move_iterator(events_.end()));
  events_.clear();
  return out;
}

void RequestStream::cancel() {
  cancelled_ = true;
  if (wake_engine_) wake_engine_();
}

void RequestStream::on_event(std::function<void()> notify) {
  std::lock_guard lock(mutex_);
  notify_ = std::move(notify);
}

void RequestStream::stop() {
  stopped_ = true;
  if (wake_engine_) wake_engine_();
}

void RequestStream::push(StreamEvent event) {
  std::function<void()> notify;
  {
    std::lock_guard lock(mutex_);
    events_.push_back(std::move(event));
    notify = notify_;
  }
  ready_.notify_all();
  if (notify) notify();
}

}  // namespace inferlab
