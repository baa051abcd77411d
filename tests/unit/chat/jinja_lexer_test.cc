#include "common/chat/jinja_lexer.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera::chat {
namespace {

using ::testing::HasSubstr;

std::string Canon(std::string_view source) {
  absl::StatusOr<std::vector<JinjaToken>> tokens = TokenizeJinja(source);
  EXPECT_TRUE(tokens.ok()) << tokens.status();
  return tokens.ok() ? JinjaTokensDebugString(*tokens) : "";
}

TEST(JinjaLexerTest, SplitsTextAndTags) {
  EXPECT_EQ(Canon("a{{ x }}b{% if y %}c{% endif %}"),
            "text(\"a\") {{ x }} text(\"b\") {% if y %} text(\"c\") {% endif %}");
}

TEST(JinjaLexerTest, QuoteStyleEscapesAndSpacingDoNotMatter) {
  EXPECT_EQ(Canon("{{'a\\n' + \"b\"}}"), Canon("{{ \"a\n\"+'b' }}"));
  EXPECT_EQ(Canon("{{ '\\u00e9\\x41\\t\\'' }}"), "{{ '\\303\\251A\\t\\'' }}");
}

TEST(JinjaLexerTest, UnknownEscapeKeepsBackslash) {
  EXPECT_EQ(Canon("{{ '\\q' }}"), "{{ '\\\\q' }}");
}

TEST(JinjaLexerTest, OctalEscapesAndBadHexEscapes) {
  EXPECT_EQ(Canon("{{ '\\012\\101' }}"), "{{ '\\nA' }}");
  EXPECT_THAT(TokenizeJinja("{{ '\\xZZ' }}").status().message(),
              HasSubstr("bad \\x escape in string literal at offset 3"));
}

TEST(JinjaLexerTest, StringSubscriptBecomesAttribute) {
  EXPECT_EQ(Canon("{{ messages[0]['role'] }}"), Canon("{{ messages[0].role }}"));
  EXPECT_EQ(Canon("{{ m['role'] }}"), "{{ m . role }}");
  // Not an identifier, or not a subscript: left alone.
  EXPECT_EQ(Canon("{{ m['a b'] }}"), "{{ m [ 'a b' ] }}");
  EXPECT_EQ(Canon("{{ ['x'] }}"), "{{ [ 'x' ] }}");
}

TEST(JinjaLexerTest, ExplicitWhitespaceControl) {
  EXPECT_EQ(Canon("a \n {{- x -}} \n b"), "text(\"a\") {{ x }} text(\"b\")");
  EXPECT_EQ(Canon("a \n {%- if x -%} \n b{% endif %}"),
            "text(\"a\") {% if x %} text(\"b\") {% endif %}");
}

TEST(JinjaLexerTest, TrimBlocksDropsOneNewlineAfterBlockTags) {
  EXPECT_EQ(Canon("{% if x %}\n\nb{% endif %}"), "{% if x %} text(\"\\nb\") {% endif %}");
  // Expressions keep their newline.
  EXPECT_EQ(Canon("{{ x }}\nb"), "{{ x }} text(\"\\nb\")");
  // '+' turns trim_blocks off for that tag.
  EXPECT_EQ(Canon("{% if x +%}\nb{% endif %}"), "{% if x %} text(\"\\nb\") {% endif %}");
}

TEST(JinjaLexerTest, LstripBlocksDropsIndentBeforeBlockTags) {
  EXPECT_EQ(Canon("a\n    {% if x %}b{% endif %}"),
            "text(\"a\\n\") {% if x %} text(\"b\") {% endif %}");
  // Not at the start of a line: kept.
  EXPECT_EQ(Canon("a  {% if x %}b{% endif %}"), "text(\"a  \") {% if x %} text(\"b\") {% endif %}");
  // Expressions are not block tags.
  EXPECT_EQ(Canon("a\n  {{ x }}"), "text(\"a\\n  \") {{ x }}");
}

TEST(JinjaLexerTest, IndentedBlocksVanishEntirely) {
  EXPECT_EQ(Canon("{% if x %}\n    {% if y %}\n    {% endif %}\n{% endif %}\n"),
            "{% if x %} {% if y %} {% endif %} {% endif %}");
}

TEST(JinjaLexerTest, CommentsAreDropped) {
  EXPECT_EQ(Canon("a{# note #}b"), "text(\"ab\")");
  EXPECT_EQ(Canon("{# note #}\n{{ x }}"), "{{ x }}");
}

TEST(JinjaLexerTest, DictLiteralBracesDoNotCloseAnExpression) {
  EXPECT_EQ(Canon("{{ {'a': {'b': 1}} }}"), "{{ { 'a' : { 'b' : 1 } } }}");
}

TEST(JinjaLexerTest, ReportsUnterminatedConstructs) {
  EXPECT_THAT(TokenizeJinja("ab{% for x in y").status().message(),
              HasSubstr("unterminated '{%' tag opened at offset 2"));
  EXPECT_THAT(TokenizeJinja("{{ 'abc }}").status().message(),
              HasSubstr("unterminated string literal at offset 3"));
  EXPECT_THAT(TokenizeJinja("{# x").status().message(), HasSubstr("unterminated comment"));
  EXPECT_THAT(TokenizeJinja("{{ a ; b }}").status().message(),
              HasSubstr("unexpected character ';'"));
}

TEST(JinjaLexerTest, PlainTextIsOneTextToken) {
  EXPECT_EQ(Canon("hello { world }"), "text(\"hello { world }\")");
  EXPECT_EQ(Canon(""), "");
}

}  // namespace
}  // namespace tessera::chat
