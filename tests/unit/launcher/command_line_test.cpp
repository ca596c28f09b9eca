// The command-line scanner every cutrace program uses: how words are classified under each rule,
// and which following words a switch or a value option takes.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/command_line.h"

namespace cutrace::cli {
namespace {

constexpr OptionSpec kOptions[] = {
    {'o', "output", Arity::kValue, 1},
    {'f', "force-overwrite", Arity::kSwitch, 2},
    {'q', "quiet", Arity::kNone, 3},
};

struct Words {
  explicit Words(std::vector<std::string> words) : storage(std::move(words)) {
    argv.push_back("cmd");
    for (const std::string& w : storage) argv.push_back(w.c_str());
  }
  std::vector<std::string> storage;
  std::vector<const char*> argv;
  int argc() const { return int(argv.size()); }
};

TEST(CommandLine, ASwitchTakesOnlyTrueOrFalseAsItsValue) {
  Words w({"-f", "./app", "--force-overwrite", "FALSE", "-f=true"});
  Scanner s(w.argc(), w.argv.data(), kOptions);
  Arg arg;
  bool value = false;
  std::string bad;
  ASSERT_TRUE(s.next(arg));
  EXPECT_EQ(arg.spec->id, 2);
  EXPECT_TRUE(s.switch_value(arg, value, bad));
  EXPECT_TRUE(value);
  ASSERT_TRUE(s.next(arg));
  EXPECT_EQ(arg.kind, Arg::Kind::kOperand);
  EXPECT_EQ(arg.word, "./app");
  ASSERT_TRUE(s.next(arg));
  EXPECT_TRUE(s.switch_value(arg, value, bad));
  EXPECT_FALSE(value);
  // `-f=true` is -f with the attached text "=true": short options never take `=`.
  ASSERT_TRUE(s.next(arg));
  EXPECT_EQ(arg.kind, Arg::Kind::kUnknownOption);
  EXPECT_FALSE(s.next(arg));
  EXPECT_EQ(s.taken(), (std::vector<std::string>{"-f", "--force-overwrite", "FALSE", "-f=true"}));
}

TEST(CommandLine, AMistypedSwitchValueIsNamedWhereTheRulesAskForIt) {
  Words w({"-f", "yes", "app"});
  Arg arg;
  bool value = false;
  std::string bad;
  Scanner strict(w.argc(), w.argv.data(), kOptions, {.catch_mistyped_switch_values = true});
  ASSERT_TRUE(strict.next(arg));
  EXPECT_FALSE(strict.switch_value(arg, value, bad));
  EXPECT_EQ(bad, "yes");
  Scanner lenient(w.argc(), w.argv.data(), kOptions);
  ASSERT_TRUE(lenient.next(arg));
  EXPECT_TRUE(lenient.switch_value(arg, value, bad));
  ASSERT_TRUE(lenient.next(arg));
  EXPECT_EQ(arg.word, "yes");
}

TEST(CommandLine, ValuesComeAttachedOrAsTheNextWord) {
  Words w({"--output=a", "-o", "b", "-oc", "--output", ""});
  std::string value;
  Arg arg;
  Scanner s(w.argc(), w.argv.data(), kOptions, {.short_values_attach = true, .empty_value_is_missing = true});
  for (const char* expected : {"a", "b", "c"}) {
    ASSERT_TRUE(s.next(arg));
    ASSERT_EQ(arg.kind, Arg::Kind::kOption);
    EXPECT_TRUE(s.value(arg, value));
    EXPECT_EQ(value, expected);
  }
  ASSERT_TRUE(s.next(arg));
  EXPECT_FALSE(s.value(arg, value));  // an empty word is no value under these rules
  // Without short_values_attach, -oc is no option at all; a flag never takes attached text.
  Words v({"-oc", "-qx", "--quiet=1"});
  Scanner plain(v.argc(), v.argv.data(), kOptions);
  ASSERT_TRUE(plain.next(arg));
  EXPECT_EQ(arg.kind, Arg::Kind::kUnknownOption);
  ASSERT_TRUE(plain.next(arg));
  EXPECT_EQ(arg.kind, Arg::Kind::kUnknownOption);
  EXPECT_EQ(arg.spelled, "-q");
  ASSERT_TRUE(plain.next(arg));
  EXPECT_EQ(arg.kind, Arg::Kind::kOption);
  EXPECT_TRUE(arg.has_attached);
  EXPECT_EQ(arg.attached, "1");
}

TEST(CommandLine, TheFirstOperandOrADoubleDashEndsTheOptionsWhereTheRulesSaySo) {
  Words w({"-q", "prog", "-q", "--", "x"});
  Arg arg;
  Scanner command(w.argc(), w.argv.data(), kOptions, {.operand_ends_options = true});
  ASSERT_TRUE(command.next(arg));
  EXPECT_FALSE(command.next(arg));
  EXPECT_EQ(command.rest(), (std::vector<std::string>{"prog", "-q", "--", "x"}));

  // Elsewhere options and operands mix, and after `--` everything is an operand, even "-q".
  Scanner mixed(w.argc(), w.argv.data(), kOptions);
  std::vector<std::string> operands;
  int options = 0;
  while (mixed.next(arg)) {
    if (arg.kind == Arg::Kind::kOperand) operands.push_back(arg.word);
    else ++options;
  }
  EXPECT_EQ(options, 2);
  EXPECT_EQ(operands, (std::vector<std::string>{"prog", "x"}));
  Words dashed({"--", "-q", "-"});
  Scanner after(dashed.argc(), dashed.argv.data(), kOptions);
  operands.clear();
  while (after.next(arg)) operands.push_back(arg.word);
  EXPECT_EQ(operands, (std::vector<std::string>{"-q", "-"}));
}

TEST(CommandLine, CommaItemsKeepTheirOrderAndTheEmptyOnes) {
  EXPECT_EQ(comma_items("sqlite"), (std::vector<std::string>{"sqlite"}));
  EXPECT_EQ(comma_items("a,,b,"), (std::vector<std::string>{"a", "", "b", ""}));
  EXPECT_EQ(comma_items(""), (std::vector<std::string>{""}));
}

}  // namespace
}  // namespace cutrace::cli
