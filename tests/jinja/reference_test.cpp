// Every fixture chat template (../shared/fixtures/templates/*.jinja and the tokenizer.chat_template
// of each fixture GGUF) and each built-in one rendered over a set of conversations must give, byte
// for byte, what python3-jinja2 renders as Hugging Face does (render_reference.py, run at test
// time), and must raise where Python raises.
#include <gtest/gtest.h>

#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "gguf/gguf_file.h"
#include "jinja/template.h"
#include "jinja_test_support.h"
#include "test_support.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace reprise::testing {
namespace {

using nlohmann::json;

struct TemplateSource {
  std::string name;
  std::string text;
  std::string bos;
  std::string eos;
};

std::vector<TemplateSource> FixtureTemplates() {
  std::vector<TemplateSource> sources;
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(Fixture("templates"))) {
    if (entry.path().extension() == ".jinja") files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  for (const auto& path : files) {
    std::ifstream file(path, std::ios::binary);
    std::stringstream text;
    text << file.rdbuf();
    sources.push_back({path.filename().string(), text.str(), "<s>", "</s>"});
  }
  for (std::string_view name : {"chatml", "llama2", "llama3", "mistral"}) {
    sources.push_back(
        {"built-in " + std::string(name), std::string(*BuiltinChatTemplate(name)), "<s>", "</s>"});
  }
  std::vector<std::filesystem::path> ggufs;
  for (const char* folder : {"vocab", "models"}) {
    for (const auto& entry : std::filesystem::directory_iterator(Fixture(folder))) {
      if (entry.path().extension() == ".gguf") ggufs.push_back(entry.path());
    }
  }
  std::sort(ggufs.begin(), ggufs.end());
  for (const auto& path : ggufs) {
    const gguf::GgufFile file = gguf::GgufFile::Open(path.string());
    std::string text = file.GetString("tokenizer.chat_template", "");
    if (text.empty()) continue;
    Tokenizer tokenizer = Tokenizer::FromGguf(file);
    auto token_text = [&](int32_t id) { return id >= 0 ? tokenizer.vocab().token(id).text : ""; };
    sources.push_back({path.filename().string(), text, token_text(tokenizer.bos_id()),
                       token_text(tokenizer.eos_id())});
  }
  return sources;
}

// Conversations: with and without a system message, several turns, tools, odd characters, and
// role orders that some templates refuse.
json Conversations() {
  json tools = json::parse(R"([{"type": "function", "function": {"name": "get_weather",
      "description": "Current weather in a city", "parameters": {"type": "object",
      "properties": {"city": {"type": "string", "description": "The city's name"},
      "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
      "required": ["city"]}}}])");
  json tool_turns = json::parse(R"([
      {"role": "user", "content": "What is the weather in Paris?"},
      {"role": "assistant", "content": "", "tool_calls": [{"id": "call_1", "type": "function",
       "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
      {"role": "tool", "name": "get_weather", "tool_call_id": "call_1",
       "content": "{\"temperature\": 21.5, \"unit\": \"celsius\"}"},
      {"role": "user", "content": "Thanks!"}])");
  return json::array({
      {{"messages", {{{"role", "user"}, {"content", "Hello, who are you?"}}}}},
      {{"messages",
        {{{"role", "system"}, {"content", "You are a helpful assistant."}},
         {{"role", "user"}, {"content", "What is 2+2?"}}}}},
      {{"messages",
        {{{"role", "system"}, {"content", "Answer briefly."}},
         {{"role", "user"}, {"content", "Name a colour."}},
         {{"role", "assistant"}, {"content", "Blue."}},
         {{"role", "user"}, {"content", "Another one?"}}}}},
      {{"messages",
        {{{"role", "user"}, {"content", "  Hi there  "}},
         {{"role", "assistant"}, {"content", "Hello! How can I help?\n"}},
         {{"role", "user"}, {"content", "Tell me a joke."}},
         {{"role", "assistant"}, {"content", "Why did the chicken cross the road?"}}}}},
      {{"messages",
        {{{"role", "user"},
          {"content",
           "Quotes ' and \" and \\ and\ttabs\nnew lines, "
           "unicode: h\u00e9llo \u2014 \u4f60\u597d \U0001F600 {{ not jinja }}"}}}}},
      {{"messages",
        {{{"role", "user"}, {"content", "first"}}, {{"role", "user"}, {"content", "second"}}}}},
      {{"messages",
        {{{"role", "assistant"}, {"content", "I speak first."}},
         {{"role", "user"}, {"content", "Fine."}}}}},
      {{"messages", tool_turns}, {"tools", tools}},
      {{"messages", {{{"role", "system"}, {"content", "Use tools when needed."}}, tool_turns[0]}},
       {"tools", tools}},
  });
}

TEST(JinjaReferenceTest, FixtureTemplatesRenderAsPythonJinja2) {
  REPRISE_REQUIRE_FIXTURES();
  const std::string python = PythonWithJinja2();
  if (python.empty())
    GTEST_SKIP() << "no python3 that can import jinja2 (apt-get install python3-jinja2)";

  const std::time_t now = FixedDate();

  std::vector<TemplateSource> sources = FixtureTemplates();
  ASSERT_GE(sources.size(), 17u);
  json cases = json::array();
  std::vector<std::string> labels;
  for (const TemplateSource& source : sources) {
    int index = 0;
    for (json conversation : Conversations()) {
      for (bool generation_prompt : {true, false}) {
        conversation["bos_token"] = source.bos;
        conversation["eos_token"] = source.eos;
        conversation["add_generation_prompt"] = generation_prompt;
        cases.push_back({{"template", source.text}, {"context", conversation}});
        labels.push_back(fmt::format("{} / conversation {} / generation prompt {}", source.name,
                                     index, generation_prompt));
      }
      ++index;
    }
  }
  json expected = RunReference(python, {{"now", "2024-07-26T10:30:00"}, {"cases", cases}});
  ASSERT_EQ(expected.size(), cases.size());

  size_t compared = 0;
  size_t raised = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(labels[i]);
    jinja::Value context = jinja::Value::FromJson(cases[i]["context"]);
    context.mutable_object().Set("strftime_now", jinja::StrftimeNowFunction(now));
    std::string actual;
    std::string error;
    try {
      actual = jinja::Template::Parse(cases[i]["template"].get<std::string>()).Render(context);
    } catch (const jinja::Error& e) {
      error = e.what();
    }
    if (expected[i]["ok"].get<bool>()) {
      EXPECT_EQ(error, "");
      EXPECT_EQ(actual, expected[i]["text"].get<std::string>());
    } else {
      EXPECT_NE(error, "") << "python3-jinja2 raised " << expected[i]["error"]
                           << " but we rendered:\n"
                           << actual;
      ++raised;
    }
    ++compared;
  }
  std::printf(
      "compared %zu (template, conversation) pairs with python3-jinja2 over %zu templates "
      "(%zu raise in both)\n",
      compared, sources.size(), raised);
}

}  // namespace
}  // namespace reprise::testing
