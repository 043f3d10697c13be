// SHA-256 digests of input and output bytes (support layer; OpenSSL EVP).
#pragma once

#include <string>
#include <string_view>

namespace shardc {

/// Lower-case hex SHA-256 (64 characters) of `bytes`.
std::string sha256_hex(std::string_view bytes);

}  // namespace shardc
