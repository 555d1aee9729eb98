#include "inferlab/loading/llama2c.h"

#include <cstdint>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "inferlab/util/error.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace inferlab {
namespace {

struct Header {
  int32_t dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len;
  bool shared_classifier() const { return vocab_size > 0; }
  int vocab() const { return vocab_size < 0 ? -vocab_size : vocab_size; }
  int head_size() const { return dim / n_heads; }
  int kv_dim() const { return head_size() * n_kv_heads; }
  // floats after the header, as llama2.c's memory_map_weights lays them out.
  uint64_t weight_floats() const {
    const uint64_t d = dim, h = hidden_dim, l = n_layers, v = vocab(), kv = kv_dim(), hs = head_size();
    uint64_t n = v * d + l * d + l * d * d + 2 * l * d * kv + l * d * d + l * d + 3 * l * d * h + d;
    n += static_cast<uint64_t>(seq_len) * hs;  // freq_cis_real + freq_cis_imag (unused)
    if (!shared_classifier()) n += v * d;
    return n;
  }
};

Header read_header(const fs::path& file, uint64_t* file_size) {
  std::ifstream in(file, std::ios::binary);
  if (!in) fail("cannot open llama2.c checkpoint {}", file.string());
  Header h{};
  in.read(reinterpret_cast<char*>(&h), sizeof(h));
  if (!in) fail("{}: too short for a llama2.c header (7 int32)", file.string());
  *file_size = fs::file_size(file);
  if (h.dim <= 0 || h.hidden_dim <= 0 || h.n_layers <= 0 || h.n_heads <= 0 || h.n_kv_heads <= 0 || h.vocab_size == 0 ||
      h.seq_len <= 0 || h.dim % h.n_heads != 0 || h.n_heads % h.n_kv_heads != 0 || h.dim > (1 << 16) ||
      h.hidden_dim > (1 << 18) || h.n_layers > 1024 || h.vocab() > (1 << 22) || h.seq_len > (1 << 22) ||
      h.head_size() % 2 != 0)
    fail("{}: not a llama2.c checkpoint (implausible header dim={} hidden_dim={} layers={} heads={} kv_heads={} "
         "vocab={} seq_len={})",
         file.string(), h.dim, h.hidden_dim, h.n_layers, h.n_heads, h.n_kv_heads, h.vocab_size, h.seq_len);
  return h;
}

json config_of(const Header& h) {
  return json{{"architectures", {"LlamaForCausalLM"}},
              {"model_type", "llama"},
              {"hidden_size", h.dim},
              {"intermediate_size", h.hidden_dim},
              {"num_hidden_layers", h.n_layers},
              {"num_attention_heads", h.n_heads},
              {"num_key_value_heads", h.n_kv_heads},
              {"vocab_size", h.vocab()},
              {"max_position_embeddings", h.seq_len},
              {"rms_norm_eps", 1e-5},
              {"rope_theta", 10000.0},
              {"tie_word_embeddings", h.shared_classifier()},
              {"bos_token_id", 1},
              {"eos_token_id", nullptr},
              {"torch_dtype", "float32"}};
}

// Interleaved (pairs 2i, 2i+1) -> rotate_half (pairs i, i + head_size/2), per head.
std::vector<float> permute_for_rotate_half(const float* w, int heads, int head_size, int in) {
  std::vector<float> out(static_cast<std::size_t>(heads) * head_size * in);
  const int half = head_size / 2;
  for (int h = 0; h < heads; ++h)
    for (int s = 0; s < 2; ++s)
      for (int i = 0; i < half; ++i)
        std::memcpy(&out[(static_cast<std::size_t>(h) * head_size + s * half + i) * in],
                    &w[(static_cast<std::size_t>(h) * head_size + 2 * i + s) * in], sizeof(float) * in);
  return out;
}

}  // namespace

bool looks_like_llama2c(const fs::path& file) {
  try {
    uint64_t size = 0;
    Header h = read_header(file, &size);
    return size == sizeof(Header) + 4 * h.weight_floats();
  } catch (const Error&) {
    return false;
  }
}

json read_llama2c_config(const fs::path& file) {
  uint64_t size = 0;
  return config_of(read_header(file, &size));
}

std::unique_ptr<MemoryTensorSource> read_llama2c_weights(const fs::path& file) {
  uint64_t size = 0;
  const Header h = read_header(file, &size);
  const uint64_t expected = sizeof(Header) + 4 * h.weight_floats();
  if (size != expected)
    fail("{}: llama2.c checkpoint is {} bytes but its header (dim {}, layers {}, vocab {}) implies {}: truncated or "
         "another format",
         file.string(), size, h.dim, h.n_layers, h.vocab_size, expected);
  std::vector<float> all(h.weight_floats());
  std::ifstream in(file, std::ios::binary);
  in.seekg(sizeof(Header));
  in.read(reinterpret_cast<char*>(all.data()), static_cast<std::streamsize>(all.size() * 4));
  if (!in) fail("{}: read failed", file.string());

  auto tensors = std::make_unique<MemoryTensorSource>(file.string());
  const int64_t d = h.dim, hd = h.hidden_dim, L = h.n_layers, V = h.vocab(), kv = h.kv_dim(), hs = h.head_size();
  const float* p = all.data();
  auto take = [&](int64_t n) {
    const float* at = p;
    p += n;
    return at;
  };
  auto copy = [](const float* at, int64_t n) { return std::vector<float>(at, at + n); };
  const float* embedding = take(V * d);
  tensors->add("model.embed_tokens.weight", {V, d}, copy(embedding, V * d));
  const float* rms_att = take(L * d);
  const float* wq = take(L * d * d);
  const float* wk = take(L * kv * d);
  const float* wv = take(L * kv * d);
  const float* wo = take(L * d * d);
  const float* rms_ffn = take(L * d);
  const float* w1 = take(L * hd * d);
  const float* w2 = take(L * d * hd);
  const float* w3 = take(L * hd * d);
  const float* rms_final = take(d);
  take(h.seq_len * hs);  // freq_cis_real/imag: recomputed from rope_theta instead
  for (int64_t l = 0; l < L; ++l) {
    const std::string prefix = "model.layers." + std::to_string(l) + ".";
    tensors->add(prefix + "input_layernorm.weight", {d}, copy(rms_att + l * d, d));
    tensors->add(prefix + "self_attn.q_proj.weight", {d, d},
                    permute_for_rotate_half(wq + l * d * d, h.n_heads, hs, h.dim));
    tensors->add(prefix + "self_attn.k_proj.weight", {kv, d},
                    permute_for_rotate_half(wk + l * kv * d, h.n_kv_heads, hs, h.dim));
    tensors->add(prefix + "self_attn.v_proj.weight", {kv, d}, copy(wv + l * kv * d, kv * d));
    tensors->add(prefix + "self_attn.o_proj.weight", {d, d}, copy(wo + l * d * d, d * d));
    tensors->add(prefix + "post_attention_layernorm.weight", {d}, copy(rms_ffn + l * d, d));
    tensors->add(prefix + "mlp.gate_proj.weight", {hd, d}, copy(w1 + l * hd * d, hd * d));
    tensors->add(prefix + "mlp.down_proj.weight", {d, hd}, copy(w2 + l * d * hd, d * hd));
    tensors->add(prefix + "mlp.up_proj.weight", {hd, d}, copy(w3 + l * hd * d, hd * d));
  }
  tensors->add("model.norm.weight", {d}, copy(rms_final, d));
  if (!h.shared_classifier()) tensors->add("lm_head.weight", {V, d}, copy(take(V * d), V * d));
  return tensors;
}

}  // namespace inferlab
