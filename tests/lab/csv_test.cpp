// The RFC 4180 reader and writer.
#include <gtest/gtest.h>

#include "inferlab/lab/csv.h"

using namespace inferlab::lab;

TEST(Csv, BlankLinesAndBom) {
  auto rows = parse_csv("\xEF\xBB\xBF" "a,b\n\nc,d\r\n", "x");
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].fields[0], "a");
  EXPECT_EQ(rows[1].fields[1], "d");
  EXPECT_EQ(rows[1].line, 3u);
  EXPECT_EQ(csv_field("plain"), "plain");
  EXPECT_EQ(csv_field("a,b"), "\"a,b\"");
  EXPECT_EQ(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
}
