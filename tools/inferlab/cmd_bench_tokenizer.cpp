// `inferlab bench tokenizer MODEL [--corpus FILE]`: encode throughput (MB/s) of our tokenizer and,
// on the same documents, of the Node reference (@huggingface/tokenizers).
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <thread>

#include "command.h"
#include "inferlab/util/error.h"
#include "inferlab/util/model_path.h"
#include "inferlab/tokenizer/tokenizer.h"

namespace {

namespace fs = std::filesystem;

// A deterministic mixed corpus (English, Chinese, code, numbers, emoji, whitespace) of ~`bytes`.
std::string synthetic_corpus(std::size_t bytes) {
  static const char* english[] = {"the", "model", "inference", "latency", "token", "throughput", "attention", "cache",
                                  "language", "measure", "batch", "request", "server", "decode", "prefill", "GPU",
                                  "memory", "bandwidth", "we", "can", "see", "that", "it's", "don't", "This", "Hello"};
  static const char* chinese[] = {"大模型", "推理", "延迟", "吞吐量", "注意力", "缓存", "解码", "预填充", "请求", "服务器",
                                  "显存", "带宽", "我们", "可以", "看到", "，", "。", "？", "的", "是"};
  static const char* code[] = {"def", "return", "for i in range(n):", "x = torch.randn(2, 3)", "if (a < b) {", "}",
                               "print(f\"{x:.3f}\")", "import numpy as np", "    ", "\t", "//", "#", "==", "->"};
  static const char* other[] = {"12345", "3.14159", "2024-06-01", "😀", "🚀", "👍🏽", "https://example.com/a?b=1",
                                "Ünïcödé", "Привет", "こんにちは", "  ", "\r\n"};
  std::mt19937 rng(1234);
  std::string out;
  while (out.size() < bytes) {
    int kind = rng() % 10;
    int words = 5 + rng() % 30;
    for (int w = 0; w < words; ++w) {
      switch (kind) {
        case 0: case 1: case 2: case 3: out += english[rng() % std::size(english)]; out += ' '; break;
        case 4: case 5: case 6: out += chinese[rng() % std::size(chinese)]; break;
        case 7: case 8: out += code[rng() % std::size(code)]; out += ' '; break;
        default: out += other[rng() % std::size(other)]; out += ' ';
      }
      if (rng() % 17 == 0) out += std::to_string(rng() % 100000);
    }
    out += '\n';
  }
  return out;
}

std::vector<std::string_view> split_documents(const std::string& corpus) {
  std::vector<std::string_view> docs;
  std::size_t start = 0;
  while (start < corpus.size()) {
    std::size_t nl = corpus.find('\n', start);
    std::size_t end = nl == std::string::npos ? corpus.size() : nl + 1;
    docs.emplace_back(corpus.data() + start, end - start);
    start = end;
  }
  return docs;
}

fs::path find_node_script() {
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  std::vector<fs::path> candidates = {fs::current_path() / "bench/tokenizer_node.mjs"};
  if (!ec) candidates.push_back(exe.parent_path().parent_path().parent_path() / "bench/tokenizer_node.mjs");
  for (auto& c : candidates)
    if (fs::exists(c)) return c;
  return {};
}

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

}  // namespace

static inferlab::cli::Registrar reg([](CLI::App& app) {
  struct Options {
    std::string model, corpus;
    double seconds = 3;
    int threads = 1;
    bool no_node = false;
  };
  auto options = std::make_shared<Options>();
  CLI::App& bench = inferlab::cli::command_group(app, "bench", "Benchmarks");
  CLI::App* cmd = bench.add_subcommand("tokenizer", "Encode throughput (MB/s): ours beside the Node reference (@huggingface/tokenizers)");
  cmd->add_option("model", options->model, "Model folder, tokenizer.json, .gguf or HF repo id")->required();
  cmd->add_option("--corpus", options->corpus, "UTF-8 text file, encoded line by line (default: a 4 MB synthetic mix)");
  cmd->add_option("--seconds", options->seconds, "Minimum measuring time per side")->check(CLI::PositiveNumber);
  cmd->add_option("--threads", options->threads, "Encode from this many threads at once (ours only)")->check(CLI::Range(1, 256));
  cmd->add_flag("--no-node", options->no_node, "Skip the Node reference");
  cmd->callback([options] {
    auto tokenizer = inferlab::Tokenizer::load(options->model);
    std::string corpus;
    fs::path corpus_file;
    if (!options->corpus.empty()) {
      std::ifstream in(options->corpus, std::ios::binary);
      if (!in) inferlab::fail("cannot open corpus {}", options->corpus);
      std::ostringstream s;
      s << in.rdbuf();
      corpus = s.str();
      corpus_file = options->corpus;
    } else {
      corpus = synthetic_corpus(4 << 20);
      corpus_file = fs::temp_directory_path() / fmt::format("inferlab_tokenizer_corpus_{}.txt", ::getpid());
      std::ofstream(corpus_file, std::ios::binary) << corpus;
    }
    if (corpus.empty()) inferlab::fail("corpus {} is empty", corpus_file.string());
    auto docs = split_documents(corpus);
    std::printf("corpus: %s, %.2f MB, %zu lines\n", options->corpus.empty() ? "synthetic mix" : options->corpus.c_str(),
                corpus.size() / 1e6, docs.size());

    // Ours: whole passes over the corpus until the time is up; the first pass warms the word cache
    // exactly as the Node side's warm-up does.
    for (std::size_t i = 0; i < std::min<std::size_t>(200, docs.size()); ++i) tokenizer->encode(docs[i]);
    std::size_t tokens = 0, rounds = 0;
    auto start = std::chrono::steady_clock::now();
    double elapsed = 0;
    do {
      std::vector<std::thread> workers;
      std::vector<std::size_t> counts(options->threads, 0);
      for (int t = 0; t < options->threads; ++t)
        workers.emplace_back([&, t] {
          for (auto doc : docs) counts[t] += tokenizer->encode(doc).size();
        });
      for (auto& w : workers) w.join();
      tokens = counts[0];
      ++rounds;
      elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    } while (elapsed < options->seconds);
    double ours = corpus.size() * static_cast<double>(rounds) * options->threads / 1e6 / elapsed;
    std::printf("inferlab (C++, %d thread%s):               %8.2f MB/s  (%zu tokens per pass)\n", options->threads,
                options->threads == 1 ? "" : "s", ours, tokens);

    if (!options->no_node) {
      fs::path script = find_node_script();
      fs::path json = fs::path(options->model).extension() == ".json" ? fs::path(options->model) : fs::path();
      if (json.empty()) {
        fs::path folder = fs::is_directory(options->model) ? fs::path(options->model) : fs::path();
        if (folder.empty() && fs::path(options->model).extension() != ".gguf") folder = inferlab::resolve_model_path(options->model);
        if (!folder.empty() && fs::exists(folder / "tokenizer.json")) json = folder / "tokenizer.json";
      }
      if (script.empty()) {
        std::printf("node reference: skipped (bench/tokenizer_node.mjs not found; run from the repository root)\n");
      } else if (json.empty()) {
        std::printf("node reference: skipped (needs a tokenizer.json; %s has none)\n", options->model.c_str());
      } else {
        std::string command = fmt::format("node {} {} {} {}", shell_quote(script.string()), shell_quote(json.string()),
                                          shell_quote(corpus_file.string()), options->seconds);
        FILE* pipe = popen(command.c_str(), "r");
        std::string output;
        char buffer[4096];
        while (pipe && std::fgets(buffer, sizeof buffer, pipe)) output += buffer;
        int status = pipe ? pclose(pipe) : -1;
        try {
          if (status != 0) throw std::runtime_error("exit status " + std::to_string(status));
          auto result = nlohmann::json::parse(output);
          double node = result["mb_per_s"].get<double>();
          std::printf("@huggingface/tokenizers (Node %s):   %8.2f MB/s  (%d tokens per pass%s)\n", "1 thread", node,
                      result["tokens"].get<int>(), result["tokens"].get<std::size_t>() == tokens ? ", same ids count" : ", DIFFERENT count");
          std::printf("ratio: %.2fx\n", ours / node);
        } catch (const std::exception& e) {
          std::printf("node reference: failed (%s) %s\n", e.what(), output.c_str());
        }
      }
    }
    if (options->corpus.empty()) fs::remove(corpus_file);
  });
});
