// csrc/settings: one rule for every environment variable.
#include <cstdlib>
#include <stdexcept>
#include <string>

#include <gtest/gtest.h>

#include "settings/settings.h"

namespace ttpu::settings {
namespace {

constexpr const char* kVar = "TTPU_SETTINGS_TEST";

class SettingsTest : public ::testing::Test {
 protected:
  void TearDown() override { ::unsetenv(kVar); }
  static void set(const char* v) { ::setenv(kVar, v, 1); }
};

TEST_F(SettingsTest, UnsetOrEmptyGivesTheDefault) {
  EXPECT_TRUE(flag(kVar, true));
  EXPECT_EQ(integer(kVar, 7, 0, 10), 7);
  EXPECT_EQ(choice(kVar, "a", {"a", "b"}), "a");
  EXPECT_FALSE(text(kVar).has_value());
  set("");
  EXPECT_FALSE(flag(kVar, false));
  EXPECT_EQ(integer(kVar, 7, 0, 10), 7);
  EXPECT_EQ(choice(kVar, "b", {"a", "b"}), "b");
  EXPECT_EQ(text(kVar).value(), "");
}

TEST_F(SettingsTest, FlagsTakeOneSpellingOfEach) {
  for (const char* on : {"1", "true", "on", "yes", "TRUE", "Yes"}) {
    set(on);
    EXPECT_TRUE(flag(kVar, false)) << on;
  }
  for (const char* off : {"0", "false", "off", "no", "False", "NO"}) {
    set(off);
    EXPECT_FALSE(flag(kVar, true)) << off;
  }
  set("2");
  try {
    flag(kVar, false);
    FAIL() << "2 accepted as a flag";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()),
              "TTPU_SETTINGS_TEST='2' is not valid: expected 1, true, on, yes or 0, false, "
              "off, no");
  }
}

TEST_F(SettingsTest, IntegersAreDecimalWithinBounds) {
  set("12");
  EXPECT_EQ(integer(kVar, 0, 1, 12), 12);
  for (const char* bad : {"13", "0", "-1", "4x", "x", " 4", "99999999999999999999"}) {
    set(bad);
    EXPECT_THROW(integer(kVar, 5, 1, 12), std::invalid_argument) << bad;
  }
}

TEST_F(SettingsTest, ChoicesAreExactWords) {
  set("fused");
  EXPECT_EQ(choice(kVar, "strict", {"strict", "fused"}), "fused");
  set("Fused");
  EXPECT_THROW(choice(kVar, "strict", {"strict", "fused"}), std::invalid_argument);
}

}  // namespace
}  // namespace ttpu::settings
