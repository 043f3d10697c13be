#include "support/large_buffer.hpp"

#include <cstdint>
#include <mutex>
#include <new>
#include <utility>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace shardc {

void advise_huge_pages(void* data, std::size_t bytes) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  constexpr std::uintptr_t kHuge = std::uintptr_t{2} << 20;
  const auto begin = reinterpret_cast<std::uintptr_t>(data);
  if (bytes < kHuge || begin > UINTPTR_MAX - bytes) return;
  const std::uintptr_t first = (begin + kHuge - 1) & ~(kHuge - 1);
  const std::uintptr_t last = (begin + bytes) & ~(kHuge - 1);
  if (first >= last) return;
  // A refusal (no THP support, EINVAL) leaves ordinary pages: nothing to do.
  (void)::madvise(reinterpret_cast<void*>(first), last - first, MADV_HUGEPAGE);
#else
  (void)data;
  (void)bytes;
#endif
}

std::unique_ptr<std::byte[]> allocate_large(std::size_t bytes) {
  std::unique_ptr<std::byte[]> storage(new (std::nothrow) std::byte[bytes]);
  if (storage) advise_huge_pages(storage.get(), bytes);
  return storage;
}

bool keep_until_exit(void* object, void (*destroy)(void*)) {
  // Never destroyed: static storage points at it, so the objects in it stay
  // reachable (not leaks) until the process exits.
  static auto* left = new std::vector<std::pair<void*, void (*)(void*)>>();
  static std::mutex mutex;
  const std::lock_guard<std::mutex> lock(mutex);
  try {
    left->emplace_back(object, destroy);
  } catch (const std::bad_alloc&) {
    return false;
  }
  return true;
}

}  // namespace shardc
