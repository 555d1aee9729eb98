// Records what the server and the machine do while a run goes on (see server_series.h): on a
// thread of its own, every interval, one GET of the server's /metrics and one reading of this
// machine's CPU utilisation and frequency.
#pragma once
#include <chrono>
#include <cstdint>
#include <map>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "inferlab/lab/server_series.h"

namespace inferlab::lab {

struct ScrapeOptions {
  std::string metrics_url;  // "" = the machine only
  std::string api_key;
  double interval_s = 1;
};

// GET `url` once: "" when it answered 200 with Prometheus text holding at least one sample, else
// why not (the transport's error, the HTTP status, or the line that is not Prometheus text).
std::string probe_metrics(const std::string& url, const std::string& api_key, double timeout_s);

// "1s", "500ms", "0.25" (seconds) -> seconds; throws Error naming `flag` otherwise (at least 10 ms).
double parse_interval(const std::string& text, const char* flag);

class SeriesRecorder {
 public:
  using Clock = std::chrono::steady_clock;
  // Starts sampling at once (the first sample is taken before this returns to the thread's loop).
  explicit SeriesRecorder(ScrapeOptions options);
  ~SeriesRecorder();
  SeriesRecorder(const SeriesRecorder&) = delete;
  SeriesRecorder& operator=(const SeriesRecorder&) = delete;

  // Takes one last sample, stops, and returns every row with its time in ms since `origin` (the
  // run's start: the same axis as requests.csv's start_ms). A scrape's rows carry the middle of its
  // request; a scrape that failed is `up` 0 (the first error is kept in first_error()).
  std::vector<SeriesSample> stop(Clock::time_point origin);
  const std::string& first_error() const { return first_error_; }

 private:
  struct Row {
    Clock::time_point at;
    SeriesSample sample;
  };
  void loop();
  void sample_once();

  ScrapeOptions options_;
  std::vector<Row> rows_;
  std::string first_error_;
  bool frequency_source_written_ = false;
  std::map<std::string, std::pair<uint64_t, uint64_t>> previous_ticks_;  // per CPU: busy, total ticks
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace inferlab::lab
