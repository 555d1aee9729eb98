// `inferlab bench accuracy`: what each weight format costs against the same model at f32: logit
// differences over a random prompt, top-1 agreement per position, and equal greedy tokens.
#pragma once
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

namespace inferlab::bench {

struct AccuracyOptions {
  std::string model;
  std::vector<std::string> formats{"bf16", "int8", "q4"};
  int prompt_len = 32, steps = 32, threads = 0;
  uint32_t seed = 1;  // of the random prompt
};

struct FormatAccuracy {
  std::string weights;
  double max_abs_logit_diff = 0, rms_logit_diff = 0;
  int prompt_top1_agree = 0;   // of prompt_len positions
  int greedy_equal = 0;        // of steps tokens
  int first_divergence = -1;   // -1: none
};

struct AccuracyReport {
  AccuracyOptions options;
  double max_abs_logit = 0;  // of the f32 reference, to scale the differences
  std::vector<FormatAccuracy> formats;
};

AccuracyReport measure_accuracy(const AccuracyOptions& options);
std::string accuracy_text(const AccuracyReport& report);
nlohmann::json accuracy_json(const AccuracyReport& report);

}  // namespace inferlab::bench
