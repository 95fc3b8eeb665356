// The experiment journal's reader (src/tune/journal.h) against damaged files: a torn last
// line is dropped, damage before it is an error naming the line, and a line nested deeper
// than any event is damage, not a stack overflow.

#include <gtest/gtest.h>

#include <string>

#include "tune/journal.h"
#include "../../common/test_util.h"

namespace {

using prism::tune::internal::Journal;
using prism_test::ErrorOf;
using prism_test::TempDir;
using prism_test::WriteText;

TEST(Journal, ATornLastLineIsDroppedAndEarlierDamageIsNamed) {
  TempDir dir;
  const std::string file = dir / "experiment_state.jsonl";
  WriteText(file, "{\"kind\": \"fit_start\"}\n{\"kind\": \"res");
  auto events = Journal::Read(file);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0]["kind"], "fit_start");

  WriteText(file, "{\"kind\": \"fit_start\"}\n{\"kind\": \"res\n{\"kind\": \"fit_end\"}\n");
  std::string error = ErrorOf([&] { Journal::Read(file); });
  EXPECT_NE(error.find("damaged at line 2"), std::string::npos) << error;
}

TEST(Journal, ALineNestedDeeperThanAnyEventIsDamage) {
  TempDir dir;
  const std::string file = dir / "experiment_state.jsonl";
  const std::string deep = "{\"x\": " + std::string(100000, '[') + std::string(100000, ']') + "}";
  WriteText(file, "{\"kind\": \"fit_start\"}\n" + deep + "\n{\"kind\": \"fit_end\"}\n");
  std::string error = ErrorOf([&] { Journal::Read(file); });
  EXPECT_NE(error.find("damaged at line 2"), std::string::npos) << error;
  WriteText(file, "{\"kind\": \"fit_start\"}\n" + deep + "\n");  // the last line: torn
  EXPECT_EQ(Journal::Read(file).size(), 1u);
}

TEST(Journal, OpeningCutsATornLastLineSoLaterEventsStartTheirOwn) {
  TempDir dir;
  const std::string file = dir / "experiment_state.jsonl";
  WriteText(file, "{\"e\": \"experiment\"}\n{\"e\": \"res");  // a full disk mid-write
  for (int restore = 0; restore < 3; ++restore) {  // a job requeued three times
    Journal journal(file);
    journal.Append({{"e", "restore"}, {"n", restore}});
  }
  auto events = Journal::Read(file);
  ASSERT_EQ(events.size(), 4u);
  EXPECT_EQ(events[3]["n"], 2);
  EXPECT_EQ(prism_test::ReadText(file).find("res{"), std::string::npos);
}

// Found by the journal's fuzz target (tests/fuzz/corpus/journal/regress-*): a whole event
// that lacks only its '\n' is read, so opening the journal must keep it, not cut it as torn.
TEST(Journal, AWholeLastEventWithoutItsNewlineIsKeptWhenOpened) {
  TempDir dir;
  const std::string file = dir / "experiment_state.jsonl";
  WriteText(file, "{\"e\": \"experiment\"}\n{\"e\": \"result\", \"n\": 1}");
  ASSERT_EQ(Journal::Read(file).size(), 2u);
  {
    Journal journal(file);
    journal.Append({{"e", "restore"}});
  }
  auto events = Journal::Read(file);
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[1]["n"], 1);
  EXPECT_EQ(events[2]["e"], "restore");
}

TEST(Journal, HeldEventsAreWrittenTogetherAtReleaseOrSyncInOrder) {
  TempDir dir;
  const std::string file = dir / "experiment_state.jsonl";
  {
    Journal journal(file);
    journal.Append({{"e", "experiment"}});
    journal.Hold();
    journal.Append({{"e", "result"}, {"n", 1}});
    journal.Append({{"e", "result"}, {"n", 2}});
    EXPECT_EQ(Journal::Read(file).size(), 1u);  // held
    journal.Release();
    auto events = Journal::Read(file);
    ASSERT_EQ(events.size(), 3u);
    EXPECT_EQ(events[2]["n"], 2);
    journal.Append({{"e", "status"}});  // no longer held
    EXPECT_EQ(Journal::Read(file).size(), 4u);
    journal.Hold();
    journal.Append({{"e", "result"}, {"n", 3}});
    journal.Sync(true);  // writes what is held first
    EXPECT_EQ(Journal::Read(file).back()["n"], 3);
    journal.Hold();
    journal.Append({{"e", "fit_end"}});
  }  // closing writes what is held
  EXPECT_EQ(Journal::Read(file).back()["e"], "fit_end");
}

TEST(Journal, OneWriterAtATime) {
  TempDir dir;
  const std::string file = dir / "experiment_state.jsonl";
  {
    Journal writer(file);
    std::string error = ErrorOf([&] { Journal second(file); });
    EXPECT_NE(error.find("held by another process"), std::string::npos) << error;
  }
  Journal after(file);  // the first writer is gone
  after.Append({{"e", "experiment"}});
  EXPECT_EQ(Journal::Read(file).size(), 1u);
}

}  // namespace
