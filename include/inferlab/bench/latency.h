// The course's chapter-3 experiment in-process: latency of greedy generation (fixed output
// length) against input length, median of repeats, a linear fit. The sweep's data, verdicts, table
// and plot need no model and live in the lab (inferlab/lab/latency_sweep.h).
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "inferlab/lab/latency_sweep.h"

namespace inferlab {
class Model;
}

namespace inferlab::bench {

struct LatencyOptions {
  std::vector<int> lengths = {8, 16, 32, 64, 128, 256};
  int gen_len = 20;
  int repeat = 5;
  int token_id = 101;  // the course's input: one id repeated input_len times
  std::function<void(int length)> on_length_done;  // progress
};

// Per repeat (as the course): a warm-up forward of the input, then a timed greedy generation of
// exactly gen_len tokens (EOS ignored, so the output length is fixed).
lab::LatencySweep measure_latency(Model& model, const LatencyOptions& options);

}  // namespace inferlab::bench
