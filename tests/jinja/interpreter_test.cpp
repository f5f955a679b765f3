// The interpreter on its own: small templates for each feature (whitespace control, loops,
// scoping, filters, tests, operators, Python methods), each checked against python3-jinja2 when
// it is there and against the value written here always; errors with their position; limits
// that stop hostile templates.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "jinja/template.h"
#include "jinja_test_support.h"

namespace reprise::testing {
namespace {

using nlohmann::json;

struct Snippet {
  const char* source;
  json context;
  const char* expected;
};

const json kMessages = json::parse(R"([{"role": "system", "content": " Be brief. "},
  {"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}])");

const std::vector<Snippet>& Snippets() {
  static const std::vector<Snippet> snippets = {
      // Whitespace control: trim_blocks, lstrip_blocks, '-' and '+' markers, comments.
      {"a\n  {% if true %}\n  b\n  {% endif %}\nc", {}, "a\n  b\nc"},
      {"a  {%- if true -%}  b  {%- endif -%}  c", {}, "abc"},
      {"a\n  {%+ if true %}b{% endif %}", {}, "a\n  b"},
      {"x {# note #}\ny\n  {# own line #}\nz", {}, "x y\nz"},
      {"{{ 'a' }}\n{{- 'b' }} {{- 'c' -}} \n d", {}, "abcd"},
      {"line\n", {}, "line"},
      {"{% raw %}{{ not evaluated }}{% endraw %}", {}, "{{ not evaluated }}"},
      // Loops: loop variables, else, filtering if, unpacking, break/continue, scoping.
      {"{% for m in messages %}{{ loop.index }}/{{ loop.length }}:{{ m.role }}"
       "{{ ',' if not loop.last }}{% endfor %}",
       {{"messages", kMessages}},
       "1/3:system,2/3:user,3/3:assistant"},
      {"{% for m in messages if m.role != 'system' %}{{ loop.index0 }}{{ loop.first }}"
       "{{ loop.revindex }}{% endfor %}",
       {{"messages", kMessages}},
       "0True21False1"},
      {"{% for x in [] %}no{% else %}empty{% endfor %}", {}, "empty"},
      {"{% for k, v in {'a': 1, 'b': 2}.items() %}{{ k }}={{ v }};{% endfor %}", {}, "a=1;b=2;"},
      {"{% for i in range(10) %}{% if i == 2 %}{% continue %}{% endif %}{% if i > 3 %}{% break %}"
       "{% endif %}{{ i }}{% endfor %}",
       {},
       "013"},
      {"{% set x = 1 %}{% for i in [1] %}{% set x = 2 %}{% endfor %}{{ x }}", {}, "1"},
      {"{% set ns = namespace(x=1) %}{% for i in [1, 2] %}{% set ns.x = ns.x + i %}{% endfor %}"
       "{{ ns.x }}",
       {},
       "4"},
      {"{% for x in 'ab' %}{{ loop.previtem is defined }}{{ loop.cycle('-', '+') }}{{ x }}"
       "{% endfor %}",
       {},
       "False-aTrue+b"},
      // Set blocks, macros, filter blocks.
      {"{% set s %} x {{ 1 + 1 }} {% endset %}[{{ s }}]", {}, "[ x 2 ]"},
      {"{% macro tag(name, v='?') %}<{{ name }}={{ v }}>{% endmacro %}{{ tag('a') }}"
       "{{ tag('b', v=2) }}",
       {},
       "<a=?><b=2>"},
      {"{% filter upper %}shout {{ 'this' }}{% endfilter %}", {}, "SHOUT THIS"},
      // Operators and literals.
      {"{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 2 ** 10 }} {{ 1 + 2 * 3 "
       "}}",
       {},
       "3 -4 1 2 3.5 1024 7"},
      {"{{ 'a' ~ 1 ~ none }} {{ 'ab' * 2 }} {{ [1] + [2] }} {{ 1 == 1.0 }} {{ 'b' > 'a' }}",
       {},
       "a1None abab [1, 2] True True"},
      {"{{ 'x' if false }}|{{ 'y' if false else 'z' }}|{{ none or 'w' }}|{{ 0 and 1 }}",
       {},
       "|z|w|0"},
      {"{{ 'ell' in 'hello' }} {{ 2 not in [1, 3] }} {{ 'k' in {'k': 1} }}", {}, "True True True"},
      {"{{ 0.1 + 0.2 }} {{ 1e20 }} {{ 1.5e-7 }} {{ 3.0 }} {{ -0.0 }}",
       {},
       "0.30000000000000004 1e+20 1.5e-07 3.0 -0.0"},
      {"{{ [1, 'a', none, true, {'k': [2.5]}] }} {{ \"it's\" }}",
       {},
       "[1, 'a', None, True, {'k': [2.5]}] it's"},
      // Slicing and indexing.
      {"{{ 'hello'[::-1] }} {{ [1, 2, 3][1:] }} {{ 'hello'[-2:] }} {{ [1, 2, 3, 4][::2] }}",
       {},
       "olleh [2, 3] lo [1, 3]"},
      {"{{ messages[0]['content'] }}|{{ messages[-1].role }}|{{ messages[5] is defined }}",
       {{"messages", kMessages}},
       " Be brief. |assistant|False"},
      // Filters.
      {"{{ messages[0].content | trim }}|{{ '  x  ' | trim }}|{{ 'xxhixx' | trim('x') }}",
       {{"messages", kMessages}},
       "Be brief.|x|hi"},
      {"{{ messages | length }} {{ 'abc' | upper }} {{ 'ABC' | lower }} {{ 'hello world' | title }}"
       " {{ 'hELLO' | capitalize }}",
       {{"messages", kMessages}},
       "3 ABC abc Hello World Hello"},
      {"{{ messages | map(attribute='role') | join(', ') }}",
       {{"messages", kMessages}},
       "system, user, assistant"},
      {"{{ messages | selectattr('role', 'equalto', 'user') | list | length }}"
       "{{ messages | rejectattr('role', 'in', ['user', 'system']) | map(attribute='content') | "
       "first }}",
       {{"messages", kMessages}},
       "1Hello"},
      {"{{ [3, 1, 2] | sort | list }} {{ ['b', 'A', 'a'] | unique | list }} {{ [1, 2] | last }}"
       " {{ [1, 2, 3] | sum }} {{ [-1.5] | first | abs }}",
       {},
       "[1, 2, 3] ['b', 'A'] 2 6 1.5"},
      {"{{ undefined_thing | default('d') }} {{ '' | default('e', true) }} {{ '42' | int + 1 }}"
       " {{ 'x' | int }} {{ '2.5' | float }} {{ 2.567 | round(2) }} {{ 3 | string + 'x' }}",
       {},
       "d e 43 0 2.5 2.57 3x"},
      {"{{ 2.9 | int }} {{ -2.9 | int }} {{ 'nan' | int }} {{ ' -7.8 ' | int }} {{ 'nan' | int(5) "
       "}}",
       {},
       "2 -2 0 -7 5"},
      {"{{ {'b': 1, 'a': [1, 2.0, 'é\"']} | tojson }}\n{{ {'a': {'b': []}} | tojson(indent=2) }}",
       {},
       "{\"b\": 1, \"a\": [1, 2.0, \"é\\\"\"]}\n{\n  \"a\": {\n    \"b\": []\n  }\n}"},
      {"{{ 'a\nb\n\nc' | indent(2) }}|{{ 'a\nb' | indent(4, first=true) }}",
       {},
       "a\n  b\n\n  c|    a\n    b"},
      {"{{ 'a-b-c' | replace('-', '+') }} {{ 'aaa' | replace('a', 'b', 2) }} {% for k, v in {'x': "
       "1} | items %}{{ k }}{{ v }}{% endfor %}",
       {},
       "a+b+c bba x1"},
      {"{{ 'x' | safe + '<y>' }} {{ 'x' ~ '<y>' | safe }}", {}, "x&lt;y&gt; x<y>"},
      // Tests.
      {"{{ x is defined }}{{ x is undefined }}{{ none is none }}{{ 1 is number }}{{ 'a' is string "
       "}}"
       "{{ {} is mapping }}{{ [] is iterable }}{{ 3 is odd }}{{ 4 is divisibleby 2 }}"
       "{{ true is boolean }}{{ 1 is integer }}{{ 1.0 is float }}{{ 'a' is equalto 'a' }}",
       {},
       "FalseTrueTrueTrueTrueTrueTrueTrueTrueTrueTrueTrueTrue"},
      // Python methods.
      {"{{ ' a b '.strip() }}|{{ 'a,b,,c'.split(',') }}|{{ ' a  b '.split() }}|{{ "
       "'xay'.lstrip('x') }}"
       "|{{ 'hello'.startswith('he') }}|{{ 'hello'.endswith(('x', 'lo')) }}|{{ 'a b'.title() }}"
       "|{{ 'abc'.replace('b', 'B') }}|{{ 'AbC'.lower() }}{{ 'AbC'.upper() }}",
       {},
       "a b|['a', 'b', '', 'c']|['a', 'b']|ay|True|True|A B|aBc|abcABC"},
      {"{{ d.get('a') }} {{ d.get('z') }} {{ d.get('z', 0) }} {{ d.keys() | list }} {{ d.values() "
       "| list }}",
       {{"d", {{"a", 1}}}},
       "1 None 0 ['a'] [1]"},
      // Undefined values print as nothing and are false.
      {"[{{ nothing }}]{% if nothing %}yes{% endif %}{% for x in nothing %}x{% endfor %}",
       {},
       "[]"},
      // Unicode: len, slicing and iteration go by characters.
      {"{{ 'héllo😀' | length }} {{ 'héllo😀'[1] }} {{ 'héllo😀'[::-1] }}", {}, "6 é 😀olléh"},
      // Tuples print as Python prints them and are never equal to lists; items() gives pairs.
      {"{{ (1, 'a') }} {{ (1,) }} {{ () }} {{ [(1, 2)] }} {{ (1, 2) == [1, 2] }} {{ (1, 2) == (1, "
       "2) }} {% set t = 1, 2 %}{{ t }} {{ d.items() | list }} {{ d | items | list }} {{ (1, 2) | "
       "list }} {{ (3, 4) | tojson }}",
       {{"d", {{"a", 1}}}},
       "(1, 'a') (1,) () [(1, 2)] False True (1, 2) [('a', 1)] [('a', 1)] [1, 2] [3, 4]"},
      // Case mapping is Unicode's, as Python's str methods do it.
      {"{{ 'straße' | upper }} {{ 'ÉCOLE Σ' | lower }} {{ 'ΑΣ' | lower }} {{ 'éLAN vital' | "
       "capitalize }} {{ 'élan vital-ñu' | title }} {{ 'ǆemal'.title() }} {{ 'ß'.upper() }} {{ "
       "'İ'.lower() | length }} {{ 'ﬁx'.upper() }}",
       {},
       "STRASSE école σ ας Élan vital Élan Vital-Ñu ǅemal SS 2 FIX"},
      // strftime_now at the fixed date.
      {"{{ strftime_now('%d %b %Y') }}", {}, "26 Jul 2024"},
  };
  return snippets;
}

std::string Render(const std::string& source, const json& context = json::object()) {
  jinja::Value value = jinja::Value::FromJson(context);
  value.mutable_object().Set("strftime_now", jinja::StrftimeNowFunction(FixedDate()));
  return jinja::Template::Parse(source).Render(value);
}

TEST(JinjaInterpreterTest, SnippetsRenderAsWritten) {
  for (const Snippet& snippet : Snippets()) {
    SCOPED_TRACE(snippet.source);
    json context = snippet.context.is_null() ? json::object() : snippet.context;
    EXPECT_EQ(Render(snippet.source, context), snippet.expected);
  }
}

TEST(JinjaInterpreterTest, SnippetsRenderAsPythonJinja2) {
  const std::string python = PythonWithJinja2();
  if (python.empty())
    GTEST_SKIP() << "no python3 that can import jinja2 (apt-get install python3-jinja2)";
  json cases = json::array();
  for (const Snippet& snippet : Snippets()) {
    cases.push_back({{"template", snippet.source},
                     {"context", snippet.context.is_null() ? json::object() : snippet.context}});
  }
  json expected = RunReference(python, {{"now", "2024-07-26T10:30:00"}, {"cases", cases}});
  ASSERT_EQ(expected.size(), cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(Snippets()[i].source);
    ASSERT_TRUE(expected[i]["ok"].get<bool>()) << expected[i]["error"];
    EXPECT_EQ(Render(Snippets()[i].source, cases[i]["context"]),
              expected[i]["text"].get<std::string>());
  }
}

std::string ErrorOf(const std::string& source, const json& context = json::object(),
                    const jinja::RenderLimits& limits = {}) {
  try {
    jinja::Template::Parse(source).Render(jinja::Value::FromJson(context), limits);
  } catch (const jinja::Error& error) {
    return error.what();
  }
  return "";
}

TEST(JinjaInterpreterTest, ErrorsNameTheProblemAndWhere) {
  EXPECT_EQ(ErrorOf("a\n{% if x %}"),
            "unexpected end of template, expected 'elif' or 'else' or "
            "'endif' (template line 2, column 11)");
  EXPECT_NE(ErrorOf("{{ x | nosuchfilter }}").find("no filter named 'nosuchfilter'"),
            std::string::npos);
  EXPECT_NE(ErrorOf("{{ x is nosuchtest }}").find("no test named 'nosuchtest'"), std::string::npos);
  EXPECT_NE(ErrorOf("{% include 'x' %}").find("unsupported tag 'include'"), std::string::npos);
  EXPECT_NE(ErrorOf("{{ 'unterminated }}").find("unterminated string"), std::string::npos);
  EXPECT_NE(ErrorOf("{# open comment").find("missing end of comment"), std::string::npos);
  EXPECT_NE(ErrorOf("{{ (1 }}").find("expected ')'"), std::string::npos);
  EXPECT_EQ(ErrorOf("line\n  {{ missing.attribute }}"),
            "'missing' is undefined (template line 2, column 13)");
  EXPECT_NE(ErrorOf("{{ 1 / 0 }}").find("division by zero"), std::string::npos);
  EXPECT_NE(ErrorOf("{{ 'a' + 1 }}").find("unsupported operand"), std::string::npos);
  EXPECT_NE(ErrorOf("{{ {'a': 1} | map(attribute='x') | tojson }}").find("not JSON serializable"),
            std::string::npos);
  EXPECT_NE(ErrorOf("{% for x in none %}{% endfor %}").find("not iterable"), std::string::npos);
  // Integers are 64-bit: a float past that range is refused (Python would make a big integer).
  EXPECT_NE(ErrorOf("{{ (10.0 ** 21) | int }}").find("outside the 64-bit integer range"),
            std::string::npos);
  // A value of another type where an integer belongs (found by the fuzzer: an abort before).
  EXPECT_NE(
      ErrorOf("{{ 'a\\nb' | replace('\\n', '', ' .') }}").find("expected an integer, got str"),
      std::string::npos);
  EXPECT_NE(ErrorOf("{{ 'inf' | int }}").find("outside the 64-bit integer range"),
            std::string::npos);
  // A value of another type where a string belongs (found by the fuzzer: an abort before).
  EXPECT_NE(ErrorOf("{{ 'na n' | trim(3) }}").find("expected a string, got int"),
            std::string::npos);
  // raise_exception is marked as raised by the template.
  try {
    jinja::Template::Parse("{{ raise_exception('bad roles') }}").Render(jinja::Value());
    FAIL() << "no exception";
  } catch (const jinja::Error& error) {
    EXPECT_TRUE(error.raised());
    EXPECT_NE(std::string(error.what()).find("bad roles"), std::string::npos);
  }
}

TEST(JinjaInterpreterTest, HostileTemplatesHitLimitsNotTheMachine) {
  jinja::RenderLimits limits;
  limits.max_output_bytes = 1 << 20;
  limits.max_iterations = 10000;
  EXPECT_NE(
      ErrorOf("{% for i in range(100000) %}x{% endfor %}", {}, limits).find("range() is too long"),
      std::string::npos);
  EXPECT_NE(ErrorOf("{% for i in range(1000) %}{% for j in range(1000) %}{% endfor %}{% endfor %}",
                    {}, limits)
                .find("loop iterations"),
            std::string::npos);
  EXPECT_NE(ErrorOf("{{ 'x' * 100000000 }}", {}, limits).find("output limit"), std::string::npos);
  EXPECT_NE(
      ErrorOf("{% set s = 'xxxxxxxxxxxxxxxx' %}{% for i in range(9000) %}{{ s * 10 }}{% endfor %}",
              {}, limits)
          .find("output exceeds"),
      std::string::npos);
  EXPECT_NE(ErrorOf("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}").find("nested deeper"),
            std::string::npos);
  EXPECT_NE(ErrorOf("{{ " + std::string(5000, '(') + "1" + std::string(5000, ')') + " }}")
                .find("nested too deeply"),
            std::string::npos);
  EXPECT_NE(ErrorOf("{{ " + std::string(100000, '[') + std::string(100000, ']') + " }}")
                .find("nested too deeply"),
            std::string::npos);
  EXPECT_NE(ErrorOf("{{ 2 ** 64 }}").find("overflow"), std::string::npos);
  // An empty sequence times a huge count is empty at once (the fuzzer found it looping a trillion
  // times over nothing).
  EXPECT_EQ(Render("{{ '' * 999999999999 }}|{{ (() * 999999999999) | length }}|"
                   "{{ ([] * 999999999999) | length }}",
                   json::object()),
            "|0|0");
  EXPECT_EQ(Render("{{ range(9223372036854775800, 9223372036854775807, 5) | list | length }}|"
                   "{{ range(-9223372036854775800, -9223372036854775807, -5) | list | length }}",
                   json::object()),
            "2|2");
}

}  // namespace
}  // namespace reprise::testing
