// POST /v1/responses' store: finished responses kept in memory for GET / DELETE
// /v1/responses/{id} and for previous_response_id, at most `capacity` of them (inferlab serve
// --responses-store-size); past that the least recently used goes, and its id answers 404.
// Thread-safe: handlers run on several threads.
#pragma once
#include <cstddef>
#include <list>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include "server/api_error.h"

namespace inferlab::api {

struct StoredResponse {
  json response;      // the response object as answered (GET returns it)
  json conversation;  // its input items (those of the responses it continued first) and its output items
  std::size_t input_items = 0;  // how many of `conversation` are input (GET /v1/responses/{id}/input_items)
};

class ResponseStore {
 public:
  explicit ResponseStore(std::size_t capacity) : capacity_(capacity) {}
  // Keeps `entry` under `id` (replacing one there), evicting the least recently used past capacity.
  void put(const std::string& id, StoredResponse entry);
  std::optional<StoredResponse> get(const std::string& id);  // a hit counts as a use
  bool remove(const std::string& id);
  std::size_t size() const;
  std::size_t capacity() const { return capacity_; }

 private:
  using Order = std::list<std::string>;  // most recently used first
  struct Slot {
    StoredResponse entry;
    Order::iterator position;
  };
  std::size_t capacity_;
  mutable std::mutex mutex_;
  Order order_;
  std::unordered_map<std::string, Slot> slots_;
};

}  // namespace inferlab::api
