// The bounded store of finished responses (see response_store.h).
#include "server/response_store.h"

namespace inferlab::api {

void ResponseStore::put(const std::string& id, StoredResponse entry) {
  if (capacity_ == 0) return;
  std::lock_guard lock(mutex_);
  if (auto it = slots_.find(id); it != slots_.end()) {
    order_.erase(it->second.position);
    slots_.erase(it);
  }
  order_.push_front(id);
  slots_.emplace(id, Slot{std::move(entry), order_.begin()});
  while (slots_.size() > capacity_) {
    slots_.erase(order_.back());
    order_.pop_back();
  }
}

std::optional<StoredResponse> ResponseStore::get(const std::string& id) {
  std::lock_guard lock(mutex_);
  auto it = slots_.find(id);
  if (it == slots_.end()) return std::nullopt;
  order_.splice(order_.begin(), order_, it->second.position);
  return it->second.entry;
}

bool ResponseStore::remove(const std::string& id) {
  std::lock_guard lock(mutex_);
  auto it = slots_.find(id);
  if (it == slots_.end()) return false;
  order_.erase(it->second.position);
  slots_.erase(it);
  return true;
}

std::size_t ResponseStore::size() const {
  std::lock_guard lock(mutex_);
  return slots_.size();
}

}  // namespace inferlab::api
