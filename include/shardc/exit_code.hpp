// Process exit codes, shared by the driver and the diagnostics table.
#pragma once

namespace shardc {

/// Process exit codes (docs/commands.md "Command line").
enum class ExitCode : int {
  Ok = 0,        ///< success (warnings allowed unless --strict)
  Invalid = 1,   ///< the plan is invalid; diagnostics printed
  Usage = 2,     ///< usage, I/O or parse error
  Internal = 3,  ///< an internal invariant failed (a shardc bug; SHARDC_ASSERT, check_plan)
};

}  // namespace shardc
