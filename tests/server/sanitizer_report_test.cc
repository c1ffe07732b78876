// SanitizerReport decides whether a report in a spawned server's or client's
// output fails the test (scripts/test-sanitized): each sanitizer's first
// line is found, ordinary logs are not.

#include <gtest/gtest.h>

#include <string>

#include "tests/server/server_process.h"

namespace linserve {
namespace {

TEST(SanitizerReportTest, FindsEachSanitizersReportFromItsFirstLine) {
  struct Case {
    std::string report;
    std::string first_line;
  };
  const Case cases[] = {
      {"==12==ERROR: AddressSanitizer: heap-use-after-free on address 0x6020\n    #0 0x4f in f\n",
       "==12==ERROR: AddressSanitizer: heap-use-after-free"},
      {"==12==ERROR: LeakSanitizer: detected memory leaks\n\nDirect leak of 8 byte(s)\n",
       "==12==ERROR: LeakSanitizer: detected memory leaks"},
      {"==================\nWARNING: ThreadSanitizer: data race (pid=12)\n  Write of size 8\n",
       "WARNING: ThreadSanitizer: data race"},
      {"server/scheduling/scheduler.cc:42:7: runtime error: signed integer overflow\n",
       "server/scheduling/scheduler.cc:42:7: runtime error: signed integer overflow"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.first_line);
    const std::string found =
        SanitizerReport("{\"event\":\"serving\"}\n" + c.report + "{\"event\":\"stopped\"}\n");
    EXPECT_EQ(found.substr(0, c.first_line.size()), c.first_line);
    EXPECT_NE(found.find("stopped"), std::string::npos) << "the report runs to the end: " << found;
  }
}

TEST(SanitizerReportTest, OrdinaryLogsAreNoReport) {
  EXPECT_EQ(SanitizerReport(""), "");
  EXPECT_EQ(SanitizerReport("{\"event\":\"generate\",\"error\":\"INVALID_ARGUMENT: top_p\"}\n"
                            "{\"event\":\"shutting_down\"}\n"),
            "");
}

}  // namespace
}  // namespace linserve
