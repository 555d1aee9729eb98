// `inferlab pull REPO_ID`: a model repository into the Hugging Face cache (huggingface-cli download).
#include <cstdio>

#include "command.h"
#include "inferlab/hub/pull.h"

namespace inferlab::cli {
namespace {

struct PullArgs {
  PullOptions options;
  std::string source = "huggingface";
};

Registrar reg([](CLI::App& app) {
  auto args = std::make_shared<PullArgs>();
  CLI::App* cmd = app.add_subcommand(
      "pull", "Download a model repository into the Hugging Face cache (HF_HUB_CACHE / HF_HOME / ~/.cache/huggingface/hub), "
              "resumable; serve, generate and bench engine then find it by its repo id");
  cmd->add_option("repo_id", args->options.repo_id, "Repository id, e.g. Qwen/Qwen2.5-0.5B-Instruct")->required();
  cmd->add_option("--revision", args->options.revision, "Branch, tag or commit (default: main; ModelScope: master)");
  cmd->add_option("--include", args->options.include,
                  "Only the repo files matching these globs (fnmatch, as huggingface_hub's allow_patterns: '*.json' "
                  "'*.safetensors'; a trailing / means the folder); default: every file")
      ->expected(1, -1);
  cmd->add_option("--source", args->source, "Where from: huggingface (HF_ENDPOINT, default https://huggingface.co) or "
                                            "modelscope (MODELSCOPE_ENDPOINT, default https://www.modelscope.cn)")
      ->capture_default_str()->check(CLI::IsMember({"huggingface", "modelscope"}));
  cmd->add_option("--token", args->options.token,
                  "Access token for gated or private repos (default: HF_TOKEN or the saved login; ModelScope: "
                  "MODELSCOPE_API_TOKEN; prefer the variable: arguments are visible to other users)");
  cmd->add_option("--parallel", args->options.parallel_files, "Files transferred at once")
      ->capture_default_str()->check(CLI::Range(1, 64));
  cmd->add_flag("--offline", args->options.offline, "Forbid network access (as HF_HUB_OFFLINE=1): the pull then fails");
  cmd->callback([args] {
    args->options.source = args->source == "modelscope" ? HubSource::modelscope : HubSource::huggingface;
    PullResult result = pull(args->options);
    std::fprintf(stderr, "%s: %zu file%s downloaded (%.1f MB), %zu already cached\n", args->options.repo_id.c_str(),
                 result.downloaded, result.downloaded == 1 ? "" : "s", static_cast<double>(result.bytes) / 1e6,
                 result.files - result.downloaded);
    std::printf("%s\n", result.snapshot.string().c_str());  // stdout: the folder, for scripts
  });
});

}  // namespace
}  // namespace inferlab::cli
