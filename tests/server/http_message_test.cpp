// The request pieces handlers read: the query's parameters and %XX decoding.
#include <gtest/gtest.h>

#include "server/http_message.h"

namespace {

namespace api = inferlab::api;

TEST(HttpMessage, PercentDecodingKeepsAPlusInAPathAndMakesItASpaceInAQuery) {
  EXPECT_EQ(api::percent_decoded("/v1/models/Qwen%2FQwen2.5"), "/v1/models/Qwen/Qwen2.5");
  EXPECT_EQ(api::percent_decoded("a+b"), "a+b");
  EXPECT_EQ(api::percent_decoded("a+b%2b", true), "a b+");
  EXPECT_EQ(api::percent_decoded("100%"), "100%");  // no escape after it: kept
  EXPECT_EQ(api::percent_decoded("%zz%4"), "%zz%4");
}

TEST(HttpMessage, TheQueryIsItsDecodedPairsInOrder) {
  const api::QueryParams params = api::parse_query("limit=2&order=asc&&include%5B%5D=a.b&include%5B%5D=c&flag&after=msg%5F1");
  EXPECT_EQ(params, (api::QueryParams{{"limit", "2"}, {"order", "asc"}, {"include[]", "a.b"}, {"include[]", "c"}, {"flag", ""},
                                      {"after", "msg_1"}}));
  api::HttpRequest req;
  req.query = params;
  EXPECT_EQ(req.query_values("include[]"), (std::vector<std::string>{"a.b", "c"}));
  EXPECT_TRUE(req.query_values("before").empty());
  EXPECT_TRUE(api::parse_query("").empty());
}

}  // namespace
