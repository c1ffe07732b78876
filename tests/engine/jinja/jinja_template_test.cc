#include "engine/jinja/jinja_template.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace linserve::jinja {
namespace {

using Json = nlohmann::ordered_json;

// The rendering, "PARSE: <status>" when the template is refused at load, or
// "ERROR: <status>" when rendering fails.
std::string Render(const std::string& source, const Json& context = Json::object(),
                   const RenderLimits& limits = {}) {
  auto t = Template::Parse(source);
  if (!t.ok()) return "PARSE: " + std::string(t.status().message());
  auto out = t->Render(context, limits);
  if (!out.ok()) return "ERROR: " + std::string(out.status().message());
  return *out;
}

struct Case {
  const char* source;
  const char* expected;
};

void ExpectAll(const std::vector<Case>& cases, const Json& context = Json::object()) {
  for (const Case& c : cases) EXPECT_EQ(Render(c.source, context), c.expected) << c.source;
}

TEST(JinjaTemplateTest, WhitespaceControlTrimAndLstripBlocks) {
  ExpectAll({
      {"a  {{- 'b' -}}  c", "abc"},
      {"a\n  {%- if true %}b{% endif %}\n", "ab"},
      // trim_blocks: the newline after a block tag goes; lstrip_blocks: the
      // indentation before it.
      {"{% if true %}\n  x\n  {% endif %}\ny", "  x\ny"},
      {"a {# note #} b", "a  b"},
      {"a {#- note -#} b", "ab"},
      {"{% raw %}{{ not rendered }}{% endraw %}", "{{ not rendered }}"},
      {"one trailing newline goes\n", "one trailing newline goes"},
      {"{{ 'x' }}\n\n", "x\n"},
  });
}

TEST(JinjaTemplateTest, Statements) {
  ExpectAll({
      {"{% if 0 %}a{% elif '' %}b{% elif [1] %}c{% else %}d{% endif %}", "c"},
      {"{% for x in [1, 2, 3] %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}"
       "{{ loop.first }}{{ loop.last }}{{ loop.length }};{% endfor %}",
       "103TrueFalse3;212FalseFalse3;321FalseTrue3;"},
      {"{% for x in [] %}a{% else %}empty{% endfor %}", "empty"},
      {"{% for x in [1, 2, 3, 4] if x is even %}{{ x }}{{ loop.length }}{% endfor %}", "2242"},
      {"{% for k, v in {'a': 1, 'b': 2}|items %}{{ k }}={{ v }},{% endfor %}", "a=1,b=2,"},
      {"{% for k in {'z': 1, 'a': 2} %}{{ k }}{% endfor %}", "za"},
      {"{% for x in [1, 2, 3, 4] %}{% if x == 2 %}{% continue %}{% endif %}"
       "{% if x == 4 %}{% break %}{% endif %}{{ x }}{% endfor %}",
       "13"},
      {"{% for x in [1, 2] %}{{ loop.previtem }}|{{ loop.nextitem }};{% endfor %}", "|2;1|;"},
      // A set inside a loop stays in the loop; a namespace carries it out.
      {"{% set n = 0 %}{% for x in [1, 2] %}{% set n = n + x %}{% endfor %}{{ n }}", "0"},
      {"{% set ns = namespace(n=0) %}{% for x in [1, 2] %}{% set ns.n = ns.n + x %}{% endfor %}"
       "{{ ns.n }}",
       "3"},
      {"{% set a, b = [1, 2] %}{{ b }}{{ a }}", "21"},
      {"{% set block %}in {{ 'side' }}{% endset %}[{{ block }}]", "[in side]"},
      {"{% set block | upper %}shout{% endset %}{{ block }}", "SHOUT"},
      {"{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}"
       "{{ greet('A') }} {{ greet('B', punct='?') }}",
       "Hi A! Hi B?"},
      {"{% macro wrap() %}<{{ caller() }}>{% endmacro %}{% call wrap() %}body{% endcall %}",
       "<body>"},
      {"{% filter upper %}quiet {{ 'words' }}{% endfilter %}", "QUIET WORDS"},
      {"{% generation %}kept{% endgeneration %}", "kept"},
  });
}

TEST(JinjaTemplateTest, Expressions) {
  ExpectAll(
      {
          {"{{ 1 + 2 * 3 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 2 ** 10 }}",
           "7 3 -4 1 2 1024"},
          {"{{ 7 / 2 }} {{ 4 / 2 }} {{ 0.1 + 0.2 }} {{ 1e20 * 10 }}",
           "3.5 2.0 0.30000000000000004 1e+21"},
          {"{{ 'a' + 'b' }} {{ 'a' ~ 1 ~ none }} {{ 'ab' * 3 }} {{ [1] + [2] }}",
           "ab a1None ababab [1, 2]"},
          {"{{ 'yes' if 1 < 2 else 'no' }} [{{ 'x' if false }}]", "yes []"},
          {"{{ 'b' in 'abc' }} {{ 2 in [1, 2] }} {{ 'k' in {'k': 1} }} {{ 3 not in [1] }}",
           "True True True True"},
          {"{{ [1, 2, 3][::-1] }} {{ 'hello'[1:3] }} {{ [1, 2, 3][-1] }} {{ 'héllo'[1] }}",
           "[3, 2, 1] el 3 é"},
          {"{{ not true or 0 }} {{ [] or 'fallback' }} {{ 1 and 'last' }}", "0 fallback last"},
          {"{{ {'a': [1, {'b': none}]} }} {{ \"it's\" }} {{ ('a', 1) }}",
           "{'a': [1, {'b': None}]} it's ['a', 1]"},
          {"{{ x.missing }}|{{ x['missing'] }}|{{ y is defined }}", "||False"},
      },
      Json{{"x", Json::object()}});
}

TEST(JinjaTemplateTest, StringOfBooleansAndNoneIsPython) {
  ExpectAll(
      {
          {"{{ true|string }} {{ false|string }} {{ none|string }} {{ flag }} {{ 2.0 }}",
           "True False None True 2.0"},
      },
      Json{{"flag", true}});
}

TEST(JinjaTemplateTest, ToJsonIsPythonJsonDumps) {
  Json context = {
      {"v", {{"z", "é\n\"\\\x01"}, {"a", {1, 2.5, true, nullptr}}, {"m", Json::object()}}}};
  ExpectAll(
      {
          // Key order kept, non-ASCII as it is, control characters escaped.
          {"{{ v|tojson }}",
           "{\"z\": \"é\\n\\\"\\\\\\u0001\", \"a\": [1, 2.5, true, null], \"m\": {}}"},
          {"{{ v|tojson(separators=(',', ':')) }}",
           "{\"z\":\"é\\n\\\"\\\\\\u0001\",\"a\":[1,2.5,true,null],\"m\":{}}"},
          {"{{ v.a|tojson(indent=2) }}", "[\n  1,\n  2.5,\n  true,\n  null\n]"},
          {"{{ v|tojson(sort_keys=true) }}",
           "{\"a\": [1, 2.5, true, null], \"m\": {}, \"z\": \"é\\n\\\"\\\\\\u0001\"}"},
      },
      context);
}

TEST(JinjaTemplateTest, FiltersTestsAndMethods) {
  Json context = {
      {"msgs", {{{"role", "user"}, {"content", "a"}}, {{"role", "tool"}, {"content", "b"}}}}};
  ExpectAll(
      {
          {"{{ '  x  '|trim }}|{{ 'xxhixx'.strip('x') }}|{{ '\\n\\nhi'.lstrip('\\n') }}|{{ 'a  "
           "'.rstrip() }}",
           "x|hi|hi|a"},
          {"{{ 'a,b,,c'.split(',') }} {{ ' a  b '.split() }} {{ 'a</think>b'.split('</think>')[-1] "
           "}}",
           "['a', 'b', '', 'c'] ['a', 'b'] b"},
          {"{{ 'abc'.startswith('ab') }} {{ 'abc'.endswith(('x', 'c')) }} {{ 'AbC'.lower() }}",
           "True True abc"},
          {"{{ msgs|length }} {{ msgs|selectattr('role', 'equalto', 'tool')|list|length }} "
           "{{ msgs|map(attribute='content')|join(',') }} {{ msgs|rejectattr('role', 'eq', "
           "'user')|first }}",
           "2 1 a,b {'role': 'tool', 'content': 'b'}"},
          {"{{ msgs[0].get('role') }} {{ msgs[0].get('nope', 'dflt') }} {{ msgs[0].keys()|list }}",
           "user dflt ['role', 'content']"},
          {"{{ none is none }} {{ 'x' is string }} {{ 1 is number }} {{ {} is mapping }} "
           "{{ [] is iterable }} {{ 'x' is not mapping }} {{ 3 is odd }} {{ false is false }}",
           "True True True True True True True True"},
          {"{{ missing|default('d') }} {{ ''|default('d', true) }} {{ [3, 1, 2]|sort }} {{ "
           "'ab'|upper }}",
           "d d [1, 2, 3] AB"},
          {"{{ range(3)|list }} {{ 'a b'|replace(' ', '_') }} {{ 'x'|tojson }}",
           "[0, 1, 2] a_b \"x\""},
      },
      context);
}

TEST(JinjaTemplateTest, RaiseExceptionIsAnErrorNamingTheLine) {
  EXPECT_EQ(Render("line one\n{{ raise_exception('Roles must alternate') }}"),
            "ERROR: template line 2: the template raised: Roles must alternate");
}

TEST(JinjaTemplateTest, ConstructsOutsideTheSubsetAreRefusedAtLoad) {
  ExpectAll({
      {"ok\n{% extends 'base.html' %}", "PARSE: template line 2: '{% extends %}' is not supported"},
      {"{% include 'x' %}", "PARSE: template line 1: '{% include %}' is not supported"},
      {"\n\n{{ x|shell }}", "PARSE: template line 3: the filter 'shell' is not supported"},
      {"{{ x is prime }}", "PARSE: template line 1: the test 'prime' is not supported"},
      {"{% if x %}open", "PARSE: template line 1: missing '{% endif %}'"},
      {"{{ 'unclosed }}", "PARSE: template line 1: a string is not closed"},
      {"{% endfor %}", "PARSE: template line 1: '{% endfor %}' without its opening tag"},
      {"{% break %}", "PARSE: template line 1: '{% break %}' outside a loop"},
      // No Python object model behind the values: dunder names are plain missing attributes.
      {"{{ ''.__class__ }}|{{ {}.__class__ }}", "|"},
  });
}

TEST(JinjaTemplateTest, NestingBeyondTheLimitIsRefusedAtLoad) {
  std::string deep = "{{ " + std::string(200, '(') + "1" + std::string(200, ')') + " }}";
  EXPECT_EQ(Render(deep).rfind("PARSE: template line 1: nested deeper than", 0), 0u);
  std::string ifs;
  for (int i = 0; i < 100; ++i) ifs += "{% if true %}";
  EXPECT_EQ(Render(ifs).rfind("PARSE: template line 1: nested deeper than", 0), 0u);
}

TEST(JinjaTemplateTest, RenderingLimitsAreErrorsNamingTheLimit) {
  RenderLimits limits;
  limits.max_output_bytes = 100;
  limits.max_loop_iterations = 1000;
  limits.max_call_depth = 8;
  EXPECT_EQ(Render("{% for i in range(200) %}x{% endfor %}", Json::object(), limits),
            "ERROR: template line 1: more than 100 bytes of output (the limit on output bytes)");
  EXPECT_EQ(Render("{{ 'x' * 1000000000 }}", Json::object(), limits),
            "ERROR: template line 1: a value of more than 100 bytes (the limit on output bytes)");
  EXPECT_EQ(
      Render("{% for i in range(100) %}{% for j in range(100) %}{% endfor %}{% endfor %}",
             Json::object(), limits),
      "ERROR: template line 1: more than 1000 loop iterations (the limit on loop iterations)");
  EXPECT_EQ(
      Render("{{ range(1000000000)|length }}", Json::object(), limits),
      "ERROR: template line 1: more than 1000 loop iterations (the limit on loop iterations)");
  EXPECT_EQ(
      Render("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}\n{{ f(0) }}", Json::object(), limits),
      "ERROR: template line 1: macro calls nested deeper than 8 (the limit on call depth)");
  // A limit crossed is ResourceExhausted; an error of the template InvalidArgument.
  auto t = Template::Parse("{% for i in range(2000) %}{% endfor %}");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->Render(Json::object(), limits).status().code(),
            absl::StatusCode::kResourceExhausted);
  auto raising = Template::Parse("{{ raise_exception('no') }}");
  ASSERT_TRUE(raising.ok());
  EXPECT_EQ(raising->Render(Json::object()).status().code(), absl::StatusCode::kInvalidArgument);
}

// Found by fuzz_jinja: literals past int64 and double threw out of the parser.
TEST(JinjaTemplateTest, NumbersPastTheirRangeAreRefusedOrReadAsPythonReadsThem) {
  ExpectAll({
      {"{{ 99999999999999999999 }}", "PARSE: template line 1: an integer out of range"},
      {"{{ x.99999999999999999999 }}", "PARSE: template line 1: an integer out of range"},
      {"{{ 9223372036854775807 }}", "9223372036854775807"},
      {"{{ 1e999 }}|{{ -1e999 }}|{{ 1e-999 }}|{{ 1.5e3 }}", "inf|-inf|0.0|1500.0"},
      {"{{ [[1, 2]]|map(attribute='1')|list }}", "[2]"},
      {"{{ ([[1, 2]]|map(attribute='99999999999999999999999')|first) is defined }}", "False"},
  });
}

TEST(JinjaTemplateTest, ContextValuesAreDataNeverParsed) {
  Json context = {{"content", "{{ raise_exception('injected') }}{% for x in y %}"}};
  EXPECT_EQ(Render("[{{ content }}]", context),
            "[{{ raise_exception('injected') }}{% for x in y %}]");
}

TEST(JinjaTemplateTest, TypeErrorsAreErrorsNotCrashes) {
  ExpectAll({
      {"{{ 1 + 'a' }}",
       "ERROR: template line 1: unsupported operand types for +: integer and string"},
      {"{{ 1 // 0 }}", "ERROR: template line 1: integer division or modulo by zero"},
      {"{{ 9223372036854775807 + 1 }}", "ERROR: template line 1: an integer overflowed"},
      {"{{ none.attr }}", "ERROR: template line 1: 'none' has no attribute 'attr'"},
      {"{{ nothing() }}", "ERROR: template line 1: 'nothing' is undefined"},
      {"{% for x in 3 %}{% endfor %}", "ERROR: template line 1: a integer is not iterable"},
  });
}

}  // namespace
}  // namespace linserve::jinja
