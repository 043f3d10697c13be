// SHA-256 of input files, for the manifest's `inputs` (OpenSSL EVP).
#include <openssl/evp.h>

#include <array>
#include <memory>
#include <string>
#include <string_view>

#include "support/sha256.hpp"

namespace shardc {

std::string sha256_hex(std::string_view bytes) {
  std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
  unsigned int length = 0;
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  bool ok = ctx && EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) == 1 &&
            EVP_DigestUpdate(ctx.get(), bytes.data(), bytes.size()) == 1 &&
            EVP_DigestFinal_ex(ctx.get(), digest.data(), &length) == 1;
  if (!ok) return {};
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * length);
  for (unsigned int i = 0; i < length; ++i) {
    out.push_back(kHex[digest[i] >> 4]);
    out.push_back(kHex[digest[i] & 0xF]);
  }
  return out;
}

}  // namespace shardc
