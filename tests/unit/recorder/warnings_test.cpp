// The recorder's warnings are one table of texts: each is well formed, and formats as the trace and
// the launcher have always said it.
#include "recorder/warnings.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>

namespace cutrace::recorder {
namespace {

// The names the recorder's code passes; a template that names another would print it raw.
const std::set<std::string> kFieldNames = {"count", "who",    "uid",     "cause",  "names", "range",
                                           "driver", "libraries", "library", "reason", "why", "modes", "spans", "calls"};

TEST(WarningsTest, EveryTemplateIsWellFormed) {
  for (size_t i = 0; i < size_t(Warning::kCount); ++i) {
    const std::string_view text = warning_template(Warning(i));
    SCOPED_TRACE("warning " + std::to_string(i) + ": " + std::string(text));
    ASSERT_FALSE(text.empty());
    // One line each: the launcher reads the recorder's report line by line.
    EXPECT_EQ(text.find('\n'), std::string_view::npos);
    for (size_t at = 0; at < text.size(); ++at) {
      if (text[at] == '{') {
        const size_t close = text.find('}', at);
        ASSERT_NE(close, std::string_view::npos);
        EXPECT_TRUE(kFieldNames.count(std::string(text.substr(at + 1, close - at - 1))))
            << text.substr(at, close - at + 1);
        at = close;
      } else if (text[at] == '[') {
        const size_t close = text.find(']', at);
        ASSERT_NE(close, std::string_view::npos);
        const std::string_view choice = text.substr(at + 1, close - at - 1);
        EXPECT_EQ(std::count(choice.begin(), choice.end(), '|'), 1) << choice;
        at = close;
      } else {
        EXPECT_TRUE(text[at] != '}' && text[at] != ']' && text[at] != '|') << "stray at " << at;
      }
    }
  }
}

TEST(WarningsTest, OneAndManyChooseTheirWords) {
  EXPECT_EQ(warning_text(Warning::kProcessesCutOff, 1),
            "1 process the command started was still running when it exited and recording stopped (--wait "
            "primary): calls made after that are not in the trace; --wait all waits for them");
  EXPECT_EQ(warning_text(Warning::kProcessesCutOff, 3),
            "3 processes the command started were still running when it exited and recording stopped (--wait "
            "primary): calls made after that are not in the trace; --wait all waits for them");
  EXPECT_EQ(warning_text(Warning::kUnlaunchedKernels, 2, {{"who", "process 7 (app)"}, {"libraries", ""}}),
            "process 7 (app): the GPU ran 2 kernels of it, but no call that launches kernels was recorded: they came "
            "through a route cutrace does not see");
  EXPECT_EQ(warning_text(Warning::kUnwrappedExports, 1, {{"library", "/x/libcublas.so"}, {"names", "cublasNew"}}),
            "/x/libcublas.so exports 1 function this cutrace has no wrapper for (the library is newer than the one "
            "cutrace was built from), so calls to it are not recorded: cublasNew");
  // A count of zero reads as many, as "0 processes" does.
  EXPECT_EQ(warning_text(Warning::kNoGpuActivity, 0, {{"who", "w"}, {"reason", "r"}}),
            "w have no GPU activity in the trace, only their API calls: r");
}

TEST(WarningsTest, AMissingFieldShowsItsName) {
  EXPECT_EQ(warning_text(Warning::kNoPythonFrames, 1, {{"who", "process 1"}}), "process 1: {reason}");
}

TEST(WarningsTest, ProcessesAreNamedAndListed) {
  EXPECT_EQ(process_name(42, "python3 train.py"), "process 42 (python3 train.py)");
  EXPECT_EQ(process_name(42, ""), "process 42");
  EXPECT_EQ(processes_name({{42, "app"}}), "process 42 (app)");
  EXPECT_EQ(processes_name({{1, "a"}, {2, "b"}}), "2 processes (1, 2)");
  std::vector<NamedProcess> nine;
  for (uint32_t pid = 1; pid <= 9; ++pid) nine.push_back({pid, "x"});
  EXPECT_EQ(processes_name(nine), "9 processes (1, 2, 3, 4, 5, 6, 7, 8, ...)");
  EXPECT_EQ(listed({"a"}), "a");
  EXPECT_EQ(listed({"a", "b"}), "a and b");
  EXPECT_EQ(listed({"a", "b", "c"}), "a, b and c");
}

}  // namespace
}  // namespace cutrace::recorder
