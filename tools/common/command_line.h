// The one command-line scanner of `cutrace profile`, `info`, `stats`, `export` and the recorder.
//
// Each command describes its options in a table (OptionSpec) and walks the words the scanner
// classifies, keeping its own messages. The spellings are nsys's: `-o NAME`, `--output NAME`,
// `--output=NAME`, and switches that take an optional true or false (`-f`, `-f true`,
// `--force-overwrite=false`) where only those two words are taken as the value, so that
// `cutrace profile -f ./app` runs ./app. General-purpose parsers (CLI11 2.1 in Debian 12 was tried)
// take a switch's value only when attached with `=`, and would run a program named "true".
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace cutrace::cli {

enum class Arity {
  kNone,    // -q: never a value
  kValue,   // -o NAME, --output NAME, --output=NAME (and -oNAME where Rules::short_values_attach)
  kSwitch,  // -f alone is true; -f true|false (any case) or --force-overwrite=false
};

struct OptionSpec {
  char short_name;  // 0: the long spelling only
  std::string_view long_name;
  Arity arity;
  int id;  // the command's own enumerator
};

// Where commands differ in how they read their words.
struct Rules {
  // `-ofile` is `-o file` (nsys profile); otherwise it is an unknown option.
  bool short_values_attach = false;
  // The first operand ends the options: it and all after it are the command to run.
  bool operand_ends_options = false;
  // A word such as yes, no, on or off after a switch is taken as its (wrong) value, so the message
  // names the switch instead of the program failing to run a command called "yes".
  bool catch_mistyped_switch_values = false;
  // An empty value (`-o ""`, `--output=`) is a missing one.
  bool empty_value_is_missing = false;
};

// One word of the command line, classified.
struct Arg {
  enum class Kind { kOption, kUnknownOption, kOperand };
  Kind kind = Kind::kOperand;
  const OptionSpec* spec = nullptr;  // kOption: the row that matched
  std::string word;                  // the whole word as typed
  std::string spelled;               // "-o" or "--output": the option as named, for messages
  char short_name = 0;               // of the word, matched or not
  std::string long_name;             // of the word, without "--" and "=value"
  bool has_attached = false;         // --name=value, or -Xvalue
  std::string attached;
};

bool equals_ignoring_case(std::string_view a, std::string_view b);
bool is_switch_word(std::string_view word);  // true or false, in any case
// The items of a comma-separated option value, in order, empty ones included (each caller skips or
// refuses them): "a,,b" is {"a", "", "b"}.
std::vector<std::string> comma_items(std::string_view list);

class Scanner {
 public:
  Scanner(int argc, const char* const* argv, std::span<const OptionSpec> options, Rules rules = {});

  // Classifies the next word into `arg`; false when none is left. After `--` (which is consumed and
  // not returned), and after the first operand where the rules say so, every word is an operand.
  bool next(Arg& arg);

  // A kValue option's value: attached, or the next word. False when there is none.
  bool value(const Arg& arg, std::string& out);
  // A kSwitch option's value: an attached word, or a following true or false; alone, true. False
  // when the word given is neither, with that word in `bad`.
  bool switch_value(const Arg& arg, bool& out, std::string& bad);
  // Takes the next word if `accept` says so (an option of another tool whose value would otherwise
  // be read as the command); true when taken.
  template <typename Accept>
  bool take_next_if(Accept&& accept, std::string* out = nullptr) {
    if (index_ >= argc_ || !accept(std::string_view(argv_[index_]))) return false;
    if (out) *out = argv_[index_];
    taken_.emplace_back(argv_[index_++]);
    return true;
  }

  bool options_ended() const { return options_ended_; }
  // The words not yet read: with Rules::operand_ends_options, the command after the first operand.
  std::vector<std::string> rest() const;
  // Every option word and value read so far, as typed (the options a trace records).
  const std::vector<std::string>& taken() const { return taken_; }

 private:
  int argc_;
  const char* const* argv_;
  std::span<const OptionSpec> options_;
  Rules rules_;
  int index_ = 1;
  bool options_ended_ = false;
  std::vector<std::string> taken_;
};

}  // namespace cutrace::cli
