// numel() of a Shape (contract §3: the front end bounds the product below 2^62).
#include "shardc/shape.hpp"

namespace shardc {

std::int64_t numel(const Shape& shape) {
  std::int64_t n = 1;
  for (std::int64_t extent : shape) n *= extent;
  return n;
}

}  // namespace shardc
