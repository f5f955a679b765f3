// A Jinja template as Hugging Face renders chat templates (jinja2's sandboxed environment with
// trim_blocks and lstrip_blocks, loop controls, raise_exception, strftime_now, HF's tojson).
//
//   jinja::Template tpl = jinja::Template::Parse(text);            // throws jinja::Error
//   std::string out = tpl.Render(jinja::Value::FromJson(context)); // throws jinja::Error
//
// Undefined variables behave as jinja2's default Undefined: they print as "", are false and
// empty, and raise when an attribute, item or operation on them is needed.
#pragma once

#include <cstdint>
#include <ctime>
#include <memory>
#include <string>
#include <string_view>

#include "jinja/ast.h"
#include "jinja/value.h"

namespace reprise::jinja {

// Bounds that keep a hostile template from exhausting memory, stack or time.
struct RenderLimits {
  size_t max_output_bytes = size_t{16} << 20;  // also bounds every string built on the way
  int max_call_depth = 64;                     // nested macro calls
  uint64_t max_iterations = 1'000'000;         // loop iterations in one render
  // Work in one render: loop iterations plus the bytes and items that operators, filters and
  // methods walk or copy (bounds the time of quadratic templates).
  uint64_t max_work = 200'000'000;
};

class Template {
 public:
  static Template Parse(std::string_view source);

  // `context` is a dict of the template's variables (messages, bos_token, ...). Built-in
  // globals (namespace, range, raise_exception, strftime_now) are there unless it overrides them.
  std::string Render(const Value& context, const RenderLimits& limits = {}) const;

 private:
  explicit Template(std::shared_ptr<const Body> body) : body_(std::move(body)) {}
  std::shared_ptr<const Body> body_;
};

// strftime_now(format) for a fixed time (as the tests pin the date); the built-in one uses the
// current local time.
Value StrftimeNowFunction(std::time_t now);

}  // namespace reprise::jinja
