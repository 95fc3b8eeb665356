// IterBatches' re-batching on the consumer's rank (Ray's iter_batches with its batcher and
// prefetcher). Three things make it fast:
//   * A batch that lies inside one block is a slice of it: no copy (blocks read from the
//     local store alias the store's bytes).
//   * Blocks are fetched ahead: the blocks of the next prefetch_batches batches have their
//     pulls started (prism::Wait with a 0 timeout starts a pull and returns) as soon as the
//     executor hands them out, so moving them from the ranks that made them overlaps with
//     the consumer's work on the batch before.
//   * A batch that spans blocks is copied once, into a buffer of an earlier batch that no
//     Block refers to any more (the consumer dropped it) when there is one. A fresh buffer
//     costs page faults, which on a VM run at a fraction of memcpy's speed (perf/README.md:
//     0.3 GB/s first touch against 16 GB/s into touched memory); a reused one does not.
//     When an iterator ends, its idle buffers go to a process-wide shelf (at most
//     kShelfBytes) that the next iterator takes them from: an epoch's first batches reuse
//     the last epoch's buffers.
// String columns are concatenated by Block::Concat (offsets need rebasing).

#include "data/batcher.h"
#include "data/block_wire.h"

#include <algorithm>
#include <cstring>
#include <mutex>
#include <utility>

#include "prism/api.h"

namespace prism::data::internal {

namespace {

using internal::AlignUp;

/// Idle batch buffers between iterators, at most kShelfBytes of them.
constexpr size_t kShelfBytes = 256u << 20;
std::mutex shelf_mutex;
std::vector<std::shared_ptr<void>>& Shelf() {
  static auto* shelf = new std::vector<std::shared_ptr<void>>();  // outlives static destructors
  return *shelf;
}
size_t shelf_bytes = 0;

}  // namespace

Batcher::~Batcher() {
  std::lock_guard<std::mutex> lock(shelf_mutex);
  for (std::shared_ptr<Buffer>& b : buffers_) {
    if (b.use_count() != 1 || shelf_bytes + b->size > kShelfBytes) continue;
    shelf_bytes += b->size;
    Shelf().push_back(std::move(b));
  }
}

std::shared_ptr<Batcher::Buffer> Batcher::Unshelve(size_t bytes) {
  std::lock_guard<std::mutex> lock(shelf_mutex);
  auto& shelf = Shelf();
  for (size_t i = 0; i < shelf.size(); ++i) {
    auto b = std::static_pointer_cast<Buffer>(shelf[i]);
    if (b->size < bytes) continue;
    shelf_bytes -= b->size;
    shelf.erase(shelf.begin() + static_cast<std::ptrdiff_t>(i));
    return b;
  }
  return nullptr;
}

Batcher::Batcher(int64_t batch_size, int prefetch_batches, bool drop_last, int fetch_timeout_ms)
    : batch_size_(batch_size),
      prefetch_batches_(prefetch_batches),
      drop_last_(drop_last),
      fetch_timeout_ms_(fetch_timeout_ms) {}

Block Batcher::Take(Pending& p) {
  if (!p.block) {
    p.block = FetchBlock(p.handle, fetch_timeout_ms_);
  }
  return p.offset == 0 ? *p.block : p.block->Slice(p.offset, p.block->num_rows());
}

std::optional<Block> Batcher::Next(const NextHandle& next) {
  const int64_t want = batch_size_ * (1 + static_cast<int64_t>(prefetch_batches_));
  while (!exhausted_ && pending_rows_ < want) {
    std::optional<BlockHandle> h = next();
    if (!h) {
      exhausted_ = true;
      break;
    }
    if (h->rows() == 0) continue;
    pending_rows_ += h->rows();
    pending_.push_back(Pending{std::move(*h), std::nullopt, 0});
  }
  // Start the pulls of what came in (a no-op for blocks already on this rank).
  if (requested_ < pending_.size()) {
    std::vector<ObjectRef<Block>> refs;
    for (size_t i = requested_; i < pending_.size(); ++i) refs.push_back(pending_[i].handle.block);
    requested_ = pending_.size();
    Wait(refs, static_cast<int>(refs.size()), 0);
  }
  if (pending_rows_ == 0) return std::nullopt;
  if (pending_rows_ < batch_size_ && drop_last_) {
    pending_.clear();
    pending_rows_ = 0;
    requested_ = 0;
    return std::nullopt;
  }
  int64_t need = std::min(batch_size_, pending_rows_);
  std::vector<Block> pieces;
  while (need > 0) {
    Pending& front = pending_.front();
    Block rest = Take(front);
    if (rest.num_rows() <= need) {
      need -= rest.num_rows();
      pending_rows_ -= rest.num_rows();
      pieces.push_back(std::move(rest));
      pending_.pop_front();
      requested_ -= 1;
    } else {
      pieces.push_back(rest.Slice(0, need));
      front.offset += need;
      pending_rows_ -= need;
      need = 0;
    }
  }
  if (pieces.size() == 1) {
    ++sliced_;
    return std::move(pieces[0]);
  }
  ++copied_;
  return Concat(pieces);
}

Block Batcher::Concat(const std::vector<Block>& pieces) {
  const Schema schema = pieces.front().schema();
  size_t total = 0;
  int64_t rows = 0;
  bool fixed_width = true;
  for (const Block& b : pieces) {
    if (b.schema() != schema) return Block::Concat(pieces);  // it names the column that differs
    rows += b.num_rows();
  }
  for (const Field& f : schema.fields) fixed_width = fixed_width && f.dtype != DType::kString;
  if (!fixed_width) return Block::Concat(pieces);
  std::vector<size_t> offsets;
  for (size_t c = 0; c < schema.fields.size(); ++c) {
    offsets.push_back(total);
    size_t bytes = 0;
    for (const Block& b : pieces) bytes += b.column_at(c).second.size_bytes();
    total += AlignUp(bytes);
  }
  std::shared_ptr<Buffer> buffer;
  for (const std::shared_ptr<Buffer>& b : buffers_) {
    if (b.use_count() == 1 && b->size >= total) {
      buffer = b;
      break;
    }
  }
  if (!buffer) buffer = Unshelve(total);
  if (!buffer || std::find(buffers_.begin(), buffers_.end(), buffer) == buffers_.end()) {
    if (!buffer) buffer = std::make_shared<Buffer>(std::max<size_t>(total, 1));
    const size_t keep = static_cast<size_t>(prefetch_batches_) + 2;
    if (buffers_.size() < keep) {
      buffers_.push_back(buffer);
    } else {  // replace a buffer some batch still holds: it goes when that batch does
      for (std::shared_ptr<Buffer>& b : buffers_) {
        if (b.use_count() > 1 || b->size < total) {
          b = buffer;
          break;
        }
      }
    }
  }
  std::vector<std::pair<std::string, Column>> columns;
  std::shared_ptr<const void> owner(buffer, buffer->data.get());
  for (size_t c = 0; c < schema.fields.size(); ++c) {
    char* at = buffer->data.get() + offsets[c];
    char* out = at;
    for (const Block& b : pieces) {
      const Column& col = b.column_at(c).second;
      if (col.size_bytes() == 0) continue;
      std::memcpy(out, col.data(), col.size_bytes());
      out += col.size_bytes();
    }
    const Field& f = schema.fields[c];
    columns.emplace_back(f.name, Column::Wrap(f.dtype, rows, f.row_shape, at, owner));
  }
  return Block::FromColumns(std::move(columns));
}

}  // namespace prism::data::internal
