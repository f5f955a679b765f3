#include "engine/task_prompts.h"

#include <nlohmann/json.hpp>
#include <set>

#include "core/error.h"

namespace reprise {

std::vector<TaskPromptSpec> ParseTaskPrompts(const std::string& json_text) {
  nlohmann::json document;
  try {
    document = nlohmann::json::parse(json_text);
  } catch (const nlohmann::json::parse_error& error) {
    throw Error(fmt::format("task prompts are not valid JSON: {}", error.what()));
  }
  if (!document.is_array()) {
    throw Error("task prompts must be a JSON list of {\"task_id\": ..., \"prompt\": ...}");
  }
  std::vector<TaskPromptSpec> specs;
  std::set<std::string> seen;
  for (size_t i = 0; i < document.size(); ++i) {
    const auto& entry = document[i];
    if (!entry.is_object()) throw Error(fmt::format("task prompt entry {} is not an object", i));
    TaskPromptSpec spec;
    auto task_id = entry.find("task_id");
    if (task_id == entry.end()) {
      throw Error(fmt::format("task prompt entry {} has no \"task_id\"", i));
    }
    if (task_id->is_string()) {
      spec.task_id = task_id->get<std::string>();
    } else if (task_id->is_number_integer()) {
      spec.task_id = std::to_string(task_id->get<int64_t>());
    } else {
      throw Error(
          fmt::format("task prompt entry {}: \"task_id\" must be a string or an integer", i));
    }
    if (spec.task_id.empty())
      throw Error(fmt::format("task prompt entry {} has an empty task_id", i));
    auto prompt = entry.find("prompt");
    if (prompt == entry.end() || !prompt->is_string()) {
      throw Error(fmt::format("task prompt entry {} (task_id {}) has no string \"prompt\"", i,
                              spec.task_id));
    }
    spec.prompt = prompt->get<std::string>();
    if (spec.prompt.empty()) {
      throw Error(
          fmt::format("task prompt entry {} (task_id {}) has an empty prompt", i, spec.task_id));
    }
    if (!seen.insert(spec.task_id).second) {
      throw Error(fmt::format("task prompt entry {}: duplicate task_id {}", i, spec.task_id));
    }
    specs.push_back(std::move(spec));
  }
  return specs;
}

}  // namespace reprise
