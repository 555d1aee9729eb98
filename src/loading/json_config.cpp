#include "inferlab/loading/json_config.h"

#include <fstream>
#include <nlohmann/json.hpp>

#include "inferlab/util/error.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace inferlab {

json read_json_file(const fs::path& file) {
  std::ifstream in(file);
  if (!in) fail("cannot read {}: {}", file.string(), fs::exists(file) ? "permission denied" : "no such file");
  try {
    return json::parse(in);
  } catch (const json::exception& e) {
    fail("{} is not valid JSON: {}", file.string(), e.what());
  }
}

int config_int(const json& config, const std::string& key, const std::string& where) {
  if (!config.contains(key) || config[key].is_null()) fail("{}: missing key \"{}\"", where, key);
  const auto& v = config[key];
  if (!v.is_number_integer()) fail("{}: key \"{}\" must be an integer, got {}", where, key, v.dump());
  const auto n = v.get<int64_t>();
  if (n <= 0 || n > (1 << 30)) fail("{}: key \"{}\" = {} is out of range", where, key, n);
  return static_cast<int>(n);
}

int config_int_or(const json& config, const std::string& key, int fallback, const std::string& where) {
  if (!config.contains(key) || config[key].is_null()) return fallback;
  return config_int(config, key, where);
}

double config_double_or(const json& config, const std::string& key, double fallback, const std::string& where) {
  if (!config.contains(key) || config[key].is_null()) return fallback;
  if (!config[key].is_number()) fail("{}: key \"{}\" must be a number, got {}", where, key, config[key].dump());
  return config[key].get<double>();
}

bool config_bool_or(const json& config, const std::string& key, bool fallback, const std::string& where) {
  if (!config.contains(key) || config[key].is_null()) return fallback;
  if (!config[key].is_boolean()) fail("{}: key \"{}\" must be true or false, got {}", where, key, config[key].dump());
  return config[key].get<bool>();
}

std::vector<int> token_id_list(const json& value, const std::string& key, const std::string& where) {
  std::vector<int> ids;
  if (value.is_null()) return ids;
  if (value.is_number_integer()) return {value.get<int>()};
  if (value.is_array()) {
    for (const auto& v : value) {
      if (!v.is_number_integer()) fail("{}: \"{}\" must be an int or a list of ints, got {}", where, key, value.dump());
      ids.push_back(v.get<int>());
    }
    return ids;
  }
  fail("{}: \"{}\" must be an int or a list of ints, got {}", where, key, value.dump());
}

}  // namespace inferlab
