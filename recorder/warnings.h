#pragma once
// Every warning the recorder writes into a trace (its "warning.N" metadata) and says before the run's
// summary, as one table of texts (warnings.cpp), apart from the logic that decides to give them: a
// reviewer reads and words them in one place, and a test checks each one's placeholders.
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

namespace cutrace::recorder {

enum class Warning : uint8_t {
  kCutOff,
  kForeignShim,
  kUnreached,
  kUnreachedAfterUserSwitch,
  kUnreachedOverflow,
  kProcessesCutOff,
  kUnwrappedEntryPoints,
  kNoCaptureRange,
  kStaticRuntimeWithoutDriver,
  kStaticRuntimeDriverSilent,
  kStaticRuntimeDriverUntraced,
  kUnlaunchedKernels,
  kNoCuda,
  kOtherMajorVersion,
  kUnwrappedExports,
  kNoGpuActivity,
  kNoPythonFrames,
  kPytorchNotStarted,
  kPytorchNoProcess,
  kGpuRecordsDropped,
  kCpuSamplesLost,
  kTimerSamplesSkipped,
  kUntracedCpuSamples,
  kCallsNotReturned,
  kCount
};

struct WarningField {
  std::string_view name;
  std::string_view value;
};

// The text of warning `w`. In its template, "{name}" is the field of that name ("{count}" is `count`
// itself) and "[one|many]" the first choice when `count` is 1, else the second: "[was|were]".
// A field the template names but `fields` lacks is left as "{name}", which the tests catch.
std::string warning_text(Warning w, uint64_t count, std::initializer_list<WarningField> fields = {});

// The template, for the tests.
std::string_view warning_template(Warning w);

// "process 42 (python3 train.py)", or "process 42" when the command is unknown.
std::string process_name(uint32_t pid, std::string_view command);

// One process as process_name(), several as "3 processes (41, 42, 43)", naming at most 8.
struct NamedProcess {
  uint32_t pid;
  std::string_view command;
};
std::string processes_name(const std::vector<NamedProcess>& processes);

// "a", "a and b", "a, b and c".
std::string listed(const std::vector<std::string>& names);

}  // namespace cutrace::recorder
