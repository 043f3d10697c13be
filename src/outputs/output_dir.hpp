// The names of the files in a compile's output directory (OUTDIR), shared by
// the writers (backend/, driver/out_dir) and the readers (outputs/readback,
// verify/): plan.json, ranks/rank-<NN>.json, manifest.json (written last, the
// commit marker) and the `.shardc-output` ownership marker (README "Output
// directory commits").
#pragma once

#include <cstdint>
#include <string>

namespace shardc {

/// The commit marker name, written last into OUTDIR.
inline constexpr const char* kManifestName = "manifest.json";

/// Name of the marker file shardc writes into every OUTDIR it owns.
inline constexpr const char* kMarkerName = ".shardc-output";

/// File name of a rank file: "rank-" + rank zero-padded to the width of
/// world_size - 1 + ".json".
std::string rank_file_name(std::int64_t rank, std::int64_t world_size);

/// True for "rank-<digits>.json".
bool is_rank_file_name(const std::string& name);

/// `dir/name`, without doubling a trailing slash.
std::string path_join(const std::string& dir, const std::string& name);

}  // namespace shardc
