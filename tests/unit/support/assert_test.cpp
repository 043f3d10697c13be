// Tests for src/support/assert.hpp: SHARDC_ASSERT is on in every build
// type and names the file, line, condition and message.
#include <doctest/doctest.h>

#include <string>

#include "support/assert.hpp"

TEST_CASE("SHARDC_ASSERT passes silently and throws InternalError with file:line on failure") {
  CHECK_NOTHROW(SHARDC_ASSERT(1 + 1 == 2, "arithmetic"));
  std::string what;
  try {
    const int shards = 3;
    SHARDC_ASSERT(shards == 4, "expected " + std::to_string(4) + " shards");
  } catch (const shardc::InternalError& e) {
    what = e.what();
  }
  CHECK(what.find("assert_test.cpp:") != std::string::npos);
  CHECK(what.find(": shards == 4: expected 4 shards") != std::string::npos);
}
