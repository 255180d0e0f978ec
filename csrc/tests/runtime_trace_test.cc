// The runtime's profiler recorder (runtime/trace.h) without a plugin: the
// on/off flag, record order, and queue order moving a program's start to the
// end of the one before it on its device.
#include <gtest/gtest.h>

#include "runtime/trace.h"

namespace trace = ttpu::runtime::trace;

namespace {

trace::Record exec(int device, int64_t start, int64_t end, const char* name) {
  trace::Record r;
  r.kind = trace::Kind::kExecute;
  r.device = device;
  r.name = name;
  r.start_ns = r.queued_ns = start;
  r.end_ns = end;
  return r;
}

}  // namespace

TEST(Trace, OffUnlessStarted) {
  EXPECT_FALSE(trace::active());
  trace::start();
  EXPECT_TRUE(trace::active());
  EXPECT_TRUE(trace::stop().empty());
  EXPECT_FALSE(trace::active());
}

TEST(Trace, QueuedProgramsStartWhenThePreviousOneEnds) {
  trace::start();
  trace::add(exec(0, 100, 200, "a"));
  trace::add(exec(0, 150, 300, "b"));  // waited behind a: starts at 200
  trace::add(exec(1, 160, 260, "c"));  // another device: unchanged
  trace::add(exec(0, 400, 450, "d"));  // queue empty when enqueued: unchanged
  trace::Record copy;
  copy.kind = trace::Kind::kHostToDevice;
  copy.start_ns = 120;
  copy.end_ns = 130;
  copy.bytes = 64;
  trace::add(copy);  // copies are not programs: unchanged
  auto got = trace::stop();
  ASSERT_EQ(got.size(), 5u);
  EXPECT_EQ(got[0].name, "a");
  EXPECT_EQ(got[0].start_ns, 100);
  EXPECT_EQ(got[1].name, "b");
  EXPECT_EQ(got[1].start_ns, 200);
  EXPECT_EQ(got[1].queued_ns, 150);
  EXPECT_EQ(got[2].start_ns, 160);
  EXPECT_EQ(got[3].start_ns, 400);
  EXPECT_EQ(got[4].start_ns, 120);
  EXPECT_EQ(got[4].bytes, 64);
}

TEST(Trace, OutOfOrderCompletionKeepsItsEnqueueTime) {
  trace::start();
  trace::add(exec(0, 100, 500, "long"));
  trace::add(exec(0, 150, 300, "short"));  // ended before "long": ran beside it
  auto got = trace::stop();
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[1].start_ns, 150);
}

TEST(Trace, CorrelationOfTheInnermostHostOp) {
  trace::start();
  trace::push_correlation(7);
  trace::push_correlation(9);
  trace::add(exec(0, 1, 2, "inner"));
  trace::pop_correlation();
  trace::add(exec(0, 3, 4, "outer"));
  trace::pop_correlation();
  trace::add(exec(0, 5, 6, "none"));
  auto got = trace::stop();
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0].correlation, 9u);
  EXPECT_EQ(got[1].correlation, 7u);
  EXPECT_EQ(got[2].correlation, 0u);
}

TEST(Trace, ANewSessionDropsWhatAnOldOneLeft) {
  trace::start();
  trace::add(exec(0, 1, 2, "old"));
  trace::start();
  trace::add(exec(0, 3, 4, "new"));
  auto got = trace::stop();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].name, "new");
  EXPECT_TRUE(trace::stop().empty());
}
