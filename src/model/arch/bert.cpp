// BERT (BertModel, and the encoder inside BertFor*: weights under "bert."): an encoder, as
// sentence-transformers' embedding models use it (all-MiniLM-L6-v2). Learned absolute positions
// plus the token-type embedding (type 0: one sequence), LayerNorm after the embeddings and after
// each residual add (post-norm), bidirectional attention with biases, exact-erf GELU MLP. No
// output layer: the model gives hidden states, which the engine pools into an embedding.
#include <cstring>

#include "inferlab/loading/json_config.h"
#include "inferlab/util/error.h"
#include "model/graph/blocks.h"
#include "model/transformer.h"

namespace inferlab {
namespace {

ModelConfig parse(const nlohmann::json& j, const std::string& where) {
  ModelConfig c;
  c.architecture = "bert";
  c.encoder = true;
  c.hidden_size = config_int(j, "hidden_size", where);
  c.num_layers = config_int(j, "num_hidden_layers", where);
  c.num_heads = config_int(j, "num_attention_heads", where);
  c.num_kv_heads = c.num_heads;
  c.intermediate_size = config_int(j, "intermediate_size", where);
  c.vocab_size = config_int(j, "vocab_size", where);
  c.max_position_embeddings = config_int(j, "max_position_embeddings", where);
  c.norm_eps = config_double_or(j, "layer_norm_eps", 1e-12, where);
  if (c.hidden_size % c.num_heads != 0)
    fail("{}: hidden_size {} is not divisible by num_attention_heads {}", where, c.hidden_size, c.num_heads);
  c.head_dim = c.hidden_size / c.num_heads;
  const std::string act = j.value("hidden_act", std::string("gelu"));
  if (act != "gelu") fail("{}: hidden_act '{}' is not supported (gelu)", where, act);
  const std::string positions = j.value("position_embedding_type", std::string("absolute"));
  if (positions != "absolute") fail("{}: position_embedding_type '{}' is not supported (absolute)", where, positions);
  if (config_int_or(j, "type_vocab_size", 2, where) < 1) fail("{}: type_vocab_size must be at least 1", where);
  if (config_bool_or(j, "is_decoder", false, where)) fail("{}: is_decoder true is not supported (BERT as an encoder)", where);
  c.pooling = {EmbeddingPooling::Kind::mean, true};  // sentence-transformers' modules.json, when present, decide
  return c;
}

TransformerWeights load(const ModelConfig& c, const nlohmann::json& raw, const TensorSource& source,
                        const LoadOptions& options, Backend& backend) {
  WeightLoader w(source, backend, options);
  const std::string p = w.has("bert.embeddings.word_embeddings.weight") ? "bert." : "";
  const int H = c.hidden_size, I = c.intermediate_size, P = c.max_position_embeddings;
  TransformerWeights t;
  t.gelu_erf = true;
  w.embedding(p + "embeddings.word_embeddings.weight", c.vocab_size, H, t, /*tied_output=*/false);
  // Every input is one sequence (token type 0), so type 0's row is folded into the position table
  // once here rather than added to every row of every step.
  std::vector<float> positions = w.tensor(p + "embeddings.position_embeddings.weight", {P, H});
  const std::vector<float> types =
      w.tensor(p + "embeddings.token_type_embeddings.weight", {config_int_or(raw, "type_vocab_size", 2, "config.json"), H});
  for (int pos = 0; pos < P; ++pos)
    for (int i = 0; i < H; ++i) positions[static_cast<std::size_t>(pos) * H + i] += types[i];
  TensorView table{DType::F32, {P, H}, positions.data(), positions.size() * sizeof(float), "position + token type 0"};
  t.position_embedding = backend.matrix(table, P, H, "f32");
  t.embedding_norm_weight = w.tensor(p + "embeddings.LayerNorm.weight", {H});
  t.embedding_norm_bias = w.tensor(p + "embeddings.LayerNorm.bias", {H});
  for (int l = 0; l < c.num_layers; ++l) {
    const std::string b = p + "encoder.layer." + std::to_string(l) + ".";
    LayerWeights L;
    L.qkv = w.fuse_rows({w.linear(b + "attention.self.query.weight", H, H, b + "attention.self.query.bias"),
                       w.linear(b + "attention.self.key.weight", H, H, b + "attention.self.key.bias"),
                       w.linear(b + "attention.self.value.weight", H, H, b + "attention.self.value.bias")});
    L.out = w.linear(b + "attention.output.dense.weight", H, H, b + "attention.output.dense.bias");
    L.norm1_weight = w.tensor(b + "attention.output.LayerNorm.weight", {H});  // after attention's residual add
    L.norm1_bias = w.tensor(b + "attention.output.LayerNorm.bias", {H});
    L.up = w.linear(b + "intermediate.dense.weight", I, H, b + "intermediate.dense.bias");
    L.down = w.linear(b + "output.dense.weight", H, I, b + "output.dense.bias");
    L.norm2_weight = w.tensor(b + "output.LayerNorm.weight", {H});  // after the MLP's residual add
    L.norm2_bias = w.tensor(b + "output.LayerNorm.bias", {H});
    t.layers.push_back(std::move(L));
  }
  return t;
}

// Post-norm: the residual stream lives in s.normed (attention and the MLP read their input
// there), each sublayer's output is added to it in s.proj, and the LayerNorm of that sum is the
// next stream.
void forward(const TransformerWeights& w, ForwardStep& s) {
  embed_tokens(s, w);
  norm(s, Norm::Layer, s.x, w.embedding_norm_weight, w.embedding_norm_bias, s.normed);
  for (std::size_t l = 0; l < w.layers.size(); ++l) {
    const LayerWeights& L = w.layers[l];
    attention(s, static_cast<int>(l), L, {.rope = false, .causal = false});
    s.backend.add(s.proj, s.normed);
    norm(s, Norm::Layer, s.proj, L.norm1_weight, L.norm1_bias, s.normed);
    dense_mlp(s, L, Activation::GeluErf);
    s.backend.add(s.proj, s.normed);
    norm(s, Norm::Layer, s.proj, L.norm2_weight, L.norm2_bias, s.normed);
  }
  output_hidden_states(s, s.normed);
}

std::vector<TensorSpec> layout(const ModelConfig& c, const nlohmann::json&) {
  const int64_t H = c.hidden_size, I = c.intermediate_size;
  std::vector<TensorSpec> specs{{"embeddings.word_embeddings.weight", {c.vocab_size, H}},
                                {"embeddings.position_embeddings.weight", {c.max_position_embeddings, H}},
                                {"embeddings.token_type_embeddings.weight", {2, H}},
                                {"embeddings.LayerNorm.weight", {H}, Init::Ones},
                                {"embeddings.LayerNorm.bias", {H}, Init::Zeros}};
  for (int l = 0; l < c.num_layers; ++l) {
    const std::string b = "encoder.layer." + std::to_string(l) + ".";
    for (const char* name : {"attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense"}) {
      specs.push_back({b + name + ".weight", {H, H}});
      specs.push_back({b + name + ".bias", {H}, Init::Zeros});
    }
    specs.push_back({b + "attention.output.LayerNorm.weight", {H}, Init::Ones});
    specs.push_back({b + "attention.output.LayerNorm.bias", {H}, Init::Zeros});
    specs.push_back({b + "intermediate.dense.weight", {I, H}});
    specs.push_back({b + "intermediate.dense.bias", {I}, Init::Zeros});
    specs.push_back({b + "output.dense.weight", {H, I}});
    specs.push_back({b + "output.dense.bias", {H}, Init::Zeros});
    specs.push_back({b + "output.LayerNorm.weight", {H}, Init::Ones});
    specs.push_back({b + "output.LayerNorm.bias", {H}, Init::Zeros});
  }
  return specs;
}

}  // namespace

const Architecture& bert_architecture() {
  static const Architecture arch{"bert", {"bert"}, {"BertModel", "BertForMaskedLM", "BertForPreTraining"}, parse, load, layout,
                                 forward};
  return arch;
}

}  // namespace inferlab
