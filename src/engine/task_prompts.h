// Static task prompts (rtp-llm's MultiTaskPrompt): system prompts named by a task_id, computed at
// start-up and pinned, then prepended to any request that names the task.
#pragma once

#include <string>
#include <vector>

namespace reprise {

struct TaskPromptSpec {
  std::string task_id;  // numbers in the JSON become their decimal text
  std::string prompt;
};

// Parses `[{"task_id": 1, "prompt": "..."}, ...]`. Throws Error naming the entry for text that is
// not JSON, a missing or mistyped field, a duplicate task_id or an empty prompt.
std::vector<TaskPromptSpec> ParseTaskPrompts(const std::string& json_text);

}  // namespace reprise
