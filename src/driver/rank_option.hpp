// The `--ranks SET` option shared by compile, memory, reshard and verify (internal to
// src/driver).
#pragma once

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "shardc/driver.hpp"

namespace shardc::driver {

/// The ranks `--ranks SET` names (RankSet grammar, docs/commands.md "Rank sets":
/// "0-7,64,100-131:4"; every rank < world), expanded in increasing order without duplicates. On a
/// bad set, prints the usage error E-USAGE "--ranks 'SET': <why><context>" to `err` in
/// `format` (the command's diagnostics format) and returns nullopt (the caller exits 2).
/// `context` is appended to the reason, e.g. " (plan B has 64 ranks)".
std::optional<std::vector<std::int64_t>> parse_ranks_option(const std::string& set,
                                                            std::int64_t world, DiagFormat format,
                                                            std::ostream& err,
                                                            const std::string& context = "");

/// Every rank of a world of `world` ranks: 0 .. world-1.
std::vector<std::int64_t> all_ranks(std::int64_t world);

}  // namespace shardc::driver
