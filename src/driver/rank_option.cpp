// The `--ranks SET` option (see rank_option.hpp).
#include "driver/rank_option.hpp"

#include <numeric>
#include <ostream>

#include "driver/session.hpp"
#include "support/rank_set.hpp"

namespace shardc::driver {

std::optional<std::vector<std::int64_t>> parse_ranks_option(const std::string& set,
                                                            std::int64_t world, DiagFormat format,
                                                            std::ostream& err,
                                                            const std::string& context) {
  std::string error;
  const auto ranks = RankSet::parse(set, world, error);
  if (!ranks) {
    print_error(err, format, DiagCode::EUsage, "--ranks '" + set + "': " + error + context,
                "a rank set such as 0-7,64,100-131:4 (docs/commands.md \"Rank sets\"), every "
                "rank below the world size " +
                    std::to_string(world));
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
