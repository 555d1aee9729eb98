#include "model/transformer.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <set>

#include <fmt/format.h>

#include "inferlab/util/error.h"
#include "inferlab/tensor/fast/attention.h"
#include "model/weights.h"

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
  if (!options.output_weights.empty() && options.output_weights != "auto") {
    fast::parse_format(options.output_weights);  // an unknown name is an error now, naming it
    return options.output_weights;
  }
  if (!options.weights.empty() && options.weights != "auto" && fast::parse_format(options.weights) == fast::WeightFormat::Q4)
    return "int8";
  return options.weights;
}

LinearWeight WeightLoader::linear(const std::string& weight_name, int out, int in, const std::string& bias_name) const {
  return linear_as(weights_, weight_name, out, in, bias_name);
}

LinearWeight WeightLoader::output(const std::string& weight_name, int vocab, int hidden) const {
  return linear_as(output_weights_, weight_name, vocab, hidden, "");
}

LinearWeight WeightLoader::linear_as(const std::string& option, const std::string& weight_name, int out, int in,
                                     const std::string& bias_name) const {
  LinearWeight layer;
  layer.in = in;
  layer.out = out;
  const TensorView view = source_.require(weight_name);
  if (const auto format = fast::choose_format(option, view); format != fast::WeightFormat::F32) {
    check_shape(view, weight_name, {out, in});
    layer.packed = std::make_shared<const fast::PackedMatrix>(fast::pack_tensor(view, out, in, format));
    if (!bias_name.empty()) layer.bias = tensor(bias_name, {out});
    return layer;
  }
  layer.weight = std::make_shared<const std::vector<float>>(tensor(weight_name, {out, in}));
  if (!bias_name.empty()) layer.bias = tensor(bias_name, {out});
  return layer;
}

LinearWeight WeightLoader::conv1d(const std::string& weight_name, int in, int out, const std::string& bias_name) const {
  const TensorView view = source_.require(weight_name);
  if (const auto format = fast::choose_format(weights_, view); format != fast::WeightFormat::F32) {
    check_shape(view, weight_name, {in, out});
    LinearWeight layer;
    layer.in = in;
    layer.out = out;
    layer.packed = std::make_shared<const fast::PackedMatrix>(fast::pack_transposed(view, in, out, format));
    if (!bias_name.empty()) layer.bias = tensor(bias_name, {out});
    return layer;
  }
  std::vector<float> stored = tensor(weight_name, {in, out});
  std::vector<float> transposed(stored.size());
  for (int i = 0; i < in; ++i)
    for (int o = 0; o < out; ++o) transposed[static_cast<std::size_t>(o) * in + i] = stored[static_cast<std::size_t>(i) * out + o];
  LinearWeight layer;
  layer.in = in;
  layer.out = out;
  layer.weight = std::make_shared<const std::vector<float>>(std::move(transposed));
  if (!bias_name.empty()) layer.bias = tensor(bias_name, {out});
  return layer;
}

void WeightLoader::embedding(const std::string& embedding_name, int vocab, int hidden, TransformerWeights& t,
                             bool tied_output, const std::string& tied_name) const {
  const bool under_output_name = tied_output && !has(embedding_name) && has(tied_name);
  const std::string& name = under_output_name ? tied_name : embedding_name;
  const TensorView view = source_.require(name);
  if (const auto format = fast::choose_format(tied_output ? output_weights_ : weights_, view);
      format != fast::WeightFormat::F32) {
    check_shape(view, name, {vocab, hidden});
    t.packed_embedding = std::make_shared<const fast::PackedMatrix>(fast::pack_tensor(view, vocab, hidden, format));
    return;
  }
  t.embedding = std::make_shared<const std::vector<float>>(tensor(name, {vocab, hidden}));
}

LinearWeight fuse_rows(const std::vector<LinearWeight>& parts) {
  LinearWeight fused;
  fused.in = parts.at(0).in;
  bool any_bias = false, any_packed = false;
  for (const auto& p : parts) {
    any_bias |= !p.bias.empty();
    any_packed |= static_cast<bool>(p.packed);
  }
  // Rows and biases are the same whichever way the weights are kept (a part without a bias: zeros).
  for (const auto& p : parts) {
    fused.out += p.out;
    if (!any_bias) continue;
    if (p.bias.empty()) fused.bias.insert(fused.bias.end(), p.out, 0.0f);
    else fused.bias.insert(fused.bias.end(), p.bias.begin(), p.bias.end());
  }
  if (any_packed) {
    // A GGUF may store some parts in F32 (kept as floats) beside quantized ones (q in F32, k and
    // v in Q8_0): those are packed as f32 too, and concat_rows fuses parts of different formats
    // exactly. (Only a part packed first used to be checked; a float part first crashed here.)
    std::vector<fast::PackedMatrix> from_f32;
    from_f32.reserve(parts.size());
    std::vector<const fast::PackedMatrix*> packed;
    for (const auto& p : parts) {
      if (!p.packed) from_f32.push_back(fast::PackedMatrix::from_f32(p.weight->data(), p.out, p.in, fast::WeightFormat::F32));
      packed.push_back(p.packed ? p.packed.get() : &from_f32.back());
    }
    fused.packed = std::make_shared<const fast::PackedMatrix>(fast::PackedMatrix::concat_rows(packed));
    return fused;
  }
  auto weight = std::make_shared<std::vector<float>>();
  for (const auto& p : parts) weight->insert(weight->end(), p.weight->begin(), p.weight->end());
  fused.weight = std::move(weight);
  return fused;
}

LinearWeight tied_head(const TransformerWeights& t, int vocab, int hidden) {
  LinearWeight head;
  head.in = hidden;
  head.out = vocab;
  head.weight = t.embedding;
  head.packed = t.packed_embedding;
  return head;
}

std::vector<float> rope_inv_freq(int head_dim, double theta, const nlohmann::json& rope_scaling, const std::string& where) {
  std::vector<float> inv(head_dim / 2);
  for (int i = 0; i < head_dim / 2; ++i)
    inv[i] = static_cast<float>(1.0 / std::pow(theta, static_cast<double>(2 * i) / head_dim));
  if (rope_scaling.is_null()) return inv;
  if (!rope_scaling.is_object()) fail("{}: rope_scaling must be an object or null", where);
  std::string type = rope_scaling.value("rope_type", rope_scaling.value("type", std::string("default")));
  auto number = [&](const char* key) {
    if (!rope_scaling.contains(key) || !rope_scaling[key].is_number())
      fail("{}: rope_scaling of type {} needs a number \"{}\"", where, type, key);
    return rope_scaling[key].get<double>();
  };
  if (type == "default") return inv;
  if (type == "linear") {
    const double factor = number("factor");
    for (auto& f : inv) f = static_cast<float>(f / factor);
    return inv;
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
    return inv;
  }
  fail("{}: rope_scaling type '{}' is not supported (supported: linear, llama3)", where, type);
}

TransformerModel::TransformerModel(ModelConfig config, TransformerWeights weights, std::filesystem::path path)
    : config_(std::move(config)), w_(std::move(weights)), path_(std::move(path)) {}

// Decode's weight bytes by the format they are held in (a mixed matrix counted by its parts).
std::map<std::string, std::size_t> TransformerModel::weight_bytes_by_format() const {
  std::map<std::string, std::size_t> by_format;
  auto add = [&](const LinearWeight& l) {
    if (!l.packed) {
      if (l.weight) by_format["f32"] += l.weight->size() * sizeof(float);
      return;
    }
    if (l.packed->parts().empty()) by_format[fast::format_name(l.packed->format())] += l.packed->bytes();
    for (const fast::PackedMatrix& part : l.packed->parts()) by_format[fast::format_name(part.format())] += part.bytes();
  };
  add(w_.lm_head);
  for (const LayerWeights& layer : w_.layers)
    for (const LinearWeight* l : {&layer.qkv, &layer.out, &layer.up, &layer.down}) add(*l);
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

namespace {

void add_into(float* x, const float* y, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) x[i] += y[i];
}

}  // namespace

void TransformerModel::forward_into(std::span<const BatchEntry> batch, KVCache& cache, std::vector<float>& logits) {
  const ModelConfig& c = config_;
  const int hidden = c.hidden_size, heads = c.num_heads, kv_heads = c.num_kv_heads, hd = c.head_dim;
  const int q_dim = heads * hd, kv_dim = kv_heads * hd, qkv_dim = q_dim + 2 * kv_dim;
  const int group = heads / kv_heads;
  const int bs = cache.block_size();
  const float eps = static_cast<float>(c.norm_eps);
  if (batch.empty()) {
    logits.clear();
    return;
  }

  // Validate everything before touching the cache so a bad entry leaves every sequence as it was.
  int rows = 0, out_rows = 0;
  std::set<const SequenceKV*> seen;
  for (const auto& e : batch) {
    if (!e.kv) fail("forward: batch entry without a SequenceKV");
    if (!seen.insert(e.kv).second) fail("forward: the same sequence appears twice in one batch");
    if (e.tokens.empty()) fail("forward: batch entry with no tokens");
    const long end = static_cast<long>(e.kv->length) + static_cast<long>(e.tokens.size());
    if (end > static_cast<long>(e.kv->blocks.size()) * bs)
      fail("forward: sequence has KV room for {} positions but needs {}; call SequenceKV::reserve first",
           e.kv->blocks.size() * bs, end);
    if (w_.positions == PositionKind::Learned && end > c.max_position_embeddings)
      fail("forward: position {} is beyond this model's context of {} positions", end - 1, c.max_position_embeddings);
    for (int32_t t : e.tokens)
      if (t < 0 || t >= c.vocab_size) fail("forward: token id {} is outside the vocabulary (0..{})", t, c.vocab_size - 1);
    for (int b : e.kv->blocks)
      if (b < 0 || b >= cache.num_blocks()) fail("forward: block {} is not in this KV cache", b);
    rows += static_cast<int>(e.tokens.size());
    out_rows += e.all_logits ? static_cast<int>(e.tokens.size()) : 1;
  }

  // Per row: owning entry and absolute position.
  std::vector<int> row_entry(rows), row_pos(rows);
  std::vector<float> x(static_cast<std::size_t>(rows) * hidden);
  {
    int r = 0;
    for (std::size_t e = 0; e < batch.size(); ++e)
      for (std::size_t i = 0; i < batch[e].tokens.size(); ++i, ++r) {
        row_entry[r] = static_cast<int>(e);
        row_pos[r] = batch[e].kv->length + static_cast<int>(i);
        if (w_.packed_embedding) w_.packed_embedding->dequantize_row(batch[e].tokens[i], &x[static_cast<std::size_t>(r) * hidden]);
        else
          std::memcpy(&x[static_cast<std::size_t>(r) * hidden],
                      w_.embedding->data() + static_cast<std::size_t>(batch[e].tokens[i]) * hidden, sizeof(float) * hidden);
        if (w_.positions == PositionKind::Learned)
          add_into(&x[static_cast<std::size_t>(r) * hidden], &w_.position_embedding[static_cast<std::size_t>(row_pos[r]) * hidden],
                   hidden);
      }
  }

  const int half = hd / 2;
  std::vector<float> cos_table, sin_table;
  if (w_.positions == PositionKind::Rope) {
    cos_table.resize(static_cast<std::size_t>(rows) * half);
    sin_table.resize(cos_table.size());
    for (int r = 0; r < rows; ++r)
      for (int i = 0; i < half; ++i) {
        const float angle = static_cast<float>(row_pos[r]) * w_.inv_freq[i];
        cos_table[static_cast<std::size_t>(r) * half + i] = std::cos(angle);
        sin_table[static_cast<std::size_t>(r) * half + i] = std::sin(angle);
      }
  }

  const auto R = static_cast<std::size_t>(rows);
  std::vector<float> normed(R * hidden), qkv(R * qkv_dim), attn(R * q_dim), proj(R * hidden);
  const int up_width = w_.layers.empty() ? 0 : w_.layers[0].up.out;
  const int inter = w_.mlp == MlpKind::SwiGLU ? up_width / 2 : up_width;
  std::vector<float> up(R * up_width), act(w_.mlp == MlpKind::SwiGLU ? R * inter : 0);
  std::vector<float> scores, gathered_k, gathered_v;
  // Packed (bf16/int8/q4) models use the fused kernel; f32 keeps the BLAS path its parity tests pin.
  const bool fused_attention = !w_.layers.empty() && w_.layers[0].qkv.packed != nullptr;
  // One view per sequence, refilled in place each layer (KVCache::layer_blocks).
  std::vector<fast::KVBlocks> kv_views(fused_attention ? batch.size() : 0);
  std::vector<fast::AttentionRow> attention_rows(fused_attention ? rows : 0);
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));

  auto norm_to = [&](const float* in, float* out, int n_rows, const std::vector<float>& weight, const std::vector<float>& bias) {
    if (w_.norm == NormKind::RMSNorm) rms_norm_to(in, out, n_rows, hidden, weight.data(), eps);
    else layer_norm_to(in, out, n_rows, hidden, weight.data(), bias.empty() ? nullptr : bias.data(), eps);
  };

  for (std::size_t l = 0; l < w_.layers.size(); ++l) {
    const LayerWeights& L = w_.layers[l];
    const int layer = static_cast<int>(l);
    norm_to(x.data(), normed.data(), rows, L.norm1_weight, L.norm1_bias);
    linear(normed.data(), rows, L.qkv, qkv.data());

    for (int r = 0; r < rows; ++r) {
      float* q = &qkv[static_cast<std::size_t>(r) * qkv_dim];
      float* k = q + q_dim;
      const float* v = k + kv_dim;
      if (!L.q_norm.empty()) {  // Qwen3: each head normalised on its own, before RoPE
        rms_norm_to(q, q, heads, hd, L.q_norm.data(), eps);
        rms_norm_to(k, k, kv_heads, hd, L.k_norm.data(), eps);
      }
      if (w_.positions == PositionKind::Rope) {
        const float* cs = &cos_table[static_cast<std::size_t>(r) * half];
        const float* sn = &sin_table[static_cast<std::size_t>(r) * half];
        for (int h = 0; h < heads; ++h) rope_rotate_half(q + h * hd, hd, cs, sn);
        for (int h = 0; h < kv_heads; ++h) rope_rotate_half(k + h * hd, hd, cs, sn);
      }
      cache.write(layer, *batch[row_entry[r]].kv, row_pos[r], k, v);
    }

    if (fused_attention) {
      // One pass over each sequence's cache blocks per (row, kv head): scores, online softmax and
      // the weighted values fused (src/tensor/fast/attention.cpp), threaded on the kernel pool.
      for (std::size_t e = 0; e < batch.size(); ++e) cache.layer_blocks(layer, *batch[e].kv, kv_views[e]);
      for (int r = 0; r < rows; ++r)
        attention_rows[r] = {&kv_views[row_entry[r]], row_pos[r],
                             c.sliding_window > 0 ? std::max(0, row_pos[r] - c.sliding_window + 1) : 0};
      fast::causal_attention(qkv.data(), qkv_dim, attn.data(), q_dim, attention_rows, {heads, kv_heads, hd, scale});
    } else {
      // Causal attention per sequence and kv head: its cached K/V gathered contiguous, then two
      // matrix products per query head (rows at position p see positions 0..p).
      for (int e = 0, first_row = 0; e < static_cast<int>(batch.size()); ++e) {
        const SequenceKV& seq = *batch[e].kv;
        const int n = static_cast<int>(batch[e].tokens.size());
        const int start = seq.length, ctx = start + n;
        gathered_k.resize(static_cast<std::size_t>(ctx) * kv_dim);
        gathered_v.resize(gathered_k.size());
        cache.gather(layer, seq, ctx, gathered_k.data(), gathered_v.data());
        for (int h = 0; h < heads; ++h) {
          const int kvh = h / group;
          causal_attention(&qkv[static_cast<std::size_t>(first_row) * qkv_dim + h * hd], qkv_dim, n, start,
                           gathered_k.data() + kvh * hd, gathered_v.data() + kvh * hd, kv_dim, hd, scale,
                           &attn[static_cast<std::size_t>(first_row) * q_dim + h * hd], q_dim, scores, c.sliding_window);
        }
        first_row += n;
      }
    }
    linear(attn.data(), rows, L.out, proj.data());
    add_into(x.data(), proj.data(), R * hidden);

    norm_to(x.data(), normed.data(), rows, L.norm2_weight, L.norm2_bias);
    linear(normed.data(), rows, L.up, up.data());
    if (w_.mlp == MlpKind::SwiGLU) {
      swiglu(up.data(), act.data(), rows, inter);
      linear(act.data(), rows, L.down, proj.data());
    } else {
      if (w_.mlp == MlpKind::GeluTanh) gelu_tanh(up.data(), up.size());
      else gelu_erf(up.data(), up.size());
      linear(up.data(), rows, L.down, proj.data());
    }
    add_into(x.data(), proj.data(), R * hidden);
  }

  // Only the rows whose logits are wanted go through the final norm and the (large) lm_head.
  std::vector<float> selected(static_cast<std::size_t>(out_rows) * hidden);
  {
    int r = 0, s = 0;
    for (const auto& e : batch) {
      const int n = static_cast<int>(e.tokens.size());
      const int first = e.all_logits ? 0 : n - 1;
      for (int i = first; i < n; ++i, ++s)
        std::memcpy(&selected[static_cast<std::size_t>(s) * hidden], &x[static_cast<std::size_t>(r + i) * hidden],
                    sizeof(float) * hidden);
      r += n;
    }
  }
  norm_to(selected.data(), selected.data(), out_rows, w_.final_norm_weight, w_.final_norm_bias);
  logits.resize(static_cast<std::size_t>(out_rows) * c.vocab_size);  // every element written below
  linear(selected.data(), out_rows, w_.lm_head, logits.data());

  for (const auto& e : batch) e.kv->length += static_cast<int>(e.tokens.size());
}

}  // namespace inferlab
