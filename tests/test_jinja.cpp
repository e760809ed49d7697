// The template language itself: each case renders a template with a few
// variables (given as JSON) and compares with what Jinja2 3.1 printed for
// the same input under Hugging Face's settings (trim_blocks, lstrip_blocks,
// its tojson). Expected strings were produced by real Jinja2.
#include <gtest/gtest.h>

#include <cctype>
#include <string>

#include "base/error.hpp"
#include "base/json_parser.hpp"
#include "chat/jinja_interpreter.hpp"
#include "chat/jinja_json.hpp"

namespace cortiq::jinja {
namespace {

struct Case {
  const char* name;
  const char* source;
  const char* variables;  // a JSON object
  const char* expected;
};

// gtest names a failing case by its name rather than its bytes.
void PrintTo(const Case& c, std::ostream* os) {
  *os << c.name;
}

std::string render(std::string_view source, std::string_view variables_json = "{}") {
  Value vars = value_from_json(parse_json(variables_json));
  return Template(source).render(vars.as_dict());
}

const Case kCases[] = {
    {"text only", "hello", "{}", "hello"},
    {"output",
     "{{ 1 + 2 }} {{ 'a' ~ 3 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 2 ** 10 }} "
     "{{ 7 / 2 }}",
     "{}", "3 a3 3 -4 1 2 1024 3.5"},
    {"float repr", "{{ 1.0 }} {{ 0.1 + 0.2 }} {{ 1e20 }} {{ 3 * 1.5 }}", "{}",
     "1.0 0.30000000000000004 1e+20 4.5"},
    {"python str",
     "{{ [1, 'a', none, true, 2.5] }} {{ {'k': 'v', 'n': [1]} }} {{ none }} {{ false }}", "{}",
     "[1, 'a', None, True, 2.5] {'k': 'v', 'n': [1]} None False"},
    {"repr quotes", "{{ [\"it's\", 'say \"hi\"'] }}", "{}", "[\"it's\", 'say \"hi\"']"},
    {"undefined prints empty", "[{{ missing }}][{{ missing | default(1) }}]", "{}", "[][1]"},
    {"comparisons",
     "{{ 1 < 2 }} {{ 'a' == 'a' }} {{ 1 == 1.0 }} {{ [1,2] != [1,2] }} {{ 'b' >= 'a' }}", "{}",
     "True True True False True"},
    {"logic returns operands", "{{ 0 or 'x' }} {{ 'a' and 'b' }} {{ not none }} {{ none or [] }}",
     "{}", "x b True []"},
    {"in", "{{ 'b' in 'abc' }} {{ 2 in [1,2] }} {{ 'k' in {'k': 1} }} {{ 'z' not in 'abc' }}", "{}",
     "True True True True"},
    {"ternary", "{{ 'yes' if x else 'no' }} {{ 'yes' if y else 'no' }}[{{ 'only' if y }}]",
     "{\"x\": 1, \"y\": 0}", "yes no[]"},
    {"attr and item", "{{ m.role }} {{ m['content'] }} {{ l[0] }} {{ l[-1] }} {{ l.1 }}",
     "{\"m\": {\"role\": \"user\", \"content\": \"hi\"}, \"l\": [1, 2, 3]}", "user hi 1 3 2"},
    {"slices", "{{ l[1:] }} {{ l[:-1] }} {{ l[::-1] }} {{ s[::-1] }} {{ s[1:3] }} {{ l[::2] }}",
     "{\"l\": [1, 2, 3, 4], \"s\": \"héllo\"}", "[2, 3, 4] [1, 2, 3] [4, 3, 2, 1] olléh él [1, 3]"},
    {"if elif else",
     "{% for n in [1, 2, 3] %}{% if n == 1 %}one{% elif n == 2 %}two{% else %}many{% endif %},{% "
     "endfor %}",
     "{}", "one,two,many,"},
    {"loop vars",
     "{% for x in 'abc' %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.first }}{{ "
     "loop.last }}{{ loop.length }};{% endfor %}",
     "{}", "103TrueFalse3;212FalseFalse3;321FalseTrue3;"},
    {"loop prev next", "{% for x in [1,2,3] %}{{ loop.previtem }}-{{ loop.nextitem }} {% endfor %}",
     "{}", "-2 1-3 2- "},
    {"loop else", "{% for x in [] %}x{% else %}empty{% endfor %}", "{}", "empty"},
    {"loop filter",
     "{% for x in range(10) if x is odd %}{{ x }}{{ ',' if not loop.last }}{% endfor %}", "{}",
     "1,3,5,7,9"},
    {"unpacking", "{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}",
     "{\"d\": {\"b\": 1, \"a\": 2}}", "b=1;a=2;"},
    {"break continue",
     "{% for x in range(10) %}{% if x == 2 %}{% continue %}{% endif %}{% if x > 4 %}{% break %}{% "
     "endif %}{{ x }}{% endfor %}",
     "{}", "0134"},
    {"loop scoping", "{% set x = 1 %}{% for i in [1] %}{% set x = 2 %}{% endfor %}{{ x }}", "{}",
     "1"},
    {"namespace",
     "{% set ns = namespace(found=false, n=0) %}{% for i in [1,2,3] %}{% set ns.n = ns.n + i %}{% "
     "if i == 2 %}{% set ns.found = true %}{% endif %}{% endfor %}{{ ns.found }} {{ ns.n }}",
     "{}", "True 6"},
    {"block set", "{% set greeting %}Hello {{ name }}!{% endset %}[{{ greeting }}]",
     "{\"name\": \"Ann\"}", "[Hello Ann!]"},
    {"macro",
     "{% macro tag(name, body='x') %}<{{ name }}>{{ body }}</{{ name }}>{% endmacro %}{{ tag('a') "
     "}}{{ tag('b', body='y') }}{{ tag('c', 'z') }}",
     "{}", "<a>x</a><b>y</b><c>z</c>"},
    {"call block",
     "{% macro wrap() %}[{{ caller() }}]{% endmacro %}{% call wrap() %}inner{% endcall %}", "{}",
     "[inner]"},
    {"filter block", "{% filter upper %}shout {{ 'it' }}{% endfilter %}", "{}", "SHOUT IT"},
    {"whitespace control", "a  {%- if true -%}  b  {%- endif -%}  c {{- ' d ' -}} e", "{}",
     "abc d e"},
    {"trim and lstrip blocks",
     "<ul>\n  {% for x in [1, 2] %}\n  <li>{{ x }}</li>\n  {% endfor %}\n</ul>\n", "{}",
     "<ul>\n  <li>1</li>\n  <li>2</li>\n</ul>"},
    {"plus keeps whitespace", "a\n  {%+ if true %}b{% endif %}\n", "{}", "a\n  b"},
    {"comments", "a {# a comment #}b\n{# own line #}\nc", "{}", "a b\nc"},
    {"string filters",
     "{{ '  hi  ' | trim }}|{{ 'Hello' | lower }}|{{ 'hello' | upper }}|{{ 'hello world' | title "
     "}}|{{ 'hELLO' | capitalize }}|{{ 'a-b-c' | replace('-', '+') }}",
     "{}", "hi|hello|HELLO|Hello World|Hello|a+b+c"},
    {"length join default",
     "{{ [1,2,3] | length }} {{ ['a','b'] | join(', ') }} {{ missing | default('dflt') }} {{ '' | "
     "d('empty', true) }} {{ none | default('kept') }}",
     "{}", "3 a, b dflt empty None"},
    {"first last list unique",
     "{{ [3,1,2] | first }} {{ [3,1,2] | last }} {{ 'ab' | list }} {{ [1,2,1,3] | unique | list }}",
     "{}", "3 2 ['a', 'b'] [1, 2, 3]"},
    {"selectattr map",
     "{{ msgs | selectattr('role', 'equalto', 'user') | map(attribute='content') | join(',') }} {{ "
     "msgs | rejectattr('role', 'eq', 'user') | list | length }}",
     "{\"msgs\": [{\"role\": \"user\", \"content\": \"a\"}, {\"role\": \"bot\", \"content\": "
     "\"b\"}, {\"role\": \"user\", \"content\": \"c\"}]}",
     "a,c 1"},
    {"map filter name", "{{ ['a', 'b'] | map('upper') | join }}", "{}", "AB"},
    {"numbers filters",
     "{{ '42' | int + 1 }} {{ '3.5' | float }} {{ 2.567 | round(2) }} {{ -3 | abs }} {{ 3 | string "
     "~ 'x' }}",
     "{}", "43 3.5 2.57 3 3x"},
    {"sort dictsort",
     "{{ [3, 1, 2] | sort }} {{ ['b', 'A', 'c'] | sort }} {{ {'b': 1, 'a': 2} | dictsort }}", "{}",
     "[1, 2, 3] ['A', 'b', 'c'] [('a', 2), ('b', 1)]"},
    {"items filter", "{% for k, v in {'x': 1, 'y': 2} | items %}{{ k }}{{ v }}{% endfor %}", "{}",
     "x1y2"},
    {"indent", "{{ 'a\nb\n\nc' | indent(2) }}|{{ 'a\nb' | indent(4, true) }}", "{}",
     "a\n  b\n\n  c|    a\n    b"},
    {"batch", "{{ [1,2,3,4,5] | batch(2) | list }}", "{}", "[[1, 2], [3, 4], [5]]"},
    {"tojson", "{{ d | tojson }}",
     "{\"d\": {\"name\": \"xé\\\"\\n\", \"n\": [1, 2.5, true, null], \"e\": {}}}",
     "{\"name\": \"xé\\\"\\n\", \"n\": [1, 2.5, true, null], \"e\": {}}"},
    {"tojson ensure_ascii", "{{ d | tojson(ensure_ascii=true) }} {{ d | tojson }}",
     "{\"d\": {\"ké\": \"café 😀 中\"}}",
     "{\"k\\u00e9\": \"caf\\u00e9 \\ud83d\\ude00 \\u4e2d\"} {\"ké\": \"café 😀 中\"}"},
    {"tojson indent", "{{ d | tojson(indent=2) }}",
     "{\"d\": {\"a\": [1, {\"b\": \"c\"}], \"z\": []}}",
     "{\n  \"a\": [\n    1,\n    {\n      \"b\": \"c\"\n    }\n  ],\n  \"z\": []\n}"},
    {"tests",
     "{{ x is defined }} {{ y is undefined }} {{ none is none }} {{ 's' is string }} {{ 1 is "
     "number }} {{ 1 is integer }} {{ 1.5 is float }} {{ {} is mapping }} {{ [] is iterable }} {{ "
     "'s' is sequence }} {{ true is true }} {{ 0 is false }} {{ 4 is divisibleby 2 }} {{ 3 is not "
     "even }} {{ 'a' is in 'abc' }}",
     "{\"x\": 1}", "True True True True True True True True True True True False True True True"},
    {"string methods",
     "{{ s.strip() }}|{{ s.lstrip() }}|{{ s.rstrip() }}|{{ 'a,b,,c'.split(',') }}|{{ ' x  y "
     "'.split() }}|{{ 'abc'.startswith('ab') }}|{{ 'abc'.endswith(('x', 'c')) }}|{{ "
     "'hello'.count('l') }}|{{ 'hello'.find('l') }}|{{ 'Ab'.upper() }}{{ 'Ab'.lower() }}|{{ "
     "'xax'.replace('x', 'y') }}",
     "{\"s\": \"  pad  \"}",
     "pad|pad  |  pad|['a', 'b', '', 'c']|['x', 'y']|True|True|2|2|ABab|yay"},
    {"string format", "{{ '{} and {}'.format('a', 'b') }} {{ '{name}!'.format(name='n') }}", "{}",
     "a and b n!"},
    {"dict methods",
     "{{ d.keys() | list }} {{ d.values() | list }} {{ d.get('a') }} {{ d.get('zz', 'none') }} {{ "
     "d.get('zz') }}",
     "{\"d\": {\"a\": 1, \"b\": 2}}", "['a', 'b'] [1, 2] 1 none None"},
    {"list literal and dict literal",
     "{% set d = {'a': [1, 2], 'b': {'c': 3}} %}{{ d.a[1] }}{{ d['b']['c'] }}{{ (1, 2) }}", "{}",
     "23(1, 2)"},
    {"range dict", "{{ range(3) | list }} {{ range(1, 7, 2) | list }} {{ dict(a=1, b='x') }}", "{}",
     "[0, 1, 2] [1, 3, 5] {'a': 1, 'b': 'x'}"},
    {"concat and string multiply", "{{ 'ab' * 3 }} {{ [1] + [2] }} {{ 'x' + 'y' }}", "{}",
     "ababab [1, 2] xy"},
    {"string escapes", "{{ 'tab\\there' }}|{{ \"new\\nline\" }}|{{ 'q\\'s' }}|{{ '\\u00e9' }}",
     "{}", "tab\there|new\nline|q's|é"},
    {"raw block", "{% raw %}{{ not parsed }}{% endraw %}", "{}", "{{ not parsed }}"},
    {"content parts",
     "{% for p in c %}{% if p.type == 'text' %}{{ p.text }}{% endif %}{% endfor %}",
     "{\"c\": [{\"type\": \"text\", \"text\": \"A\"}, {\"type\": \"image\"}, {\"type\": \"text\", "
     "\"text\": \"B\"}]}",
     "AB"},
    {"recursive-ish macro",
     "{% macro render(v) %}{% if v is mapping %}{% for k, x in v.items() %}{{ k }}:{{ render(x) "
     "}};{% endfor %}{% else %}{{ v }}{% endif %}{% endmacro %}{{ render({'a': {'b': 1}, 'c': 2}) "
     "}}",
     "{}", "a:b:1;;c:2;"},
    {"is sequence not string", "{{ [1] is sequence and [1] is not string }}", "{}", "True"},
    {"min max sum", "{{ [3, 1, 2] | max }} {{ [3, 1, 2] | min }} {{ [1, 2, 3] | sum }}", "{}",
     "3 1 6"},
    {"markup escapes added text",
     "{{ 'a: '|safe + '<b>' }} {{ '<i>' + 'x'|safe }} {{ '<x>' | e }} {{ '<y>' ~ 'z'|safe }}", "{}",
     "a: &lt;b&gt; &lt;i&gt;x &lt;x&gt; <y>z"},
    {"macro defaults see globals",
     "{% set g = 'G' %}{% macro m(a=g) %}{{ a }}{{ g }}{% endmacro %}{{ m() }}", "{}", "GG"},
    {"nested loops loop var",
     "{% for a in [1,2] %}{% for b in 'xy' %}{{ loop.index }}{% endfor %}{{ loop.index }};{% "
     "endfor %}",
     "{}", "121;122;"},
    {"set tuple unpack", "{% set a, b = [1, 2] %}{{ b }}{{ a }}", "{}", "21"},
    {"string comparison chain",
     "{{ 'user' if role in ['user', 'human'] and content is string else 'other' }}",
     "{\"role\": \"human\", \"content\": \"x\"}", "user"},
    {"unicode case", "{{ 'ÉCOLE ß' | lower }} {{ 'café' | upper }} {{ 'Été'.lower() }}", "{}",
     "école ß CAFÉ été"},
    {"lstrip indented blocks",
     "x\n    {%- if true %}\n    y\n    {% endif %}\n  {# c #}\nz  {% if true %}w{% endif %}", "{}",
     "x    y\nz  w"},
    {"strip around output", "a\n  {{- 'b' -}}  \n c\n{{ 'd' }}\n", "{}", "abc\nd"},
    {"plus after block", "{% if true +%}\nkept{% endif %}\nnext", "{}", "\nkeptnext"},
    {"generation tag", "{% generation %}gen{% endgeneration %}", "{}", "gen"},
};

class JinjaCase : public ::testing::TestWithParam<Case> {};

TEST_P(JinjaCase, MatchesJinja2) {
  const Case& c = GetParam();
  EXPECT_EQ(render(c.source, c.variables), c.expected) << c.source;
}

INSTANTIATE_TEST_SUITE_P(Language, JinjaCase, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           std::string name = info.param.name;
                           for (char& ch : name)
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return name;
                         });

std::string error_of(std::string_view source, std::string_view vars = "{}") {
  try {
    render(source, vars);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(Jinja, ErrorsNameTheLine) {
  EXPECT_EQ(error_of("a\nb\n{{ x | foo }}"), "template line 3: unknown filter 'foo'");
  EXPECT_EQ(error_of("{% if true %}\n\n{{ 1 is frobnicated }}{% endif %}"),
            "template line 3: unknown test 'frobnicated'");
  EXPECT_EQ(error_of("\n{% for x in [1] %}"),
            "template line 2: unexpected end of template, expected 'else'");
  EXPECT_EQ(error_of("{{ 'unterminated }}"), "template line 1: unterminated string");
  EXPECT_EQ(error_of("\n\n{% frob %}"), "template line 3: unknown statement 'frob'");
  EXPECT_EQ(error_of("{{ 1 / 0 }}"), "template line 1: division by zero");
  EXPECT_EQ(error_of("{{ nothing() }}"), "template line 1: 'nothing' is undefined");
  EXPECT_EQ(error_of("{{ raise_exception('bad role') }}"), "template line 1: bad role");
}

TEST(Jinja, NamespaceOnlyAttributeAssignment) {
  EXPECT_NE(error_of("{% set d = {} %}{% set d.x = 1 %}").find("namespace"), std::string::npos);
}

TEST(Jinja, DeepRecursionIsAnErrorNotACrash) {
  EXPECT_NE(error_of("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}").find("too deep"),
            std::string::npos);
}

TEST(Jinja, DeepNestingIsAnErrorNotACrash) {
  std::string parens = "{{ " + std::string(100000, '(') + "1" + std::string(100000, ')') + " }}";
  EXPECT_NE(error_of(parens).find("nested too deeply"), std::string::npos);
  std::string ifs;
  for (int i = 0; i < 20000; ++i) ifs += "{% if true %}";
  EXPECT_NE(error_of(ifs).find("nested too deeply"), std::string::npos);
  EXPECT_NE(error_of("{{ " + std::string(100000, '-') + "1 }}").find("nested too deeply"),
            std::string::npos);
}

TEST(Jinja, MalformedTemplatesThrow) {
  for (const char* bad : {"{{", "{%", "{{ 1 +", "{% if %}", "{% for in x %}{% endfor %}",
                          "{{ [1, 2 }}", "{{ {'a' 1} }}", "{# open", "{% endif %}",
                          "{{ x[1:2:3:4] }}", "{% set %}", "{{ 'a' | }}", "{% macro m( %}"}) {
    EXPECT_NE(error_of(bad).rfind("template line ", 0), std::string::npos) << bad;
  }
}

TEST(Jinja, ListAppendIsShared) {
  EXPECT_EQ(render("{% set ns = namespace(l=[]) %}{% for i in range(3) %}{% do ns.l.append(i) %}"
                   "{% endfor %}{{ ns.l }}"),
            "[0, 1, 2]");
}

TEST(Jinja, TemplateRendersRepeatedly) {
  Template t("{% set x = (x or 0) + 1 %}{{ x }}");
  Dict vars;
  EXPECT_EQ(t.render(vars), "1");
  EXPECT_EQ(t.render(vars), "1");
}

TEST(Jinja, TojsonSeparatorsAndSortKeys) {
  EXPECT_EQ(render("{{ d | tojson(separators=(',', ':'), sort_keys=true) }}",
                   R"({"d": {"b": 1, "a": [1, 2]}})"),
            R"({"a":[1,2],"b":1})");
}

}  // namespace
}  // namespace cortiq::jinja
