// The response side of the server: stop strings held back and cut as text streams.
#include <gtest/gtest.h>

#include "server/completion.h"

namespace {

TEST(StopMatcher, StopsBeforeTheStopStringAndHoldsBackPossiblePrefixes) {
  inferlab::api::StopMatcher stop({"END", "\n\n"});
  EXPECT_EQ(stop.feed("Hello E"), "Hello ");  // "E" could start END
  EXPECT_EQ(stop.feed("N"), "");
  EXPECT_EQ(stop.feed("Dless"), "");
  EXPECT_TRUE(stop.hit());
  EXPECT_EQ(stop.finish(), "");
}

TEST(StopMatcher, ReleasesHeldTextWhenItTurnsOutNotToBeAStop) {
  inferlab::api::StopMatcher stop({"END"});
  EXPECT_EQ(stop.feed("abcE"), "abc");
  EXPECT_EQ(stop.feed("Nx"), "ENx");
  EXPECT_EQ(stop.feed("EN"), "");
  EXPECT_FALSE(stop.hit());
  EXPECT_EQ(stop.finish(), "EN");
}

TEST(StopMatcher, FindsAStopSplitAcrossManyPieces) {
  inferlab::api::StopMatcher stop({"<|stop|>"});
  std::string shown;
  for (std::string piece : {"x<", "|", "st", "op", "|", ">tail"}) shown += stop.feed(piece);
  EXPECT_EQ(shown, "x");
  EXPECT_TRUE(stop.hit());
}

TEST(StopMatcher, NamesTheStopStringThatComesFirstInTheText) {
  inferlab::api::StopMatcher stop({"world", "lo w"});
  EXPECT_TRUE(stop.matched().empty());
  EXPECT_EQ(stop.feed("hello world"), "hel");  // "lo w" starts before "world"
  EXPECT_TRUE(stop.hit());
  EXPECT_EQ(stop.matched(), "lo w");
}

TEST(StopMatcher, WithoutStopsEverythingPassesThrough) {
  inferlab::api::StopMatcher stop({});
  EXPECT_EQ(stop.feed("abc"), "abc");
  EXPECT_EQ(stop.finish(), "");
}

}  // namespace
