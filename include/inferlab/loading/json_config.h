// JSON files of a model folder (config.json, generation_config.json, tokenizer_config.json):
// reading them, and typed keys with errors that name the key and the file.
#pragma once
#include <filesystem>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

namespace inferlab {

// Parses a JSON file; Error names the file on a missing file or bad JSON.
nlohmann::json read_json_file(const std::filesystem::path& file);

// config.json keys with errors that name the key and the file.
int config_int(const nlohmann::json& config, const std::string& key, const std::string& where);
int config_int_or(const nlohmann::json& config, const std::string& key, int fallback, const std::string& where);
double config_double_or(const nlohmann::json& config, const std::string& key, double fallback, const std::string& where);
bool config_bool_or(const nlohmann::json& config, const std::string& key, bool fallback, const std::string& where);
// An eos/bos field: int or list of ints (null: empty).
std::vector<int> token_id_list(const nlohmann::json& value, const std::string& key, const std::string& where);

}  // namespace inferlab
