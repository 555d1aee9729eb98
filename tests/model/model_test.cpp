// Engine unit tests: batched forward == each sequence alone, prefix-shared
// blocks, greedy generation stop rules, and the errors bad model files must produce.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "inferlab/util/error.h"
#include "inferlab/generation/greedy_decode.h"
#include "inferlab/loading/llama2c.h"
#include "inferlab/model/model.h"
#include "inferlab/loading/json_config.h"
#include "inferlab/model/make_model.h"
#include "inferlab/loading/safetensors.h"

namespace fs = std::filesystem;
using nlohmann::json;
using namespace inferlab;

namespace {

// This process's scratch folder (CTest runs each case in a process of its own), removed when the
// process's tests end so runs do not pile up model folders in /tmp.
fs::path temp_root() { return fs::temp_directory_path() / ("inferlab_engine_test_" + std::to_string(::getpid())); }

struct RemoveTempRoot : ::testing::Environment {
  void TearDown() override { fs::remove_all(temp_root()); }
};
[[maybe_unused]] ::testing::Environment* const remove_temp_root =
    ::testing::AddGlobalTestEnvironment(new RemoveTempRoot);

fs::path temp_dir(const std::string& name) {
  fs::path dir = temp_root() / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

json tiny_config(const std::string& type) {
  if (type == "gpt2")
    return {{"model_type", "gpt2"}, {"n_embd", 32}, {"n_layer", 2}, {"n_head", 4}, {"n_positions", 128}, {"vocab_size", 64}};
  json c = {{"model_type", type},         {"hidden_size", 32},      {"num_hidden_layers", 2},
            {"num_attention_heads", 4},   {"num_key_value_heads", 2}, {"intermediate_size", 48},
            {"vocab_size", 64},           {"max_position_embeddings", 256}, {"rms_norm_eps", 1e-6},
            {"tie_word_embeddings", type == "qwen2"}};
  if (type == "qwen3_moe")  // 6 experts, 2 per token, layer 1 dense: routing differs from row to row
    c.update({{"num_experts", 6}, {"num_experts_per_tok", 2}, {"moe_intermediate_size", 16}, {"norm_topk_prob", true},
              {"mlp_only_layers", {1}}, {"head_dim", 16}});
  // gpt_oss: layer 0 slides over 8 positions, layer 1 sees all; every token uses all 4 experts, so
  // the output is continuous in its inputs and paths that round differently (an f16 cache) stay
  // close (its top-k routing is pinned by gpt_oss_parity.py against transformers).
  if (type == "gpt_oss")
    c.update({{"num_local_experts", 4}, {"num_experts_per_tok", 4}, {"head_dim", 16}, {"sliding_window", 8}});
  return c;
}

fs::path make_tiny(const std::string& type, DType dtype = DType::F32, uint64_t seed = 7) {
  fs::path dir = temp_dir(type + "_" + dtype_name(dtype) + "_" + std::to_string(seed));
  MakeModelOptions options;
  options.dtype = dtype;
  options.seed = seed;
  options.init_std = 0.3f;  // larger than real init so greedy choices are far from ties
  write_random_model(tiny_config(type), dir, options);
  return dir;
}

std::vector<int32_t> ids(int n, int seed, int vocab = 64) {
  std::mt19937 rng(seed);
  std::vector<int32_t> v(n);
  for (auto& x : v) x = static_cast<int32_t>(rng() % vocab);
  return v;
}

float max_diff(std::span<const float> a, std::span<const float> b) {
  EXPECT_EQ(a.size(), b.size());
  float d = 0;
  for (std::size_t i = 0; i < a.size() && i < b.size(); ++i) d = std::max(d, std::abs(a[i] - b[i]));
  return d;
}

template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

void write_file(const fs::path& file, const std::string& bytes) {
  std::ofstream out(file, std::ios::binary);
  out << bytes;
}

std::string read_file(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// A safetensors file whose header is `header` (data appended as given).
std::string safetensors_bytes(const std::string& header, const std::string& data) {
  std::string out(8, '\0');
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>(n >> (8 * i));
  return out + header + data;
}

}  // namespace

class Architectures : public ::testing::TestWithParam<std::string> {};

TEST_P(Architectures, BatchedForwardEqualsEachSequenceAlone) {
  auto model = Model::load(make_tiny(GetParam()).string());
  KVCache cache(model->config(), 1024, 16);
  const auto p1 = ids(37, 1), p2 = ids(5, 2), p3 = ids(18, 3), more3 = ids(4, 4);

  // Alone: each sequence in its own forward; sequence 3 gets its prompt then 4 more tokens.
  auto alone = [&](std::span<const int32_t> tokens, bool all) {
    SequenceKV s;
    EXPECT_TRUE(s.reserve(cache, static_cast<int>(tokens.size())));
    BatchEntry e{tokens, &s, all ? EntryOutput::all_logits : EntryOutput::last_logits};
    auto out = model->forward(std::span<const BatchEntry>(&e, 1), cache);
    s.release(cache);
    return out;
  };
  std::vector<int32_t> full3(p3);
  full3.insert(full3.end(), more3.begin(), more3.end());
  auto a1 = alone(p1, false), a2 = alone(p2, true), a3 = alone(full3, true);

  // Together: sequence 3 already holds its prompt (decode/chunked prefill mixed with new prompts).
  SequenceKV s1, s2, s3;
  ASSERT_TRUE(s3.reserve(cache, static_cast<int>(p3.size())));
  BatchEntry pre{p3, &s3, EntryOutput::last_logits};
  model->forward(std::span<const BatchEntry>(&pre, 1), cache);
  ASSERT_TRUE(s1.reserve(cache, 37) && s2.reserve(cache, 5) && s3.reserve(cache, 4));
  std::vector<BatchEntry> batch{{p1, &s1, EntryOutput::last_logits}, {p2, &s2, EntryOutput::all_logits}, {more3, &s3, EntryOutput::all_logits}};
  auto together = model->forward(batch, cache);
  const int V = model->config().vocab_size;
  ASSERT_EQ(together.size(), static_cast<std::size_t>(V) * (1 + 5 + 4));
  EXPECT_EQ(s1.length, 37);
  EXPECT_EQ(s3.length, 22);
  EXPECT_LE(max_diff(std::span(together).subspan(0, V), a1), 1e-4);
  EXPECT_LE(max_diff(std::span(together).subspan(V, 5 * V), a2), 1e-4);
  EXPECT_LE(max_diff(std::span(together).subspan(6 * V, 4 * V), std::span(a3).subspan(18 * V, 4 * V)), 1e-4);
}

TEST_P(Architectures, ForwardIntoReusesTheCallersLogitsBuffer) {
  auto model = Model::load(make_tiny(GetParam()).string());
  KVCache cache(model->config(), 256, 16);
  const auto prompt = ids(9, 7);
  const int V = model->config().vocab_size;
  // Two identical sequences: one stepped with forward (a fresh vector each step), the other with
  // forward_into on one vector holding stale values from a wider step.
  SequenceKV fresh, reused;
  std::vector<float> logits(static_cast<std::size_t>(3) * V, 123.0f);
  logits.resize(V);
  const float* memory = logits.data();
  std::vector<int32_t> next_fresh(prompt), next_reused(prompt);
  for (int step = 0; step < 4; ++step) {
    ASSERT_TRUE(fresh.reserve(cache, static_cast<int>(next_fresh.size())) &&
                reused.reserve(cache, static_cast<int>(next_reused.size())));
    BatchEntry a{next_fresh, &fresh, EntryOutput::last_logits}, b{next_reused, &reused, EntryOutput::last_logits};
    const auto expected = model->forward(std::span<const BatchEntry>(&a, 1), cache);
    model->forward_into(std::span<const BatchEntry>(&b, 1), cache, logits);
    ASSERT_EQ(logits.size(), static_cast<std::size_t>(V));
    EXPECT_EQ(logits.data(), memory) << "step " << step << ": the buffer was reallocated";
    ASSERT_EQ(logits, expected) << "step " << step;
    next_fresh.assign(1, argmax(expected));
    next_reused.assign(1, argmax(logits));
  }
  // A batch wider than the buffer grows it; an empty one leaves no rows.
  ASSERT_TRUE(fresh.reserve(cache, 2) && reused.reserve(cache, 2));
  const auto two = ids(2, 8);
  std::vector<BatchEntry> batch{{two, &fresh, EntryOutput::all_logits}, {two, &reused, EntryOutput::all_logits}};
  model->forward_into(batch, cache, logits);
  EXPECT_EQ(logits.size(), static_cast<std::size_t>(4) * V);
  EXPECT_EQ(std::vector<float>(logits.begin(), logits.begin() + 2 * V), std::vector<float>(logits.begin() + 2 * V, logits.end()));
  model->forward_into({}, cache, logits);
  EXPECT_TRUE(logits.empty());
}

// Hidden states are the rows the logits are projected from: in one step where one entry asks
// for logits and another (the same prompt) for hidden states, the output matrix of the checkpoint
// times each hidden state is that row's logits (what an embedding is pooled from).
TEST_P(Architectures, HiddenStatesTimesTheOutputMatrixAreTheLogits) {
  const fs::path dir = make_tiny(GetParam());
  auto model = Model::load(dir.string());
  const ModelConfig& c = model->config();
  KVCache cache(c, 256, 16);
  const auto prompt = ids(11, 5);
  SequenceKV for_logits, for_hidden;
  ASSERT_TRUE(for_logits.reserve(cache, 11) && for_hidden.reserve(cache, 11));
  const std::vector<BatchEntry> batch{{prompt, &for_logits, EntryOutput::all_logits},
                                      {prompt, &for_hidden, EntryOutput::hidden_states}};
  StepOutputs step;
  model->forward_into(batch, cache, step);
  const std::vector<float>& logits = step.logits;
  const std::vector<float>& hidden = step.hidden;
  ASSERT_EQ(logits.size(), static_cast<std::size_t>(11) * c.vocab_size);
  ASSERT_EQ(hidden.size(), static_cast<std::size_t>(11) * c.hidden_size);
  EXPECT_EQ(for_hidden.length, 11);

  auto source = open_safetensors_folder(dir);
  const char* name = source->find("lm_head.weight") ? "lm_head.weight"
                     : GetParam() == "gpt2"         ? "transformer.wte.weight"
                                                    : "model.embed_tokens.weight";
  const std::vector<float> out = source->require(name).to_f32();  // [vocab][hidden]
  std::vector<float> projected(static_cast<std::size_t>(11) * c.vocab_size);
  for (int r = 0; r < 11; ++r)
    for (int v = 0; v < c.vocab_size; ++v) {
      double dot = 0;
      for (int i = 0; i < c.hidden_size; ++i)
        dot += static_cast<double>(hidden[static_cast<std::size_t>(r) * c.hidden_size + i]) * out[static_cast<std::size_t>(v) * c.hidden_size + i];
      projected[static_cast<std::size_t>(r) * c.vocab_size + v] = static_cast<float>(dot);
    }
  EXPECT_LE(max_diff(projected, logits), 1e-4);
}

TEST_P(Architectures, SharedPrefixBlocksGiveTheSameLogits) {
  auto model = Model::load(make_tiny(GetParam()).string());
  KVCache cache(model->config(), 512, 16);
  const auto prefix = ids(32, 5), tail = ids(7, 6);
  SequenceKV first;
  ASSERT_TRUE(first.reserve(cache, 32));
  BatchEntry e{prefix, &first, EntryOutput::last_logits};
  model->forward(std::span<const BatchEntry>(&e, 1), cache);
  // Second sequence maps the two full prefix blocks instead of recomputing them.
  SequenceKV second;
  for (int b : first.blocks) cache.retain(b), second.blocks.push_back(b);
  second.length = 32;
  first.release(cache);
  ASSERT_TRUE(second.reserve(cache, 7));
  BatchEntry cont{tail, &second, EntryOutput::all_logits};
  auto shared = model->forward(std::span<const BatchEntry>(&cont, 1), cache);

  std::vector<int32_t> full(prefix);
  full.insert(full.end(), tail.begin(), tail.end());
  auto reference = prompt_logits(*model, full);
  const int V = model->config().vocab_size;
  EXPECT_LE(max_diff(shared, std::span(reference).subspan(32 * V)), 1e-4);
}

TEST_P(Architectures, GreedyWithAndWithoutCacheAgree) {
  auto model = Model::load(make_tiny(GetParam(), DType::BF16).string());
  GenerateOptions options;
  options.max_new_tokens = 24;
  options.ignore_eos = true;
  auto cached = generate_greedy(*model, ids(9, 8), options);
  options.use_cache = false;
  auto uncached = generate_greedy(*model, ids(9, 8), options);
  EXPECT_EQ(cached.tokens, uncached.tokens);
  EXPECT_EQ(cached.positions_fed.front(), 9);
  EXPECT_EQ(cached.positions_fed.back(), 1);
  EXPECT_EQ(uncached.positions_fed.back(), 9 + 23);
  EXPECT_EQ(cached.finish_reason, "length");
}

INSTANTIATE_TEST_SUITE_P(Engine, Architectures, ::testing::Values("gpt2", "qwen2", "llama", "qwen3_moe", "gpt_oss"));

// q4 keeps the output projection (lm_head, or the tied embedding) int8 by default, as llama-quantize's
// Q4 mixes keep theirs at 8 bits; --output-weights chooses it. Tied (qwen2) and untied (llama).
TEST_P(Architectures, OutputWeightsFormatOfTheLmHead) {
  const fs::path dir = make_tiny(GetParam());
  const auto prompt = ids(9, 5);
  auto logits = [&](const std::string& weights, const std::string& output) {
    LoadOptions o;
    o.weights = weights;
    o.output_weights = output;
    auto model = Model::load(dir.string(), o);
    KVCache cache(model->config(), 64, 16);
    SequenceKV s;
    EXPECT_TRUE(s.reserve(cache, static_cast<int>(prompt.size())));
    BatchEntry e{prompt, &s, EntryOutput::all_logits};
    return model->forward(std::span<const BatchEntry>(&e, 1), cache);
  };
  const auto q4_auto = logits("q4", "auto"), q4_int8 = logits("q4", "int8"), q4_pure = logits("q4", "q4");
  EXPECT_EQ(q4_auto, q4_int8);  // bit for bit: the same packing
  EXPECT_GT(max_diff(q4_auto, q4_pure), 1e-3f);  // the lm_head's format does change the logits
  EXPECT_EQ(logits("int8", "auto"), logits("int8", "int8"));
  EXPECT_EQ(logits("bf16", "auto"), logits("bf16", "bf16"));
  EXPECT_NE(logits("bf16", "auto"), logits("bf16", "int8"));
}

// An f16 KV cache rounds K and V to half precision. With f32 weights the logits stay within
// that rounding of the f32 cache's (the gathered path); with packed weights (the fused kernels)
// each layer's activations are rounded or quantized again, which amplifies any change, so there
// the f16 cache must move the logits less than the weight format itself does. The greedy tokens
// are the same. Bad type names are refused by name.
TEST_P(Architectures, HalfPrecisionKvCacheStaysCloseToF32) {
  const fs::path dir = make_tiny(GetParam());
  const auto prompt = ids(40, 7);  // past two 16-position blocks
  std::vector<float> f32_weights;
  for (const std::string weights : {"auto", "bf16", "q4"}) {
    LoadOptions o;
    o.weights = weights;
    auto model = Model::load(dir.string(), o);
    auto logits = [&](KVType type) {
      KVCache cache(model->config(), 64, 16, type);
      EXPECT_EQ(cache.bytes_per_token(), kv_bytes_per_token(model->config(), type == KVType::F16 ? 2 : 4));
      SequenceKV s;
      EXPECT_TRUE(s.reserve(cache, static_cast<int>(prompt.size())));
      BatchEntry e{prompt, &s, EntryOutput::all_logits};
      return model->forward(std::span<const BatchEntry>(&e, 1), cache);
    };
    const auto f32 = logits(KVType::F32), f16 = logits(KVType::F16);
    EXPECT_GT(max_diff(f32, f16), 0.0f) << weights << ": the rounding shows";
    if (weights == "auto") {
      f32_weights = f32;
      float scale = 0;
      for (float v : f32) scale = std::max(scale, std::fabs(v));
      EXPECT_LT(max_diff(f32, f16), 5e-3f * scale);
    } else {
      EXPECT_LT(max_diff(f32, f16), max_diff(f32, f32_weights)) << weights;
    }
    GenerateOptions g;
    g.max_new_tokens = 12;
    g.ignore_eos = true;
    const auto tokens32 = generate_greedy(*model, prompt, g).tokens;
    g.kv_type = KVType::F16;
    // A mixture of experts' top-k is a discontinuity: on packed weights (activations rounded again
    // in every matmul) the f16 rounding moves a router logit past a near-tied expert's on this tiny
    // model, and the tokens after it part. With f32 weights the choice must hold.
    if (GetParam() == "qwen3_moe" && weights != "auto") continue;
    // gpt_oss on q4: the logits above stay within bounds, but its 9th greedy step is a near tie
    // that the f16 rounding tips on this tiny model (bf16 and f32 weights keep the tokens).
    if (GetParam() == "gpt_oss" && weights == "q4") continue;
    EXPECT_EQ(generate_greedy(*model, prompt, g).tokens, tokens32) << weights;
  }
  EXPECT_EQ(parse_kv_type("f16"), KVType::F16);
  EXPECT_THROW(parse_kv_type("bf16"), Error);
}

TEST(OutputWeights, ResolvesAutoAndRejectsUnknownNames) {
  auto of = [](const std::string& weights, const std::string& output) {
    LoadOptions o;
    o.weights = weights;
    o.output_weights = output;
    return output_weights_of(o);
  };
  EXPECT_EQ(of("q4", "auto"), "int8");
  EXPECT_EQ(of("q4_0", ""), "int8");
  EXPECT_EQ(of("int8", "auto"), "int8");
  EXPECT_EQ(of("auto", "auto"), "auto");
  EXPECT_EQ(of("q4", "bf16"), "bf16");
  EXPECT_NE(error_of([&] { of("q4", "q3"); }).find("unknown weight format 'q3'"), std::string::npos);
}

// A tied checkpoint whose one shared matrix is stored under the output's name (lm_head.weight) loads
// as the same model as when it is stored under the embedding's name.
TEST(TiedWeights, StoredUnderTheOutputNameLoadTheSame) {
  fs::path dir = make_tiny("qwen2");  // tie_word_embeddings: true
  GenerateOptions options;
  options.max_new_tokens = 8;
  options.ignore_eos = true;
  const auto expected = generate_greedy(*Model::load(dir.string()), ids(6, 3), options).tokens;
  const std::string bytes = read_file(dir / "model.safetensors");
  uint64_t header_size = 0;
  std::memcpy(&header_size, bytes.data(), 8);
  json header = json::parse(bytes.substr(8, header_size));
  ASSERT_TRUE(header.contains("model.embed_tokens.weight"));
  header["lm_head.weight"] = header["model.embed_tokens.weight"];
  header.erase("model.embed_tokens.weight");
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // the data stays 8-byte aligned, as writers keep it
  write_file(dir / "model.safetensors", safetensors_bytes(text, bytes.substr(8 + header_size)));
  EXPECT_EQ(generate_greedy(*Model::load(dir.string()), ids(6, 3), options).tokens, expected);
}

// safetensors' save_model keeps a tensor shared under two names once and records the dropped name
// in __metadata__: an untied model whose lm_head was saved that way loads with lm_head = the
// embedding, exactly as a file holding both names over the same bytes does.
TEST(TiedWeights, ANameAliasedInSafetensorsMetadataIsFound) {
  fs::path dir = make_tiny("llama");  // tie_word_embeddings: false, lm_head.weight stored
  const std::string bytes = read_file(dir / "model.safetensors");
  uint64_t header_size = 0;
  std::memcpy(&header_size, bytes.data(), 8);
  const json header = json::parse(bytes.substr(8, header_size));
  const std::string data = bytes.substr(8 + header_size);
  auto rewrite = [&](json h) {
    std::string text = h.dump();
    text.append((8 - text.size() % 8) % 8, ' ');
    write_file(dir / "model.safetensors", safetensors_bytes(text, data));
  };
  GenerateOptions options;
  options.max_new_tokens = 8;
  options.ignore_eos = true;
  json both = header;  // lm_head over the embedding's bytes: the reference
  both["lm_head.weight"]["data_offsets"] = header["model.embed_tokens.weight"]["data_offsets"];
  rewrite(both);
  const auto expected = generate_greedy(*Model::load(dir.string()), ids(6, 5), options).tokens;
  json aliased = header;
  aliased.erase("lm_head.weight");
  aliased["__metadata__"] = {{"format", "pt"}, {"lm_head.weight", "model.embed_tokens.weight"}};
  rewrite(aliased);
  EXPECT_EQ(generate_greedy(*Model::load(dir.string()), ids(6, 5), options).tokens, expected);
  aliased["__metadata__"] = {{"format", "pt"}};  // no alias: the missing tensor is named
  rewrite(aliased);
  EXPECT_NE(error_of([&] { Model::load(dir.string()); }).find("lm_head.weight"), std::string::npos);
}

TEST(Generate, StopsAtAnyEosIdFromGenerationConfig) {
  fs::path dir = make_tiny("qwen2");
  auto probe = Model::load(dir.string());
  GenerateOptions options;
  options.max_new_tokens = 10;
  options.ignore_eos = true;
  auto free_run = generate_greedy(*probe, ids(6, 9), options);
  ASSERT_GE(free_run.tokens.size(), 3u);
  const int third = free_run.tokens[2];
  // Stop only at the first occurrence of `third`.
  std::size_t expected = 0;
  while (free_run.tokens[expected] != third) ++expected;
  write_file(dir / "generation_config.json", json{{"eos_token_id", {9999, third}}}.dump());
  auto model = Model::load(dir.string());
  EXPECT_EQ(model->config().eos_token_ids, (std::vector<int>{9999, third}));
  options.ignore_eos = false;
  auto stopped = generate_greedy(*model, ids(6, 9), options);
  EXPECT_EQ(stopped.finish_reason, "stop");
  EXPECT_EQ(stopped.tokens.size(), expected + 1);
  EXPECT_EQ(stopped.tokens.back(), third);
  write_file(dir / "generation_config.json", json{{"eos_token_id", third}}.dump());  // int form
  EXPECT_EQ(Model::load(dir.string())->config().eos_token_ids, std::vector<int>{third});
}

TEST(Forward, RejectsUnreservedKvAndUnknownTokens) {
  auto model = Model::load(make_tiny("llama").string());
  KVCache cache(model->config(), 64, 16);
  SequenceKV s;
  std::vector<int32_t> tokens{1, 2, 3};
  BatchEntry e{tokens, &s, EntryOutput::last_logits};
  EXPECT_NE(error_of([&] { model->forward(std::span<const BatchEntry>(&e, 1), cache); }).find("reserve"), std::string::npos);
  ASSERT_TRUE(s.reserve(cache, 3));
  tokens[1] = 64;
  EXPECT_NE(error_of([&] { model->forward(std::span<const BatchEntry>(&e, 1), cache); }).find("token id 64"),
            std::string::npos);
  EXPECT_EQ(s.length, 0);  // a rejected batch changes nothing
}

TEST(Forward, DynamicRopeRefusesPositionsPastMaxPositionEmbeddings) {
  // transformers' dynamic NTK is the default RoPE up to max_position_embeddings and recomputes the
  // frequencies per forward past it: the engine runs the first part and refuses the second.
  json config = tiny_config("qwen2");
  config["max_position_embeddings"] = 16;
  config["rope_scaling"] = {{"rope_type", "dynamic"}, {"factor", 2.0}};
  const fs::path dir = temp_dir("qwen2_dynamic");
  write_random_model(config, dir, MakeModelOptions{});
  auto model = Model::load(dir.string());
  KVCache cache(model->config(), 64, 16);
  SequenceKV s;
  const std::vector<int32_t> tokens = ids(16, 3);
  ASSERT_TRUE(s.reserve(cache, 17));
  BatchEntry e{tokens, &s, EntryOutput::last_logits};
  model->forward(std::span<const BatchEntry>(&e, 1), cache);  // positions 0..15: runs
  const std::vector<int32_t> one{5};
  BatchEntry next{one, &s, EntryOutput::last_logits};
  EXPECT_NE(error_of([&] { model->forward(std::span<const BatchEntry>(&next, 1), cache); })
                .find("position 16 is past max_position_embeddings 16, where rope_scaling of type dynamic"),
            std::string::npos);
  EXPECT_EQ(s.length, 16);
}

TEST(MakeModel, SameSeedSameBytesOtherSeedOtherBytes) {
  auto a = read_file(make_tiny("gpt2", DType::F16, 1) / "model.safetensors");
  auto b = read_file(make_tiny("gpt2", DType::F16, 1) / "model.safetensors");
  auto c = read_file(make_tiny("gpt2", DType::F16, 2) / "model.safetensors");
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
}

TEST(Safetensors, HalfConversionsRoundTrip) {
  for (float v : {0.0f, 1.0f, -2.5f, 65504.0f, 1e-5f, 3.14159f}) {
    EXPECT_NEAR(f16_to_f32(f32_to_f16(v)), v, std::abs(v) * 1e-3 + 1e-7) << v;
    EXPECT_NEAR(bf16_to_f32(f32_to_bf16(v)), v, std::abs(v) * 8e-3) << v;
  }
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(f32_to_f16(1.0f), 0x3c00);
}

// ---- bad inputs: each gets an Error naming the problem ----

TEST(BadModels, MissingFolder) {
  auto msg = error_of([] { Model::load("/nonexistent/model/folder"); });
  EXPECT_NE(msg.find("/nonexistent/model/folder"), std::string::npos) << msg;
}

TEST(BadModels, FolderWithoutConfig) {
  fs::path dir = temp_dir("no_config");
  auto msg = error_of([&] { Model::load(dir.string()); });
  EXPECT_NE(msg.find("no config.json"), std::string::npos) << msg;
}

TEST(BadModels, ConfigMissingKey) {
  fs::path dir = make_tiny("qwen2");
  json c = read_json_file(dir / "config.json");
  c.erase("num_hidden_layers");
  write_file(dir / "config.json", c.dump());
  auto msg = error_of([&] { Model::load(dir.string()); });
  EXPECT_NE(msg.find("num_hidden_layers"), std::string::npos) << msg;
  EXPECT_NE(msg.find("config.json"), std::string::npos) << msg;
}

TEST(BadModels, ConfigNotJson) {
  fs::path dir = make_tiny("qwen2");
  write_file(dir / "config.json", "{\"model_type\": ");
  auto msg = error_of([&] { Model::load(dir.string()); });
  EXPECT_NE(msg.find("not valid JSON"), std::string::npos) << msg;
}

TEST(BadModels, UnknownModelType) {
  fs::path dir = make_tiny("llama");
  json c = read_json_file(dir / "config.json");
  c["model_type"] = "mamba";
  write_file(dir / "config.json", c.dump());
  auto msg = error_of([&] { Model::load(dir.string()); });
  EXPECT_NE(msg.find("unknown model_type 'mamba'"), std::string::npos) << msg;
}

TEST(BadModels, TruncatedSafetensors) {
  fs::path dir = make_tiny("llama");
  std::string bytes = read_file(dir / "model.safetensors");
  write_file(dir / "model.safetensors", bytes.substr(0, bytes.size() - 100));
  auto msg = error_of([&] { Model::load(dir.string()); });
  EXPECT_NE(msg.find("truncated"), std::string::npos) << msg;
  EXPECT_NE(msg.find("model.safetensors"), std::string::npos) << msg;
  write_file(dir / "model.safetensors", bytes.substr(0, 5));
  msg = error_of([&] { Model::load(dir.string()); });
  EXPECT_NE(msg.find("truncated"), std::string::npos) << msg;
}

TEST(BadModels, HeaderLengthBeyondFile) {
  fs::path dir = make_tiny("llama");
  std::string bytes = read_file(dir / "model.safetensors");
  bytes[6] = 0x7f;  // header length ~ 2^54
  write_file(dir / "model.safetensors", bytes);
  auto msg = error_of([&] { Model::load(dir.string()); });
  EXPECT_NE(msg.find("beyond the end of the file"), std::string::npos) << msg;
}

TEST(BadModels, TensorShapeMismatch) {
  fs::path dir = make_tiny("qwen2");
  json c = read_json_file(dir / "config.json");
  c["intermediate_size"] = 40;  // the weights were written for 48
  write_file(dir / "config.json", c.dump());
  auto msg = error_of([&] { Model::load(dir.string()); });
  EXPECT_NE(msg.find("mlp.gate_proj.weight"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[48, 32]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[40, 32]"), std::string::npos) << msg;
}

TEST(BadModels, UnsupportedDtypeAndMissingTensor) {
  fs::path dir = make_tiny("gpt2");
  write_file(dir / "model.safetensors",
             safetensors_bytes(R"({"transformer.wte.weight":{"dtype":"I8","shape":[4],"data_offsets":[0,4]}})", "abcd"));
  auto msg = error_of([&] { Model::load(dir.string()); });
  EXPECT_NE(msg.find("unsupported dtype I8"), std::string::npos) << msg;
  EXPECT_NE(msg.find("transformer.wte.weight"), std::string::npos) << msg;

  write_file(dir / "model.safetensors",
             safetensors_bytes(R"({"other":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", "abcd"));
  msg = error_of([&] { Model::load(dir.string()); });
  EXPECT_NE(msg.find("tensor 'wte.weight' not found"), std::string::npos) << msg;
}

TEST(BadModels, SizeDisagreesWithShape) {
  fs::path dir = temp_dir("bad_size");
  write_file(dir / "x.safetensors", safetensors_bytes(R"({"t":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", "12345678"));
  auto msg = error_of([&] { SafetensorsFile file(dir / "x.safetensors"); });
  EXPECT_NE(msg.find("needs 12"), std::string::npos) << msg;
}

TEST(BadModels, TruncatedLlama2c) {
  fs::path dir = temp_dir("llama2c");
  int32_t header[7] = {64, 172, 5, 8, 4, 512, 512};
  write_file(dir / "model.bin", std::string(reinterpret_cast<char*>(header), sizeof(header)) + std::string(1000, '\0'));
  auto msg = error_of([&] { read_llama2c_weights(dir / "model.bin"); });
  EXPECT_NE(msg.find("truncated"), std::string::npos) << msg;
  msg = error_of([&] { Model::load((dir / "model.bin").string()); });
  EXPECT_NE(msg.find("llama2.c"), std::string::npos) << msg;
}

TEST(Stories260K, LoadsAsLlamaAndGeneratesDeterministically) {
  const fs::path file = fs::path(INFERLAB_SHARED_DIR) / "data/stories260K/stories260K.bin";
  if (!fs::exists(file)) GTEST_SKIP() << file << " not found (shared data missing)";
  auto model = Model::load(file.string());
  EXPECT_EQ(model->config().architecture, "llama");
  EXPECT_EQ(model->config().vocab_size, 512);
  EXPECT_EQ(model->config().num_kv_heads, 4);
  GenerateOptions options;
  options.max_new_tokens = 40;
  std::vector<int32_t> bos{1};
  auto a = generate_greedy(*model, bos, options);
  auto b = generate_greedy(*model, bos, options);
  EXPECT_EQ(a.tokens, b.tokens);
  EXPECT_EQ(a.tokens.size(), 40u);
}

TEST(Argmax, FirstMaximumLikeTorch) {
  using inferlab::argmax;
  const std::vector<float> ties{1, 3, 2, 3, -1};
  EXPECT_EQ(argmax(ties), 1);
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> all_minus_inf(7, -inf);
  EXPECT_EQ(argmax(all_minus_inf), 0);
  std::vector<float> big(151936);
  for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<float>((i * 7919) % 1000) * 0.001f;
  big[150001] = 5.0f;
  big[151935] = 5.0f;
  EXPECT_EQ(argmax(big), 150001);
  std::vector<float> with_nan{0.5f, std::nanf(""), 2.0f, 1.0f};
  EXPECT_EQ(argmax(with_nan), static_cast<int32_t>(std::max_element(with_nan.begin(), with_nan.end()) - with_nan.begin()));
  std::vector<float> nan_first{std::nanf(""), 2.0f};
  EXPECT_EQ(argmax(nan_first), 0);
  EXPECT_THROW(argmax(std::vector<float>{}), inferlab::Error);
  // Every length around the 16 lanes, maxima in the lanes and in the tail, NaNs after the first.
  std::mt19937 rng(7);
  for (std::size_t n = 1; n < 70; ++n)
    for (int trial = 0; trial < 20; ++trial) {
      std::vector<float> row(n);
      for (float& v : row) v = static_cast<float>(rng() % 9);
      if (n > 1 && trial % 3 == 0) row[1 + rng() % (n - 1)] = std::nanf("");
      EXPECT_EQ(argmax(row), static_cast<int32_t>(std::max_element(row.begin(), row.end()) - row.begin())) << "n " << n;
    }
}
