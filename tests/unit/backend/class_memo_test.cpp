#include "backend/class_memo.hpp"

#include <doctest/doctest.h>

#include <string>

using shardc::backend::ClassMemo;

namespace {
struct Text {
  std::string text;
};
}  // namespace

TEST_CASE("class memo renders a class once and hands out the stored value") {
  ClassMemo<Text> memo(1024);
  int renders = 0;
  const auto render = [&] {
    ++renders;
    return Text{"abc"};
  };
  const auto first = memo.get({0, 1}, render);
  const auto second = memo.get({0, 1}, render);
  CHECK(renders == 1);
  CHECK(first == second);
  CHECK(memo.get({0, 2}, render)->text == "abc");
  CHECK(renders == 2);
}

TEST_CASE("class memo beyond its budget renders without storing") {
  ClassMemo<Text> memo(5);
  int renders = 0;
  const auto render = [&] {
    ++renders;
    return Text{"abcd"};
  };
  CHECK(memo.get({1}, render)->text == "abcd");  // stored: 4 of 5 bytes
  CHECK(memo.get({2}, render)->text == "abcd");  // would exceed: not stored
  CHECK(memo.get({2}, render)->text == "abcd");
  CHECK(memo.get({1}, render)->text == "abcd");
  CHECK(renders == 3);
}
