#pragma once
// prism::data::NextIterator: the range-for iterator over anything with a Next() that
// returns std::optional<value> (std::nullopt at the end). BatchIterator and
// TorchBatchIterator use it for `for (const Block& batch : ds.IterBatches(64))`.

#include <cstddef>
#include <iterator>
#include <optional>
#include <type_traits>

namespace prism::data {

/// An input iterator that takes its items from `owner->Next()` (a
/// `std::optional<std::remove_const_t<Value>>`) until it returns std::nullopt; it then
/// compares equal to the default-constructed end iterator. `Value` is what `*it` refers to:
/// `const Block` gives read-only batches, `TorchBatch` lets the loop move tensors out.
/// Holds the current item; the owner must outlive the iterator. Single pass, one thread.
template <typename Owner, typename Value>
class NextIterator {
 public:
  using iterator_category = std::input_iterator_tag;
  using value_type = std::remove_const_t<Value>;
  using difference_type = std::ptrdiff_t;
  using pointer = Value*;
  using reference = Value&;

  /// The end iterator.
  NextIterator() = default;
  /// The iterator at `owner`'s next item (takes it now; the end iterator if there is none).
  explicit NextIterator(Owner* owner) : owner_(owner) { ++*this; }

  /// The current item (constness of the iterator is not the item's, as with a pointer).
  reference operator*() const { return *current_; }
  /// The current item's members.
  pointer operator->() const { return &*current_; }
  /// Takes the owner's next item; becomes the end iterator when there is none.
  NextIterator& operator++() {
    current_ = owner_->Next();
    if (!current_) owner_ = nullptr;
    return *this;
  }
  /// Equal when both are at the end, or both iterate the same owner.
  bool operator==(const NextIterator& other) const { return owner_ == other.owner_; }
  /// Not equal: see operator==.
  bool operator!=(const NextIterator& other) const { return owner_ != other.owner_; }

 private:
  Owner* owner_ = nullptr;
  mutable std::optional<value_type> current_;  // mutable: `*it` on a const iterator
};

}  // namespace prism::data
