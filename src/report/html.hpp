// HTML building blocks of the report pages (internal to src/report): escaping, byte and
// shape text, the page shell (inline CSS and script), colours.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "support/byte_size.hpp"  // binary_bytes_text: sizes on the page
#include "support/shape.hpp"

namespace shardc::report {

/// Text as HTML element content or a double-quoted attribute value: & < > " ' escaped.
std::string escape(std::string_view text);

/// A JSON string literal safe inside a `<script type="application/json">` element: quotes,
/// backslashes and control characters escaped as JSON does, and < > & as \u003c \u003e
/// \u0026, so no `</script>` can end the element.
std::string json_string(std::string_view text);

/// "[4096, 4096]", "[]".
std::string shape_text(const Shape& shape);

/// Fill colour of pipeline stage `stage` (light: dark text stays readable on it).
std::string stage_colour(int stage);

/// Indices 0 .. count-1 of the `shown` largest items by `bytes_of(index)` (bytes), largest
/// first, the lower index first on ties; fewer when count < shown. The largest-params table of
/// both pages (MODEL RECIPE and OUTDIR) orders its rows with it.
std::vector<std::size_t> largest_first(std::size_t count, std::size_t shown,
                                       const std::function<std::int64_t(std::size_t)>& bytes_of);

/// `<!DOCTYPE html>` ... `<body>` with the inline style sheet and `<title>`.
std::string page_head(std::string_view title);
/// The inline script (rank selection), then `</body></html>`.
std::string page_tail();

}  // namespace shardc::report
