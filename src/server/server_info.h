// GET /server_info (SGLang's route; llama.cpp's /props answers a different set): the options the
// server runs with — every `inferlab serve` flag with the value in force, under its flag's name —
// and what loading resolved from them (context length, KV capacity), so that a benchmark's record
// says what it measured (`bench serve`/`bench capacity` store it in their environment). The API
// key is never reported, only whether one is required.
#pragma once
#include <string>

#include "inferlab/server/server.h"
#include "server/api_error.h"
#include "server/openai_request.h"

namespace inferlab::api {

json server_info(const ServerOptions& options, int bound_port, const std::string& model_name,
                 const std::string& model_path, const ModelContext& context);

}  // namespace inferlab::api
