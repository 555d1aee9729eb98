// x-request-id values: a sane client id is kept, anything that could forge a log line or a header
// is replaced by a fresh id.
#include "server/request_id.h"

#include <gtest/gtest.h>

#include <regex>
#include <vector>

using inferlab::api::request_id_for;

TEST(RequestId, KeepsASaneClientIdAndReplacesTheRest) {
  EXPECT_EQ(request_id_for("trace-42.a:b_c"), "trace-42.a:b_c");
  EXPECT_EQ(request_id_for(std::string(128, 'a')), std::string(128, 'a'));
  const std::regex fresh("req_[0-9a-f]{24}");
  for (const std::string& bad : std::vector<std::string>{"", "has space", "line\nbreak", "semi;colon", std::string(129, 'a'), "caf\xc3\xa9"})
    EXPECT_TRUE(std::regex_match(request_id_for(bad), fresh)) << bad;
  EXPECT_NE(request_id_for(""), request_id_for(""));
}
