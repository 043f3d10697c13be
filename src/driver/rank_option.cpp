// The `--ranks SET` option (see rank_option.hpp).
#include "driver/rank_option.hpp"

#include <numeric>
#include <ostream>

#include "driver/session.hpp"
#include "support/rank_set.hpp"

namespace shardc::driver {

std::optional<std::vector<std::int64_t>> parse_ranks_option(const std::string& set,
                                                            std::int64_t world, std::ostream& err,
                                                            const std::string& context) {
  std::string error;
  const auto ranks = RankSet::parse(set, world, error);
  if (!ranks) {
    print_error(err, DiagCode::EUsage, "--ranks '" + set + "': " + error + context);
    return std::nullopt;
  }
  return ranks->expand();
}

std::vector<std::int64_t> all_ranks(std::int64_t world) {
  std::vector<std::int64_t> all(static_cast<std::size_t>(world));
  std::iota(all.begin(), all.end(), std::int64_t{0});
  return all;
}

}  // namespace shardc::driver
