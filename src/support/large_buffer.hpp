// The performance hints behind one interface (no domain knowledge): large
// buffers that are about to be filled front to back get transparent huge
// pages, and objects a short-lived process would only free one by one are
// left to its exit. The stages call these and carry no madvise and no
// platform code; every hint is only a hint (a no-op where it does not apply).
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace shardc {

/// Asks the kernel to back the 2 MiB-aligned part of [data, data + bytes)
/// with transparent huge pages (Linux madvise MADV_HUGEPAGE), so filling it
/// takes one page fault per 2 MiB instead of one per 4 KiB: page faults were
/// a quarter of `validate` on a 45,000-param model. A no-op for buffers
/// under 2 MiB, on other systems and when the kernel refuses. Internal to
/// the functions below.
void advise_huge_pages(void* data, std::size_t bytes);

/// `items.reserve(count)` for a vector (or string) about to be filled front
/// to back, its storage advised for huge pages. `count` is in ELEMENTS.
template <class Container>
void reserve_large(Container& items, std::size_t count) {
  items.reserve(count);
  advise_huge_pages(items.data(), items.capacity() * sizeof(typename Container::value_type));
}

/// `bytes` BYTES of uninitialized storage advised for huge pages, or null
/// when the allocation fails (never throws).
std::unique_ptr<std::byte[]> allocate_large(std::size_t bytes);

/// Moves `owned` to a list that lives until the process exits and is never
/// freed (freeing a 45,000-param model's objects one by one was a sixth of
/// `validate`'s time). The list is reachable from static storage, so
/// LeakSanitizer does not report it. When the list cannot grow (no memory)
/// `owned` keeps its object and frees it as usual. Thread-safe.
template <class T>
void leave_to_exit(std::unique_ptr<T>& owned) {
  if (owned && keep_until_exit(owned.get(), [](void* object) { delete static_cast<T*>(object); }))
    (void)owned.release();
}

/// The type-erased list behind leave_to_exit: false when it could not grow.
/// `destroy` is kept beside the object but never called.
bool keep_until_exit(void* object, void (*destroy)(void*));

}  // namespace shardc
