#include "model/transformer.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <set>

#include <fmt/format.h>

#include "inferlab/loading/json_config.h"
#include "inferlab/tensor/fast/ggml_blocks.h"
#include "inferlab/util/error.h"
#include "model/graph/blocks.h"

namespace inferlab {
namespace {

// config.json fixes every tensor's shape: a checkpoint that disagrees is an error naming both.
void check_shape(const TensorView& view, const std::string& name, const std::vector<int64_t>& shape) {
  if (view.shape != shape)
    fail("tensor '{}' in {} has shape {} but {} implies {}", name, view.origin, shape_string(view.shape),
         view.origin.find(".gguf") != std::string::npos ? "the GGUF metadata" : "config.json", shape_string(shape));
}

}  // namespace

std::vector<float> WeightLoader::tensor(const std::string& name, const std::vector<int64_t>& shape) const {
  TensorView view = source_.require(name);
  check_shape(view, name, shape);
  return view.to_f32();
}

// The output projection is the one matrix whose error reaches every logit directly; llama-quantize
// keeps it at Q6_K / Q8_0 in its Q4 mixes for that reason, and so does "auto" here.
std::string output_weights_of(const LoadOptions& options) {
  const Backend& formats = default_cpu_backend();  // the format names every backend accepts
  if (!options.output_weights.empty() && options.output_weights != "auto") {
    formats.check_format(options.output_weights);  // an unknown name is an error now, naming it
    return options.output_weights;
  }
  if (!options.weights.empty() && options.weights != "auto" && formats.is_4bit(options.weights)) return "int8";
  return options.weights;
}

Linear WeightLoader::linear(const std::string& weight_name, int out, int in, const std::string& bias_name) const {
  return linear_as(weights_, weight_name, out, in, bias_name, false);
}

Linear WeightLoader::output(const std::string& weight_name, int vocab, int hidden) const {
  return linear_as(output_weights_, weight_name, vocab, hidden, "", false);
}

Linear WeightLoader::conv1d(const std::string& weight_name, int in, int out, const std::string& bias_name) const {
  return linear_as(weights_, weight_name, out, in, bias_name, true);
}

Linear WeightLoader::linear_as(const std::string& option, const std::string& weight_name, int out, int in,
                               const std::string& bias_name, bool transposed) const {
  const TensorView view = source_.require(weight_name);
  check_shape(view, weight_name, transposed ? std::vector<int64_t>{in, out} : std::vector<int64_t>{out, in});
  Linear layer;
  layer.in = in;
  layer.out = out;
  layer.weight = backend_.matrix(view, out, in, option, transposed);
  if (!bias_name.empty()) layer.bias = tensor(bias_name, {out});
  return layer;
}

MatrixPtr WeightLoader::table(const std::string& name, int rows, int cols) const {
  const TensorView view = source_.require(name);
  check_shape(view, name, {rows, cols});
  return backend_.matrix(view, rows, cols, "f32");
}

void WeightLoader::embedding(const std::string& embedding_name, int vocab, int hidden, TransformerWeights& t,
                             bool tied_output, const std::string& tied_name) const {
  const bool under_output_name = tied_output && !has(embedding_name) && has(tied_name);
  const std::string& name = under_output_name ? tied_name : embedding_name;
  const TensorView view = source_.require(name);
  check_shape(view, name, {vocab, hidden});
  t.embedding = backend_.matrix(view, vocab, hidden, tied_output ? output_weights_ : weights_);
}

Linear WeightLoader::fuse_rows(const std::vector<Linear>& parts) const {
  Linear fused;
  fused.in = parts.at(0).in;
  bool any_bias = false;
  for (const auto& p : parts) any_bias |= !p.bias.empty();
  std::vector<MatrixPtr> matrices;
  for (const auto& p : parts) {
    matrices.push_back(p.weight);
    fused.out += p.out;
    if (!any_bias) continue;
    if (p.bias.empty()) fused.bias.insert(fused.bias.end(), p.out, 0.0f);
    else fused.bias.insert(fused.bias.end(), p.bias.begin(), p.bias.end());
  }
  fused.weight = backend_.concat_rows(matrices);
  return fused;
}

Linear tied_head(const TransformerWeights& t, int vocab, int hidden) {
  Linear head;
  head.in = hidden;
  head.out = vocab;
  head.weight = t.embedding;
  return head;
}

TensorView mxfp4_rows_view(const std::vector<uint8_t>& bytes, int rows, int cols, const std::string& origin) {
  if (bytes.size() != fast::ggml_row_bytes(fast::kGgmlMXFP4, cols) * static_cast<std::size_t>(rows))
    fail("{}: {} bytes are not {} rows of {} MXFP4 weights", origin, bytes.size(), rows, cols);
  TensorView view{DType::U8, {rows, cols}, bytes.data(), bytes.size(), origin};
  view.ggml_type = static_cast<int>(fast::kGgmlMXFP4);
  return view;
}

nlohmann::json rope_scaling_of(const nlohmann::json& config, const std::string& where) {
  // transformers: rope_parameters = rope_scaling or rope_parameters (an empty or null one is absent).
  auto given = [&](const char* key) { return config.contains(key) && !config[key].is_null() && !config[key].empty(); };
  const char* key = given("rope_scaling") ? "rope_scaling" : given("rope_parameters") ? "rope_parameters" : nullptr;
  if (!key) return nullptr;
  const nlohmann::json& scaling = config[key];
  if (!scaling.is_object()) fail("{}: {} must be an object or null", where, key);
  // transformers 5 may nest them by layer type ({"full_attention": {...}, "sliding_attention": {...}}).
  for (const char* layer_type : {"full_attention", "sliding_attention"})
    if (scaling.contains(layer_type))
      fail("{}: {} given per layer type (\"{}\") is not supported; one set for every layer is", where, key, layer_type);
  nlohmann::json out = scaling;
  // Phi3-style configs keep the pretraining length beside rope_scaling; transformers gives it priority.
  // Otherwise transformers' standardize_rope_params takes max_position_embeddings for the types that
  // need one.
  const std::string type = out.value("rope_type", out.value("type", std::string("default")));
  if (config.contains("original_max_position_embeddings") && config["original_max_position_embeddings"].is_number())
    out["original_max_position_embeddings"] = config["original_max_position_embeddings"];
  else if ((type == "yarn" || type == "llama3") && !out.contains("original_max_position_embeddings") &&
           config.contains("max_position_embeddings"))
    out["original_max_position_embeddings"] = config["max_position_embeddings"];
  return out;
}

double rope_theta_of(const nlohmann::json& config, const std::string& where) {
  const nlohmann::json scaling = rope_scaling_of(config, where);
  if (scaling.is_object() && scaling.contains("rope_theta")) {  // transformers 5 keeps it there
    if (!scaling["rope_theta"].is_number()) fail("{}: rope_parameters.rope_theta must be a number", where);
    return scaling["rope_theta"].get<double>();
  }
  return config_double_or(config, "rope_theta", 10000.0, where);
}

RopeScaling rope_scaling(int head_dim, double theta, const nlohmann::json& rope_scaling, int max_position_embeddings,
                         const std::string& where) {
  RopeScaling rope;
  std::vector<float>& inv = rope.inv_freq;
  inv.resize(head_dim / 2);
  for (int i = 0; i < head_dim / 2; ++i)
    inv[i] = static_cast<float>(1.0 / std::pow(theta, static_cast<double>(2 * i) / head_dim));
  if (rope_scaling.is_null()) return rope;
  if (!rope_scaling.is_object()) fail("{}: rope_scaling must be an object or null", where);
  std::string type = rope_scaling.value("rope_type", rope_scaling.value("type", std::string("default")));
  auto has = [&](const char* key) { return rope_scaling.contains(key) && !rope_scaling[key].is_null(); };
  auto number = [&](const char* key) {
    if (!has(key) || !rope_scaling[key].is_number())
      fail("{}: rope_scaling of type {} needs a number \"{}\"", where, type, key);
    return rope_scaling[key].get<double>();
  };
  if (type == "default") return rope;
  if (type == "linear") {
    const double factor = number("factor");
    for (auto& f : inv) f = static_cast<float>(f / factor);
    return rope;
  }
  if (type == "llama3") {
    const double factor = number("factor"), low = number("low_freq_factor"), high = number("high_freq_factor");
    const double old_ctx = number("original_max_position_embeddings");
    const double low_wavelen = old_ctx / low, high_wavelen = old_ctx / high;
    for (auto& f : inv) {
      const double wavelen = 2 * M_PI / f;
      double scaled = wavelen > low_wavelen ? f / factor : f;
      if (!(wavelen < high_wavelen) && !(wavelen > low_wavelen)) {
        const double smooth = (old_ctx / wavelen - low) / (high - low);
        scaled = (1 - smooth) * scaled / factor + smooth * scaled;
      }
      f = static_cast<float>(scaled);
    }
    return rope;
  }
  if (type == "dynamic") {
    // transformers recomputes inv_freq from the longest sequence of each forward once it passes
    // max_position_embeddings (so cached keys and new queries then disagree, and the numbers depend
    // on the batch); up to there it is the default RoPE exactly. Positions past it are refused.
    number("factor");
    if (max_position_embeddings <= 0) fail("{}: rope_scaling of type dynamic needs max_position_embeddings", where);
    rope.position_limit = max_position_embeddings;
    return rope;
  }
  if (type == "yarn") {
    // transformers' _compute_yarn_parameters: NTK-by-parts between the interpolated (inv_freq /
    // factor) and the original frequencies over a linear ramp of dimensions, and cos / sin scaled by
    // the attention factor.
    const double original = number("original_max_position_embeddings");
    double factor = has("factor") ? number("factor") : 0;
    if (!has("factor")) {
      if (max_position_embeddings <= 0) fail("{}: rope_scaling of type yarn needs a number \"factor\"", where);
      factor = max_position_embeddings / original;
    }
    if (!(factor > 0) || !(original > 0)) fail("{}: rope_scaling yarn needs factor and original_max_position_embeddings > 0", where);
    auto mscale_of = [](double scale, double m) { return scale <= 1 ? 1.0 : 0.1 * m * std::log(scale) + 1.0; };
    double attention_factor = 0;
    if (has("attention_factor")) attention_factor = number("attention_factor");
    else if (has("mscale") && has("mscale_all_dim") && number("mscale") != 0 && number("mscale_all_dim") != 0)
      attention_factor = mscale_of(factor, number("mscale")) / mscale_of(factor, number("mscale_all_dim"));
    else attention_factor = mscale_of(factor, 1.0);
    // `or` in transformers: 0 (or null) takes the default too.
    const double beta_fast = has("beta_fast") && number("beta_fast") != 0 ? number("beta_fast") : 32;
    const double beta_slow = has("beta_slow") && number("beta_slow") != 0 ? number("beta_slow") : 1;
    bool truncate = true;
    if (has("truncate")) {
      if (!rope_scaling["truncate"].is_boolean()) fail("{}: rope_scaling.truncate must be true or false", where);
      truncate = rope_scaling["truncate"].get<bool>();
    }
    const double dim = head_dim;
    auto correction_dim = [&](double rotations) { return dim * std::log(original / (rotations * 2 * M_PI)) / (2 * std::log(theta)); };
    double low = correction_dim(beta_fast), high = correction_dim(beta_slow);
    if (truncate) low = std::floor(low), high = std::ceil(high);
    low = std::max(low, 0.0), high = std::min(high, dim - 1);
    if (low == high) high += 0.001;  // as transformers: no division by zero
    for (int i = 0; i < head_dim / 2; ++i) {
      const double extrapolation = inv[i], interpolation = extrapolation / factor;
      const double ramp = std::clamp((i - low) / (high - low), 0.0, 1.0);
      const double keep = 1 - ramp;  // share of the original frequency
      inv[i] = static_cast<float>(interpolation * (1 - keep) + extrapolation * keep);
    }
    rope.attention_factor = static_cast<float>(attention_factor);
    rope.context = static_cast<int>(std::lround(factor * original));
    return rope;
  }
  fail("{}: rope_scaling type '{}' is not supported (supported: linear, llama3, yarn, dynamic)", where, type);
}

void load_rope(TransformerWeights& t, const ModelConfig& c, const nlohmann::json& config) {
  const RopeScaling rope = rope_scaling(c.head_dim, c.rope_theta, rope_scaling_of(config, "config.json"),
                                        config.value("max_position_embeddings", c.max_position_embeddings), "config.json");
  t.inv_freq = rope.inv_freq;
  t.rope_attention_factor = rope.attention_factor;
  t.rope_position_limit = rope.position_limit;
}

std::vector<float> rope_inv_freq(int head_dim, double theta, const nlohmann::json& scaling, const std::string& where) {
  return rope_scaling(head_dim, theta, scaling, 0, where).inv_freq;
}

TransformerModel::TransformerModel(ModelConfig config, const Architecture& arch, TransformerWeights weights,
                                   std::unique_ptr<Backend> backend, std::filesystem::path path)
    : config_(std::move(config)),
      arch_(arch),
      backend_(std::move(backend)),
      w_(std::move(weights)),
      path_(std::move(path)) {}

TransformerModel::~TransformerModel() = default;

// Decode's weight bytes by the format they are held in (a mixed matrix counted by its parts).
std::map<std::string, std::size_t> TransformerModel::weight_bytes_by_format() const {
  std::map<std::string, std::size_t> by_format;
  auto add = [&](const Linear& l) {
    if (l.weight) l.weight->add_bytes_by_format(by_format);
  };
  add(w_.lm_head);
  for (const LayerWeights& layer : w_.layers) {
    for (const Linear* l : {&layer.qkv, &layer.out, &layer.up, &layer.down, &layer.router}) add(*l);
    // A decode step reads experts_per_token of the experts: counted as that share of their bytes.
    std::map<std::string, std::size_t> expert_bytes;
    for (const ExpertWeights& expert : layer.experts)
      for (const Linear* l : {&expert.gate_up, &expert.down}) l->weight->add_bytes_by_format(expert_bytes);
    for (const auto& [format, bytes] : expert_bytes)
      by_format[format] += bytes * layer.experts_per_token / layer.experts.size();
  }
  return by_format;
}

std::size_t TransformerModel::decode_weight_bytes() const {
  std::size_t total = 0;
  for (const auto& [format, bytes] : weight_bytes_by_format()) total += bytes;
  return total;
}

std::string TransformerModel::weight_formats() const {
  std::vector<std::pair<std::size_t, std::string>> shares;
  std::size_t total = 0;
  for (const auto& [format, bytes] : weight_bytes_by_format()) shares.emplace_back(bytes, format), total += bytes;
  std::sort(shares.begin(), shares.end(), std::greater<>());
  std::string text;
  for (const auto& [bytes, format] : shares)
    text += fmt::format("{}{} {:.0f} %", text.empty() ? "" : ", ", format,
                        100.0 * static_cast<double>(bytes) / static_cast<double>(std::max<std::size_t>(total, 1)));
  return text;
}

void TransformerModel::forward_into(std::span<const BatchEntry> batch, KVCache& cache, StepOutputs& out) {
  const ModelConfig& c = config_;
  const int bs = cache.block_size();
  if (batch.empty()) {
    out.logits.clear();
    out.hidden.clear();
    return;
  }

  // Validate everything before touching the cache so a bad entry leaves every sequence as it was.
  std::set<const SequenceKV*> seen;
  for (const auto& e : batch) {
    if (!e.kv) fail("forward: batch entry without a SequenceKV");
    if (!seen.insert(e.kv).second) fail("forward: the same sequence appears twice in one batch");
    if (e.tokens.empty()) fail("forward: batch entry with no tokens");
    const long end = static_cast<long>(e.kv->length) + static_cast<long>(e.tokens.size());
    if (end > static_cast<long>(e.kv->blocks.size()) * bs)
      fail("forward: sequence has KV room for {} positions but needs {}; call SequenceKV::reserve first",
           e.kv->blocks.size() * bs, end);
    if (w_.position_embedding && end > c.max_position_embeddings)
      fail("forward: position {} is beyond this model's context of {} positions", end - 1, c.max_position_embeddings);
    if (w_.rope_position_limit > 0 && end > w_.rope_position_limit)
      fail("forward: position {} is past max_position_embeddings {}, where rope_scaling of type dynamic would change "
           "the RoPE frequencies with the sequence's length; not supported", end - 1, w_.rope_position_limit);
    for (int32_t t : e.tokens)
      if (t < 0 || t >= c.vocab_size) fail("forward: token id {} is outside the vocabulary (0..{})", t, c.vocab_size - 1);
    for (int b : e.kv->blocks)
      if (b < 0 || b >= cache.num_blocks()) fail("forward: block {} is not in this KV cache", b);
    if (c.encoder && e.output != EntryOutput::hidden_states)
      fail("forward: {} is an encoder: it gives hidden states (embeddings), not logits", c.architecture);
    // Bidirectional attention needs the whole sequence in one step.
    if (c.encoder && e.kv->length != 0)
      fail("forward: an encoder's sequence runs whole in one step; this one has {} positions already", e.kv->length);
  }

  // A step's activations from the idle ones (their memory already grown), or a new step.
  std::unique_ptr<ForwardStep> step;
  {
    std::lock_guard lock(idle_steps_mutex_);
    if (!idle_steps_.empty()) step = std::move(idle_steps_.back()), idle_steps_.pop_back();
  }
  if (!step) step = std::make_unique<ForwardStep>(*backend_, config_);
  struct GiveBack {
    TransformerModel& model;
    std::unique_ptr<ForwardStep>& step;
    ~GiveBack() {
      std::lock_guard lock(model.idle_steps_mutex_);
      model.idle_steps_.push_back(std::move(step));
    }
  } give_back{*this, step};

  // The batch as rows: each row's token, sequence and position; the rows that want logits.
  ForwardStep& s = *step;
  s.cache = &cache;
  s.out = &out;
  s.tokens.clear();
  s.logit_rows.clear();
  s.hidden_rows.clear();
  StepRows& rows = s.rows;
  rows.sequences.clear();
  rows.first_row.clear();
  rows.entry.clear();
  rows.position.clear();
  for (std::size_t e = 0; e < batch.size(); ++e) {
    const int n = static_cast<int>(batch[e].tokens.size());
    rows.sequences.push_back(batch[e].kv->blocks);
    rows.first_row.push_back(rows.count());
    for (int i = 0; i < n; ++i) {
      switch (batch[e].output) {
        case EntryOutput::last_logits:
          if (i == n - 1) s.logit_rows.push_back(rows.count());
          break;
        case EntryOutput::all_logits: s.logit_rows.push_back(rows.count()); break;
        case EntryOutput::hidden_states: s.hidden_rows.push_back(rows.count()); break;
      }
      rows.entry.push_back(static_cast<int>(e));
      rows.position.push_back(batch[e].kv->length + i);
      s.tokens.push_back(batch[e].tokens[i]);
    }
  }
  rows.first_row.push_back(rows.count());

  arch_.forward(w_, s);

  for (const auto& e : batch) e.kv->length += static_cast<int>(e.tokens.size());
}

}  // namespace inferlab
