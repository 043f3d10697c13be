// Pieces of rank files memoized per shard class (internal to src/backend).
// Many ranks share the bytes of a section (the params, a muon group's sizes)
// when they agree on the mesh coordinates that section depends on; the
// writer renders it once per such class and splices the text for the rest.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

namespace shardc::backend {

/// Rendered values by class key, shared by the threads writing rank files.
/// `V` has a `std::string text` member, which the byte budget counts: once
/// the stored texts reach it, new classes are rendered and handed out
/// without being stored, so memory stays bounded whatever the class count.
template <typename V>
class ClassMemo {
 public:
  /// A class: the section's tag (stage, group number, ...) then the rank's
  /// coordinates on the axes the section depends on.
  using Key = std::vector<std::int64_t>;

  explicit ClassMemo(std::size_t budget_bytes) : budget_(budget_bytes) {}

  /// The value of `key`: the stored one, else `render()` (called without
  /// the lock; two threads may render one class, they get equal values).
  template <typename F>
  std::shared_ptr<const V> get(const Key& key, F&& render) const {
    {
      const std::lock_guard lock(mutex_);
      if (auto it = stored_.find(key); it != stored_.end()) return it->second;
    }
    auto value = std::make_shared<const V>(std::forward<F>(render)());
    const std::lock_guard lock(mutex_);
    if (used_ + value->text.size() > budget_) return value;
    auto [it, fresh] = stored_.try_emplace(key, value);
    if (fresh) used_ += value->text.size();
    return it->second;
  }

 private:
  std::size_t budget_;
  mutable std::mutex mutex_;
  mutable std::size_t used_ = 0;
  mutable std::map<Key, std::shared_ptr<const V>> stored_;
};

}  // namespace shardc::backend
