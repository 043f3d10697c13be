#include <doctest/doctest.h>

#include <memory>
#include <string>
#include <vector>

#include "support/large_buffer.hpp"

TEST_CASE("reserve_large reserves the elements asked for, in vectors and strings") {
  std::vector<double> values;
  shardc::reserve_large(values, std::size_t{3} << 20);  // 24 MiB: advised, not touched
  CHECK(values.capacity() >= (std::size_t{3} << 20));
  CHECK(values.empty());
  std::string text;
  shardc::reserve_large(text, 100);  // under 2 MiB: the hint is a no-op
  CHECK(text.capacity() >= 100);
}

TEST_CASE("allocate_large returns writable storage of the size asked for") {
  const std::size_t bytes = std::size_t{5} << 20;
  std::unique_ptr<std::byte[]> storage = shardc::allocate_large(bytes);
  REQUIRE(storage != nullptr);
  storage[0] = std::byte{1};
  storage[bytes - 1] = std::byte{2};
  CHECK(storage[bytes - 1] == std::byte{2});
}

TEST_CASE("leave_to_exit takes the object and never destroys it") {
  struct Counted {
    int* destroyed;
    ~Counted() { ++*destroyed; }
  };
  static int destroyed = 0;
  std::unique_ptr<Counted> owned(new Counted{&destroyed});
  Counted* object = owned.get();
  shardc::leave_to_exit(owned);
  CHECK(owned == nullptr);
  CHECK(destroyed == 0);
  CHECK(object->destroyed == &destroyed);
  std::unique_ptr<Counted> empty;
  shardc::leave_to_exit(empty);  // nothing to keep
  CHECK(empty == nullptr);
}
