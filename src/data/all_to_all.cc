// All-to-all operators: the exchange's driver side, its member tasks, and the pure logic
// they share (all_to_all.h explains the exchange).

#include "data/all_to_all.h"
#include "data/block_wire.h"
#include "data/errors.h"

#include <mpi.h>
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <mutex>
#include <numeric>
#include <optional>
#include <random>
#include <set>

#include "prism/api.h"
#include "prism/collective.h"
#include "prism/platform/invoke.h"
#include "prism/platform/worker_group.h"
#include "prism/platform/put.h"

namespace prism::data::internal {

bool IsNumeric(DType d) {
  return d == DType::kFloat32 || d == DType::kFloat64 || d == DType::kInt32 || d == DType::kInt64 ||
         d == DType::kUInt8;
}

bool IsFloat(DType d) { return d == DType::kFloat32 || d == DType::kFloat64; }

double AsDouble(const Column& c, int64_t i) {
  switch (c.dtype()) {
    case DType::kFloat32:
      return c.Values<float>()[static_cast<size_t>(i)];
    case DType::kFloat64:
      return c.Values<double>()[static_cast<size_t>(i)];
    case DType::kInt32:
      return c.Values<int32_t>()[static_cast<size_t>(i)];
    case DType::kInt64:
      return static_cast<double>(c.Values<int64_t>()[static_cast<size_t>(i)]);
    case DType::kUInt8:
      return c.Values<uint8_t>()[static_cast<size_t>(i)];
    case DType::kBool:
      return static_cast<const uint8_t*>(c.data())[i];
    case DType::kString:
      break;
  }
  throw Error(std::string("a ") + DTypeName(c.dtype()) + " column has no numeric value");
}

int64_t AsInt(const Column& c, int64_t i) {
  switch (c.dtype()) {
    case DType::kInt32:
      return c.Values<int32_t>()[static_cast<size_t>(i)];
    case DType::kInt64:
      return c.Values<int64_t>()[static_cast<size_t>(i)];
    case DType::kUInt8:
      return c.Values<uint8_t>()[static_cast<size_t>(i)];
    case DType::kBool:
      return static_cast<const uint8_t*>(c.data())[i];
    default:
      break;
  }
  throw Error(std::string("a ") + DTypeName(c.dtype()) + " column has no integer value");
}

namespace {

std::string JoinNames(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

template <typename T>
int Cmp(T a, T b) {
  return a < b ? -1 : (b < a ? 1 : 0);
}

int CmpDouble(double a, double b) {
  const bool na = std::isnan(a), nb = std::isnan(b);
  if (na || nb) return na == nb ? 0 : (na ? 1 : -1);
  return Cmp(a, b);
}

/// A run of rows of one source: Gather's unit.
using Run = RowRun;

std::vector<Run> ToRuns(const std::vector<std::pair<int32_t, int64_t>>& order, size_t begin, size_t end) {
  std::vector<Run> runs;
  for (size_t k = begin; k < end; ++k) {
    const auto [s, r] = order[k];
    if (!runs.empty() && runs.back().source == s && runs.back().begin + runs.back().count == r) {
      ++runs.back().count;
    } else {
      runs.push_back({s, r, 1});
    }
  }
  return runs;
}

/// Rows [offset, offset + count) of the rows that `runs` name, as runs.
std::vector<Run> SliceRuns(const std::vector<Run>& runs, int64_t offset, int64_t count) {
  std::vector<Run> out;
  int64_t at = 0;
  for (const Run& r : runs) {
    const int64_t lo = std::max(at, offset), hi = std::min(at + r.count, offset + count);
    if (lo < hi) out.push_back({r.source, r.begin + (lo - at), hi - lo});
    at += r.count;
    if (at >= offset + count) break;
  }
  return out;
}

Block GatherRuns(const std::vector<Block>& sources, const std::vector<Run>& runs) {
  int64_t rows = 0;
  for (const Run& r : runs) rows += r.count;
  const Block* first = FirstWithColumns(sources);
  if (first == nullptr) return Block();
  if (runs.size() == 1 && runs[0].count == sources[runs[0].source].num_rows()) {
    return sources[runs[0].source];  // the whole of one source: no copy
  }
  std::vector<std::pair<std::string, Column>> columns;
  for (size_t c = 0; c < first->num_columns(); ++c) {
    const auto& [name, proto] = first->column_at(c);
    if (proto.dtype() == DType::kString) {
      uint64_t bytes = 0;
      for (const Run& r : runs) {
        const Column& col = sources[r.source].column_at(c).second;
        bytes += static_cast<uint64_t>(col.string_offsets()[r.begin + r.count] - col.string_offsets()[r.begin]);
      }
      const uint64_t offsets_bytes = AlignUp(static_cast<uint64_t>(rows + 1) * sizeof(int64_t));
      std::shared_ptr<char> buf = ScratchBuffer(offsets_bytes + bytes + 1);
      auto* offsets = reinterpret_cast<int64_t*>(buf.get());
      char* chars = buf.get() + offsets_bytes;
      int64_t row = 0, at = 0;
      offsets[0] = 0;
      for (const Run& r : runs) {
        const Column& col = sources[r.source].column_at(c).second;
        const int64_t* so = col.string_offsets();
        const int64_t n = so[r.begin + r.count] - so[r.begin];
        std::memcpy(chars + at, col.string_bytes() + so[r.begin], static_cast<size_t>(n));
        for (int64_t k = 0; k < r.count; ++k) {
          offsets[row + k + 1] = at + (so[r.begin + k + 1] - so[r.begin]);
        }
        row += r.count;
        at += n;
      }
      columns.emplace_back(name, Column::WrapStrings(rows, offsets, chars, buf));
    } else {
      const uint64_t row_bytes = DTypeSize(proto.dtype()) * static_cast<uint64_t>(proto.row_elements());
      std::shared_ptr<char> buf = ScratchBuffer(row_bytes * static_cast<uint64_t>(rows) + 1);
      uint64_t at = 0;
      for (const Run& r : runs) {
        const Column& col = sources[r.source].column_at(c).second;
        const size_t n = static_cast<size_t>(r.count) * row_bytes;
        std::memcpy(buf.get() + at, static_cast<const char*>(col.data()) + r.begin * row_bytes, n);
        at += n;
      }
      columns.emplace_back(name, Column::Wrap(proto.dtype(), rows, proto.row_shape(), buf.get(), buf));
    }
  }
  return Block::FromColumns(std::move(columns));
}

// ---- The scratch pool ------------------------------------------------------------------------

struct ScratchPool {
  std::mutex mu;
  std::multimap<uint64_t, char*> idle;  // by size
  uint64_t idle_bytes = 0;
  uint64_t limit = 0;

  ScratchPool() {
    limit = uint64_t{8} << 30;
    if (const char* env = std::getenv("PRISM_DATA_SCRATCH_BYTES")) limit = std::strtoull(env, nullptr, 10);
  }
};

constexpr uint64_t kMapped = uint64_t{2} << 20;  // buffers this large are mmapped

void FreeScratch(char* p, uint64_t size) {
  if (size >= kMapped) {
    munmap(p, size);
  } else {
    std::free(p);
  }
}

ScratchPool& Pool() {
  static auto* pool = new ScratchPool();  // never destroyed: buffers may come back at exit
  return *pool;
}

}  // namespace

std::shared_ptr<char> ScratchBuffer(uint64_t bytes) {
  bytes = AlignUp(std::max<uint64_t>(bytes, 1));
  ScratchPool& pool = Pool();
  char* p = nullptr;
  uint64_t size = bytes;
  {
    std::lock_guard<std::mutex> lock(pool.mu);
    // The smallest idle buffer that fits, unless it is far larger than needed.
    auto it = pool.idle.lower_bound(bytes);
    if (it != pool.idle.end() && it->first <= 4 * bytes + (uint64_t{1} << 20)) {
      size = it->first;
      p = it->second;
      pool.idle_bytes -= size;
      pool.idle.erase(it);
    }
  }
  if (p == nullptr) {
    // As the core's buffer pool does: large buffers mapped with huge pages when the kernel
    // has them, and 1/8 headroom so the next exchange's slightly larger buckets still fit
    // (a fresh 700 MB receive buffer faults in for 2 s on this VM).
    if (size >= kMapped) {
      size = (size + size / 8 + kMapped - 1) / kMapped * kMapped;
      void* m = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (m == MAP_FAILED) throw Error("prism::data: could not map " + std::to_string(size) + " bytes");
      madvise(m, size, MADV_HUGEPAGE);  // a hint: ignored where THP is off
      p = static_cast<char*>(m);
    } else {
      p = static_cast<char*>(std::aligned_alloc(kAlign, size));
      if (p == nullptr) throw Error("prism::data: could not allocate " + std::to_string(size) + " bytes");
    }
  }
  return std::shared_ptr<char>(p, [size](char* q) {
    ScratchPool& pool = Pool();
    std::lock_guard<std::mutex> lock(pool.mu);
    pool.idle.emplace(size, q);
    pool.idle_bytes += size;
    while (pool.idle_bytes > pool.limit && !pool.idle.empty()) {
      auto smallest = pool.idle.begin();  // keep the large ones: they cost the most to fault in
      pool.idle_bytes -= smallest->first;
      FreeScratch(smallest->second, smallest->first);
      pool.idle.erase(smallest);
    }
  });
}

// ---- Names -----------------------------------------------------------------------------------

std::string AggSpec::Name() const {
  switch (kind) {
    case kCount:
      return "count()";
    case kSum:
      return "sum(" + column + ")";
    case kMin:
      return "min(" + column + ")";
    case kMax:
      return "max(" + column + ")";
    case kMean:
      return "mean(" + column + ")";
    case kStd:
      return "std(" + column + ")";
  }
  return "unknown()";
}

std::string AllToAllSpec::Name() const {
  switch (kind) {
    case kRepartition:
      return "Repartition(" + std::to_string(num_blocks) + (shuffle ? ", shuffle" : "") + ")";
    case kRandomShuffle:
      return "RandomShuffle(" + (has_seed ? "seed=" + std::to_string(seed) : std::string()) + ")";
    case kSort:
      return "Sort(" + key + (descending ? ", descending" : "") + ")";
    case kAggregate: {
      std::string out = "Aggregate(" + key + ":";
      for (size_t i = 0; i < aggs.size(); ++i) out += (i ? ", " : " ") + aggs[i].Name();
      return out + ")";
    }
    case kMapGroups:
      return "MapGroups(" + key + ", " + (display.empty() ? fn : display) + ")";
  }
  return "AllToAll";
}

// ---- Pure logic ------------------------------------------------------------------------------

std::vector<int64_t> EqualParts(int64_t rows, int64_t n) {
  std::vector<int64_t> parts(static_cast<size_t>(std::max<int64_t>(n, 0)), 0);
  if (n <= 0) return parts;
  for (int64_t i = 0; i < n; ++i) parts[static_cast<size_t>(i)] = rows / n + (i < rows % n ? 1 : 0);
  return parts;
}

std::vector<int> AssignBlocks(const std::vector<uint64_t>& bytes, const std::vector<int>& ranks,
                              const std::vector<int>& member_ranks) {
  const size_t m = member_ranks.size();
  std::vector<int> out(bytes.size(), 0);
  if (m <= 1) return out;
  const uint64_t total = std::accumulate(bytes.begin(), bytes.end(), uint64_t{0});
  const double cap = 1.25 * static_cast<double>(total) / static_cast<double>(m);
  std::vector<uint64_t> load(m, 0);
  std::vector<size_t> later;
  for (size_t b = 0; b < bytes.size(); ++b) {
    auto it = std::find(member_ranks.begin(), member_ranks.end(), ranks[b]);
    const size_t mine = static_cast<size_t>(it - member_ranks.begin());
    if (it != member_ranks.end() && static_cast<double>(load[mine] + bytes[b]) <= cap) {
      out[b] = static_cast<int>(mine);
      load[mine] += bytes[b];
    } else {
      later.push_back(b);
    }
  }
  for (size_t b : later) {
    const size_t least = static_cast<size_t>(std::min_element(load.begin(), load.end()) - load.begin());
    out[b] = static_cast<int>(least);
    load[least] += bytes[b];
  }
  return out;
}

uint64_t ShuffleKey(uint64_t seed, int64_t block, int64_t row) {
  auto mix = [](uint64_t z) {
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  };
  return mix(mix(mix(seed) ^ static_cast<uint64_t>(block)) ^ static_cast<uint64_t>(row));
}

int CompareRows(const Column& a, int64_t i, const Column& b, int64_t j) {
  switch (a.dtype()) {
    case DType::kString:
      return Cmp(a.StringAt(i), b.StringAt(j));
    case DType::kFloat32:
    case DType::kFloat64:
      return CmpDouble(AsDouble(a, i), AsDouble(b, j));
    default:
      return Cmp(AsInt(a, i), AsInt(b, j));
  }
}

std::vector<int64_t> ChooseBoundaries(int64_t sample_rows, int members) {
  std::vector<int64_t> out;
  if (sample_rows <= 0) return out;
  for (int i = 1; i < members; ++i) out.push_back(std::min(sample_rows - 1, i * sample_rows / members));
  return out;
}

std::vector<int32_t> RangePartition(const Column& keys, const Column& sample,
                                    const std::vector<int64_t>& boundaries, bool descending) {
  std::vector<int32_t> out(static_cast<size_t>(keys.rows()), 0);
  for (int64_t r = 0; r < keys.rows(); ++r) {
    // The first boundary the key comes before, in the operator's order.
    size_t lo = 0, hi = boundaries.size();
    while (lo < hi) {
      const size_t mid = (lo + hi) / 2;
      int c = CompareRows(keys, r, sample, boundaries[mid]);
      if (descending) c = -c;
      if (c < 0) {
        hi = mid;
      } else {
        lo = mid + 1;
      }
    }
    out[static_cast<size_t>(r)] = static_cast<int32_t>(lo);
  }
  return out;
}

Block Gather(const std::vector<Block>& sources, const std::vector<std::pair<int32_t, int64_t>>& order,
             size_t begin, size_t end) {
  return GatherRuns(sources, ToRuns(order, begin, end));
}

namespace {
std::vector<std::pair<int32_t, int64_t>> SortedOrderBy(const std::vector<Block>& sources,
                                                       const std::string& key, bool descending,
                                                       const std::vector<std::vector<int64_t>>* block_of) {
  std::vector<std::pair<int32_t, int64_t>> order;
  std::vector<const Column*> keys(sources.size(), nullptr);
  for (size_t s = 0; s < sources.size(); ++s) {
    if (sources[s].num_rows() == 0) continue;
    keys[s] = &sources[s].GetColumn(key);
    for (int64_t r = 0; r < sources[s].num_rows(); ++r) order.emplace_back(static_cast<int32_t>(s), r);
  }
  std::stable_sort(order.begin(), order.end(), [&](const auto& x, const auto& y) {
    int c = CompareRows(*keys[x.first], x.second, *keys[y.first], y.second);
    if (descending) c = -c;
    if (c != 0) return c < 0;
    if (block_of != nullptr) {
      const int64_t bx = (*block_of)[x.first][x.second], by = (*block_of)[y.first][y.second];
      if (bx != by) return bx < by;
    }
    return x < y;
  });
  return order;
}
}  // namespace

std::vector<std::pair<int32_t, int64_t>> SortedOrder(const std::vector<Block>& sources,
                                                     const std::string& key, bool descending) {
  return SortedOrderBy(sources, key, descending, nullptr);
}

std::vector<std::pair<int64_t, int64_t>> GroupRanges(const Column& keys) {
  std::vector<std::pair<int64_t, int64_t>> out;
  int64_t start = 0;
  for (int64_t r = 1; r <= keys.rows(); ++r) {
    if (r == keys.rows() || CompareRows(keys, r, keys, start) != 0) {
      out.emplace_back(start, r);
      start = r;
    }
  }
  return out;
}

Block AggregateSorted(const Block& sorted, const std::string& key, const std::vector<AggSpec>& aggs) {
  const Column& keys = sorted.GetColumn(key);
  const auto groups = GroupRanges(keys);
  std::vector<int64_t> firsts;
  for (const auto& g : groups) firsts.push_back(g.first);
  std::vector<std::pair<std::string, Column>> columns;
  // The key column: the first row of each group.
  {
    std::vector<std::pair<int32_t, int64_t>> order;
    for (int64_t f : firsts) order.emplace_back(0, f);
    Block one = Gather({sorted.SelectColumns({key})}, order, 0, order.size());
    columns.emplace_back(key, one.num_columns() ? one.GetColumn(key) : Column());
  }
  for (const AggSpec& agg : aggs) {
    if (agg.kind == AggSpec::kCount) {
      std::vector<int64_t> v;
      for (const auto& [b, e] : groups) v.push_back(e - b);
      columns.emplace_back(agg.Name(), Column::FromVector(std::move(v)));
      continue;
    }
    const Column& c = sorted.GetColumn(agg.column);
    if (!IsNumeric(c.dtype()) || !c.row_shape().empty()) {
      throw Error(agg.Name() + " needs a numeric column of scalars; \"" + agg.column + "\" holds " +
                  DTypeName(c.dtype()) + (c.row_shape().empty() ? "" : ShapeToString(c.row_shape())));
    }
    const bool ints = !IsFloat(c.dtype()) && (agg.kind == AggSpec::kSum || agg.kind == AggSpec::kMin ||
                                              agg.kind == AggSpec::kMax);
    std::vector<int64_t> iv;
    std::vector<double> dv;
    for (const auto& [b, e] : groups) {
      if (ints) {
        int64_t acc = AsInt(c, b);
        for (int64_t r = b + 1; r < e; ++r) {
          const int64_t x = AsInt(c, r);
          acc = agg.kind == AggSpec::kSum ? acc + x : agg.kind == AggSpec::kMin ? std::min(acc, x) : std::max(acc, x);
        }
        iv.push_back(acc);
        continue;
      }
      double sum = 0, lo = AsDouble(c, b), hi = lo;
      for (int64_t r = b; r < e; ++r) {
        const double x = AsDouble(c, r);
        sum += x;
        lo = std::min(lo, x);
        hi = std::max(hi, x);
      }
      const double n = static_cast<double>(e - b), mean = sum / n;
      switch (agg.kind) {
        case AggSpec::kSum:
          dv.push_back(sum);
          break;
        case AggSpec::kMin:
          dv.push_back(lo);
          break;
        case AggSpec::kMax:
          dv.push_back(hi);
          break;
        case AggSpec::kMean:
          dv.push_back(mean);
          break;
        default: {  // Std: two passes, for accuracy
          double ss = 0;
          for (int64_t r = b; r < e; ++r) ss += (AsDouble(c, r) - mean) * (AsDouble(c, r) - mean);
          dv.push_back(n - agg.ddof > 0 ? std::sqrt(ss / (n - agg.ddof))
                                        : std::numeric_limits<double>::quiet_NaN());
        }
      }
    }
    columns.emplace_back(agg.Name(), ints ? Column::FromVector(std::move(iv)) : Column::FromVector(std::move(dv)));
  }
  return Block::FromColumns(std::move(columns));
}

// ---- The wire format -------------------------------------------------------------------------

namespace {
int64_t PieceRows(const BucketPiece& p) { return static_cast<int64_t>(p.rows.size()); }
uint64_t HeaderBytes(size_t pieces) { return AlignUp((3 + 2 * pieces) * sizeof(int64_t)); }
}  // namespace

uint64_t BucketBytes(const Schema& schema, const std::vector<BucketPiece>& pieces, bool with_keys) {
  int64_t rows = 0;
  for (const BucketPiece& p : pieces) rows += PieceRows(p);
  if (rows == 0) return 0;
  uint64_t bytes = HeaderBytes(pieces.size());
  for (size_t c = 0; c < schema.fields.size(); ++c) {
    const Field& f = schema.fields[c];
    if (f.dtype == DType::kString) {
      uint64_t chars = 0;
      for (const BucketPiece& p : pieces) {
        const Column& col = p.block->column_at(c).second;
        const int64_t* o = col.string_offsets();
        for (int64_t r : p.rows) chars += static_cast<uint64_t>(o[r + 1] - o[r]);
      }
      bytes += AlignUp(static_cast<uint64_t>(rows + 1) * sizeof(int64_t)) + AlignUp(chars);
    } else {
      int64_t elements = 1;
      for (int64_t d : f.row_shape) elements *= d;
      bytes += AlignUp(DTypeSize(f.dtype) * static_cast<uint64_t>(elements * rows));
    }
  }
  if (with_keys) bytes += AlignUp(static_cast<uint64_t>(rows) * sizeof(uint64_t));
  return bytes;
}

void WriteBucket(const Schema& schema, const std::vector<BucketPiece>& pieces, const uint64_t* keys,
                 char* out) {
  int64_t rows = 0;
  for (const BucketPiece& p : pieces) rows += PieceRows(p);
  if (rows == 0) return;
  auto* header = reinterpret_cast<int64_t*>(out);
  header[0] = rows;
  header[1] = static_cast<int64_t>(pieces.size());
  for (size_t k = 0; k < pieces.size(); ++k) {
    header[2 + 2 * k] = pieces[k].input_block;
    header[3 + 2 * k] = PieceRows(pieces[k]);
  }
  header[2 + 2 * pieces.size()] = keys != nullptr ? 1 : 0;
  uint64_t at = HeaderBytes(pieces.size());
  for (size_t c = 0; c < schema.fields.size(); ++c) {
    const Field& f = schema.fields[c];
    if (f.dtype == DType::kString) {
      auto* offsets = reinterpret_cast<int64_t*>(out + at);
      const uint64_t offsets_bytes = AlignUp(static_cast<uint64_t>(rows + 1) * sizeof(int64_t));
      char* chars = out + at + offsets_bytes;
      int64_t row = 0, pos = 0;
      offsets[0] = 0;
      for (const BucketPiece& p : pieces) {
        const Column& col = p.block->column_at(c).second;
        const int64_t* o = col.string_offsets();
        for (int64_t r : p.rows) {
          const int64_t n = o[r + 1] - o[r];
          std::memcpy(chars + pos, col.string_bytes() + o[r], static_cast<size_t>(n));
          pos += n;
          offsets[++row] = pos;
        }
      }
      at += offsets_bytes + AlignUp(static_cast<uint64_t>(pos));
    } else {
      int64_t elements = 1;
      for (int64_t d : f.row_shape) elements *= d;
      const uint64_t row_bytes = DTypeSize(f.dtype) * static_cast<uint64_t>(elements);
      char* dst = out + at;
      for (const BucketPiece& p : pieces) {
        const char* src = static_cast<const char*>(p.block->column_at(c).second.data());
        // Runs of consecutive rows are one memcpy each.
        size_t k = 0;
        while (k < p.rows.size()) {
          size_t e = k + 1;
          while (e < p.rows.size() && p.rows[e] == p.rows[e - 1] + 1) ++e;
          const size_t n = (e - k) * row_bytes;
          std::memcpy(dst, src + static_cast<uint64_t>(p.rows[k]) * row_bytes, n);
          dst += n;
          k = e;
        }
      }
      at += AlignUp(row_bytes * static_cast<uint64_t>(rows));
    }
  }
  if (keys != nullptr) std::memcpy(out + at, keys, static_cast<size_t>(rows) * sizeof(uint64_t));
}

DecodedBucket ReadBucket(const Schema& schema, const char* data, uint64_t size,
                         const std::shared_ptr<const void>& owner) {
  DecodedBucket out;
  if (size == 0) return out;
  const auto* header = reinterpret_cast<const int64_t*>(data);
  const int64_t rows = header[0];
  const auto pieces = static_cast<size_t>(header[1]);
  for (size_t k = 0; k < pieces; ++k) out.pieces.emplace_back(header[2 + 2 * k], header[3 + 2 * k]);
  const bool with_keys = header[2 + 2 * pieces] != 0;
  uint64_t at = HeaderBytes(pieces);
  std::vector<std::pair<std::string, Column>> columns;
  for (const Field& f : schema.fields) {
    if (f.dtype == DType::kString) {
      const auto* offsets = reinterpret_cast<const int64_t*>(data + at);
      const uint64_t offsets_bytes = AlignUp(static_cast<uint64_t>(rows + 1) * sizeof(int64_t));
      columns.emplace_back(f.name, Column::WrapStrings(rows, offsets, data + at + offsets_bytes, owner));
      at += offsets_bytes + AlignUp(static_cast<uint64_t>(offsets[rows]));
    } else {
      int64_t elements = 1;
      for (int64_t d : f.row_shape) elements *= d;
      columns.emplace_back(f.name, Column::Wrap(f.dtype, rows, f.row_shape, data + at, owner));
      at += AlignUp(DTypeSize(f.dtype) * static_cast<uint64_t>(elements * rows));
    }
  }
  if (with_keys) out.keys = reinterpret_cast<const uint64_t*>(data + at);
  if (at + (with_keys ? AlignUp(static_cast<uint64_t>(rows) * 8) : 0) > size) {
    throw Error("prism::data: a received bucket is shorter than its header says (" + std::to_string(size) +
                " bytes); the members disagree on the schema");
  }
  out.block = Block::FromColumns(std::move(columns));
  return out;
}

// ---- Member tasks ----------------------------------------------------------------------------

/// What every member of one exchange is told (the same for all): its WorkerGroup's config.
/// The driver holds the input blocks' refs until the members end (the config holds their
/// ids as bytes, which keep nothing alive).
struct MemberPlan {
  AllToAllSpec spec;
  std::string key;                        // the members' collective group: the WorkerGroup's id
  std::vector<int> ranks;                 // the members' world ranks
  bool collective = false;                // an MPI job with more than one member
  int64_t timeout_ms = 0;
  std::vector<ObjectRef<Block>> blocks;   // every input block, in order
  std::vector<int64_t> rows;              // rows that count of each
  std::vector<int32_t> member_of;         // the member each goes to
  std::vector<int64_t> outputs_per_member;
  std::vector<std::string> names;         // the schema
  std::vector<int32_t> dtypes;
  std::vector<std::vector<int64_t>> shapes;

  template <class Ar>
  void serialize(Ar& ar, unsigned) {
    ar & spec & key & ranks & collective & timeout_ms & blocks & rows & member_of & outputs_per_member &
        names & dtypes & shapes;
  }
};

namespace {

Schema SchemaOf(const MemberPlan& plan) {
  Schema s;
  for (size_t i = 0; i < plan.names.size(); ++i) {
    s.fields.push_back({plan.names[i], static_cast<DType>(plan.dtypes[i]), plan.shapes[i]});
  }
  return s;
}

ExchangeOutput PutOutput(const Block& block) { return {Put(block), BlockMeta::Of(block)}; }

/// The block of `runs` of `sources`, written straight into its object (one copy of each
/// row: no block is built first), and its metadata.
ExchangeOutput PutGathered(const std::vector<Block>& sources, const std::vector<Run>& runs) {
  const Block* first = FirstWithColumns(sources);
  int64_t rows = 0;
  for (const Run& r : runs) rows += r.count;
  if (first == nullptr || rows == 0) return PutOutput(Block());
  if (runs.size() == 1 && runs[0].count == sources[runs[0].source].num_rows()) {
    return PutOutput(sources[runs[0].source]);  // the whole of one source
  }
  BlockMeta meta;
  meta.rows = rows;
  for (size_t c = 0; c < first->num_columns(); ++c) {
    const auto& [name, proto] = first->column_at(c);
    meta.names.push_back(name);
    meta.dtypes.push_back(static_cast<int32_t>(proto.dtype()));
    meta.shapes.push_back(proto.row_shape());
    if (proto.dtype() == DType::kString) {
      meta.bytes += static_cast<uint64_t>(rows + 1) * sizeof(int64_t);
      for (const Run& r : runs) {
        const int64_t* so = sources[r.source].column_at(c).second.string_offsets();
        meta.bytes += static_cast<uint64_t>(so[r.begin + r.count] - so[r.begin]);
      }
    } else {
      meta.bytes += DTypeSize(proto.dtype()) * static_cast<uint64_t>(proto.row_elements()) * static_cast<uint64_t>(rows);
    }
  }
  ObjectRef<Block> ref = platform::PutWritten<Block>(
      GatheredBlockBytes(sources, runs), [&](prism::internal::Writer& w) { WriteGatheredBlock(w, sources, runs); });
  return {std::move(ref), std::move(meta)};
}

/// Swaps the members' byte buckets: `send` holds bucket j at send_at[j] (send_bytes[j]
/// long); returns the received buffer and each member's bucket in it.
std::shared_ptr<char> Swap(collective::Group* group, std::shared_ptr<char> send,
                           const std::vector<int64_t>& send_bytes, const std::vector<int64_t>& send_at,
                           std::vector<int64_t>& recv_bytes, std::vector<int64_t>& recv_at) {
  const size_t m = send_bytes.size();
  if (group == nullptr) {
    recv_bytes = send_bytes;
    recv_at = send_at;
    return send;
  }
  recv_bytes = group->AllToAllV(send_bytes, std::vector<int64_t>(m, 1));
  recv_at.assign(m, 0);
  int64_t total = 0;
  for (size_t j = 0; j < m; ++j) {
    recv_at[j] = total;
    total += static_cast<int64_t>(AlignUp(static_cast<uint64_t>(recv_bytes[j])));
  }
  std::shared_ptr<char> recv = ScratchBuffer(static_cast<uint64_t>(total));
  group->AllToAllV(send.get(), send_bytes, send_at, recv.get(), recv_bytes, recv_at,
                   collective::DataType::kUInt8);
  return recv;
}

/// The members' samples of the key column, sorted in the operator's order, and the
/// boundaries chosen from them (the same on every member).
std::pair<Block, std::vector<int64_t>> SampleBoundaries(collective::Group* group, int members,
                                                        const std::vector<Block>& blocks,
                                                        const Schema& schema, const std::string& key,
                                                        bool descending) {
  constexpr int64_t kSamplesPerMember = 4096;
  int64_t rows = 0;
  for (const Block& b : blocks) rows += b.num_rows();
  const int64_t step = std::max<int64_t>(1, rows / kSamplesPerMember);
  std::vector<Block> keys;
  std::vector<BucketPiece> pieces;
  int64_t seen = 0;
  for (const Block& b : blocks) {
    if (b.num_rows() > 0) keys.push_back(b.SelectColumns({key}));
  }
  for (const Block& k : keys) {
    BucketPiece p;
    p.block = &k;
    for (int64_t r = 0; r < k.num_rows(); ++r, ++seen) {
      if (seen % step == 0) p.rows.push_back(r);
    }
    pieces.push_back(std::move(p));
  }
  const uint64_t bytes = BucketBytes(schema, pieces, false);
  // Every member's sample to every member: the same bucket m times.
  std::shared_ptr<char> send = ScratchBuffer(bytes * static_cast<uint64_t>(members));
  if (bytes > 0) WriteBucket(schema, pieces, nullptr, send.get());
  for (int j = 1; j < members; ++j) std::memcpy(send.get() + j * bytes, send.get(), bytes);
  std::vector<int64_t> send_bytes(members, static_cast<int64_t>(bytes)), send_at(members), recv_bytes, recv_at;
  for (int j = 0; j < members; ++j) send_at[j] = j * static_cast<int64_t>(bytes);
  std::shared_ptr<char> recv = Swap(group, send, send_bytes, send_at, recv_bytes, recv_at);
  std::vector<Block> samples;
  for (int j = 0; j < members; ++j) {
    if (recv_bytes[j] == 0) continue;
    samples.push_back(ReadBucket(schema, recv.get() + recv_at[j], static_cast<uint64_t>(recv_bytes[j]), recv).block);
  }
  auto order = SortedOrder(samples, key, descending);
  Block sorted = Gather(samples, order, 0, order.size());
  return {sorted, ChooseBoundaries(sorted.num_rows(), members)};
}

std::string DescribeKey(const Column& keys, int64_t r) {
  if (keys.dtype() == DType::kString) return "\"" + std::string(keys.StringAt(r)) + "\"";
  if (IsFloat(keys.dtype())) return std::to_string(AsDouble(keys, r));
  return std::to_string(AsInt(keys, r));
}

/// Phase times of one member, printed to stderr when PRISM_DATA_A2A_TIMING is set (for the
/// shuffle benchmark's account of where the time goes).
struct PhaseClock {
  bool on = std::getenv("PRISM_DATA_A2A_TIMING") != nullptr;
  std::chrono::steady_clock::time_point last = std::chrono::steady_clock::now();
  std::string text;
  void Mark(const char* phase) {
    if (!on) return;
    const auto now = std::chrono::steady_clock::now();
    text += std::string(text.empty() ? "" : ", ") + phase + " " +
            std::to_string(std::chrono::duration<double>(now - last).count()).substr(0, 6) + " s";
    last = now;
  }
  void Print(int member, int64_t bytes) const {
    if (on) std::fprintf(stderr, "prism::data exchange member %d (%lld bytes out, started %.3f, ended %.3f): %s\n",
                         member, static_cast<long long>(bytes), started, WallSeconds(), text.c_str());
  }
  /// Seconds of the wall clock (to line the members' phases up with the driver's).
  static double WallSeconds() {
    return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  }
  double started = WallSeconds();
};

/// A shuffle member's rows in a random order the seed fixes: the received rows (decoded[j]
/// is source j) and the rows it kept for itself (kept[k], source first_kept + k, rows of its
/// own input block), in input block order whichever member held them, then a Fisher-Yates
/// shuffle seeded by the seed and this member. Uniform: which member a row went to was
/// drawn from its own key.
std::vector<std::pair<int32_t, int64_t>> ShuffledOrder(const std::vector<DecodedBucket>& decoded,
                                                       const std::vector<BucketPiece>& kept, int32_t first_kept,
                                                       uint64_t seed, int member) {
  struct Piece {
    int64_t block;
    int32_t source;
    int64_t begin, count;
    const std::vector<int64_t>* rows;  // kept rows; else [begin, begin + count)
  };
  std::vector<Piece> pieces;
  for (size_t j = 0; j < decoded.size(); ++j) {
    int64_t at = 0;
    for (const auto& [block, n] : decoded[j].pieces) {
      pieces.push_back({block, static_cast<int32_t>(j), at, n, nullptr});
      at += n;
    }
  }
  for (size_t k = 0; k < kept.size(); ++k) {
    pieces.push_back({kept[k].input_block, first_kept + static_cast<int32_t>(k), 0,
                      static_cast<int64_t>(kept[k].rows.size()), &kept[k].rows});
  }
  std::sort(pieces.begin(), pieces.end(), [](const Piece& a, const Piece& b) { return a.block < b.block; });
  std::vector<std::pair<int32_t, int64_t>> order;
  for (const Piece& p : pieces) {
    if (p.rows != nullptr) {
      for (int64_t r : *p.rows) order.emplace_back(p.source, r);
    } else {
      for (int64_t r = p.begin; r < p.begin + p.count; ++r) order.emplace_back(p.source, r);
    }
  }
  // Fisher-Yates with our own draws (std::shuffle's are the library's choice, not portable).
  uint64_t state = ShuffleKey(seed, -1 - static_cast<int64_t>(member), 0);
  for (size_t i = order.size(); i > 1; --i) {
    state = ShuffleKey(state, 0, static_cast<int64_t>(i));
    const auto k = static_cast<size_t>((static_cast<unsigned __int128>(state) * i) >> 64);
    std::swap(order[i - 1], order[k]);
  }
  return order;
}

// MemberMain's steps (all_to_all.h's numbered list), each on what the one before gave it.

/// Step 1: the collective group of the members (none when alone, or outside MPI).
collective::Group JoinMembers(const MemberPlan& plan, std::function<bool()> aborted) {
  if (!plan.collective || plan.ranks.size() < 2) return collective::Group();
  collective::GroupOptions o;
  o.timeout = std::chrono::milliseconds(plan.timeout_ms);
  o.aborted = std::move(aborted);
  return collective::Group::Create(plan.key, plan.ranks, o);
}

/// A member's input: its blocks, cut to the rows that count, and where they are in the
/// operator's input.
struct MemberInput {
  Schema schema;
  std::vector<Block> blocks;
  std::vector<int64_t> mine;   // the input block each of `blocks` is
  std::vector<int64_t> start;  // the first row of every input block; back(): all rows
};

/// Step 2: Gets this member's blocks. Aggregate combines them at once (map-side): only one
/// partial row per key leaves the member.
MemberInput GetInput(const AllToAllSpec& spec, const MemberPlan& plan, int member) {
  MemberInput in;
  in.schema = SchemaOf(plan);
  in.start.assign(plan.blocks.size() + 1, 0);
  for (size_t b = 0; b < plan.blocks.size(); ++b) {
    in.start[b + 1] = in.start[b] + plan.rows[b];
    if (plan.member_of[b] == member) in.mine.push_back(static_cast<int64_t>(b));
  }
  std::vector<ObjectRef<Block>> refs;
  for (int64_t b : in.mine) refs.push_back(plan.blocks[static_cast<size_t>(b)]);
  if (!refs.empty()) {
    auto got = Get(refs, static_cast<int>(std::min<int64_t>(plan.timeout_ms, INT32_MAX)));
    for (size_t k = 0; k < got.size(); ++k) {
      Block b = *got[k];
      const int64_t keep = plan.rows[static_cast<size_t>(in.mine[k])];
      if (keep < b.num_rows()) b = b.Slice(0, keep);
      if (b.num_rows() > 0 && b.schema() != in.schema) {
        throw Error("block " + std::to_string(in.mine[k]) + " has the schema " + b.schema().ToString() +
                    ", not the dataset's " + in.schema.ToString());
      }
      in.blocks.push_back(std::move(b));
    }
  }
  if (spec.kind == AllToAllSpec::kAggregate) {
    Block partial = CombinePartials(in.blocks, in.schema, spec.key, spec.aggs);
    in.schema = PartialSchema(in.schema, spec.key, spec.aggs);
    in.blocks.clear();
    in.mine.clear();
    if (partial.num_rows() > 0) {
      in.blocks.push_back(std::move(partial));
      in.mine.push_back(member);
    }
  }
  return in;
}

bool IsShuffle(const AllToAllSpec& spec) {
  return spec.kind == AllToAllSpec::kRandomShuffle || (spec.kind == AllToAllSpec::kRepartition && spec.shuffle);
}
bool IsOrderedRepartition(const AllToAllSpec& spec) {
  return spec.kind == AllToAllSpec::kRepartition && !spec.shuffle;
}

/// What the whole exchange emits: member j's output blocks are [before[j], before[j + 1]),
/// and an ordered Repartition's output block o holds rows[o] rows.
struct OutputLayout {
  std::vector<int64_t> before;
  std::vector<int64_t> rows;  // ordered Repartition only
};

OutputLayout LayOut(const AllToAllSpec& spec, const MemberPlan& plan, int64_t total_rows) {
  const size_t members = plan.ranks.size();
  OutputLayout out;
  out.before.assign(members + 1, 0);
  for (size_t j = 0; j < members; ++j) out.before[j + 1] = out.before[j] + plan.outputs_per_member[j];
  if (IsOrderedRepartition(spec)) out.rows = EqualParts(total_rows, spec.num_blocks);
  return out;
}

/// Where a member's rows go: per destination member, pieces of its blocks; a shuffle's rows
/// that stay here are `kept` instead (gathered straight from the input blocks: no bucket,
/// no copy to itself, a third of the bytes at 3 ranks).
struct Routes {
  std::vector<std::vector<BucketPiece>> buckets;
  std::vector<BucketPiece> kept;
};

/// Step 2 (continued): gives every row of `in` a destination member: by global row position
/// (ordered Repartition), by its random key (shuffles), by key range (Sort, GroupBy: the
/// members' samples pick the boundaries, a collective step).
Routes Route(const AllToAllSpec& spec, collective::Group* g, int member, const MemberInput& in,
             const OutputLayout& layout) {
  const int members = static_cast<int>(layout.before.size()) - 1;
  const bool shuffle = IsShuffle(spec);
  // Ordered Repartition: the first row of each member's range.
  std::vector<int64_t> member_lo(static_cast<size_t>(members) + 1, 0);
  if (IsOrderedRepartition(spec)) {
    for (int j = 0; j < members; ++j) {
      member_lo[j + 1] = member_lo[j];
      for (int64_t o = layout.before[j]; o < layout.before[j + 1]; ++o) member_lo[j + 1] += layout.rows[o];
    }
  }
  Block sample;
  std::vector<int64_t> boundaries;
  if (spec.kind == AllToAllSpec::kSort || spec.kind == AllToAllSpec::kAggregate ||
      spec.kind == AllToAllSpec::kMapGroups) {
    Schema key_schema;
    for (const Field& f : in.schema.fields) {
      if (f.name == spec.key) key_schema.fields.push_back(f);
    }
    std::tie(sample, boundaries) = SampleBoundaries(g, members, in.blocks, key_schema, spec.key, spec.descending);
  }
  Routes routes;
  routes.buckets.resize(static_cast<size_t>(members));
  for (size_t k = 0; k < in.blocks.size(); ++k) {
    const Block& b = in.blocks[k];
    const int64_t index = in.mine[k];
    if (b.num_rows() == 0) continue;
    std::vector<BucketPiece> per(static_cast<size_t>(members));
    for (auto& p : per) {
      p.block = &b;
      p.input_block = index;
    }
    if (IsOrderedRepartition(spec)) {
      const int64_t s = in.start[static_cast<size_t>(index)];
      for (int j = 0; j < members; ++j) {
        const int64_t lo = std::max(member_lo[j], s), hi = std::min(member_lo[j + 1], s + b.num_rows());
        for (int64_t r = lo; r < hi; ++r) per[j].rows.push_back(r - s);
      }
    } else if (shuffle) {
      for (int64_t r = 0; r < b.num_rows(); ++r) {
        const uint64_t key = ShuffleKey(spec.seed, index, r);
        // Destinations weighted by each member's output blocks.
        const uint64_t slot = static_cast<uint64_t>(
            (static_cast<unsigned __int128>(key) * static_cast<uint64_t>(layout.before.back())) >> 64);
        const int j = static_cast<int>(std::upper_bound(layout.before.begin(), layout.before.end(),
                                                        static_cast<int64_t>(slot)) -
                                       layout.before.begin()) - 1;
        per[j].rows.push_back(r);
      }
    } else {
      const std::vector<int32_t> dest =
          sample.num_rows() > 0 ? RangePartition(b.GetColumn(spec.key), sample.GetColumn(spec.key), boundaries,
                                                 spec.descending)
                                : std::vector<int32_t>(static_cast<size_t>(b.num_rows()), 0);
      for (int64_t r = 0; r < b.num_rows(); ++r) per[dest[r]].rows.push_back(r);
    }
    for (int j = 0; j < members; ++j) {
      if (per[j].rows.empty()) continue;
      if (shuffle && j == member) {
        routes.kept.push_back(std::move(per[j]));
      } else {
        routes.buckets[j].push_back(std::move(per[j]));
      }
    }
  }
  return routes;
}

/// The rows a member has after the swap: sources[j] is member j's bucket, read in place
/// (decoded[j] its pieces), then the blocks of its kept pieces from first_kept on.
struct Received {
  std::vector<DecodedBucket> decoded;
  std::vector<Block> sources;
  int32_t first_kept = 0;
  int64_t rows = 0;
  int64_t sent_bytes = 0;
};

/// Step 3: writes each destination's rows into one send buffer and swaps the buckets.
Received SwapBuckets(collective::Group* g, const Schema& schema, Routes& routes, PhaseClock& clock) {
  const int members = static_cast<int>(routes.buckets.size());
  std::vector<int64_t> send_bytes(static_cast<size_t>(members)), send_at(static_cast<size_t>(members));
  Received got;
  for (int j = 0; j < members; ++j) {
    send_bytes[j] = static_cast<int64_t>(BucketBytes(schema, routes.buckets[j], false));
    send_at[j] = got.sent_bytes;
    got.sent_bytes += send_bytes[j];
  }
  std::shared_ptr<char> send = ScratchBuffer(static_cast<uint64_t>(got.sent_bytes));
  for (int j = 0; j < members; ++j) {
    WriteBucket(schema, routes.buckets[j], nullptr, send.get() + send_at[j]);
  }
  routes.buckets.clear();
  clock.Mark("write buckets");
  std::vector<int64_t> recv_bytes, recv_at;
  std::shared_ptr<char> recv = Swap(g, send, send_bytes, send_at, recv_bytes, recv_at);
  send.reset();
  // Step 4: the received buckets, read in place.
  for (int j = 0; j < members; ++j) {
    got.decoded.push_back(ReadBucket(schema, recv.get() + recv_at[j], static_cast<uint64_t>(recv_bytes[j]), recv));
    got.sources.push_back(got.decoded.back().block);
    got.rows += got.sources.back().num_rows();
  }
  got.first_kept = static_cast<int32_t>(got.sources.size());
  for (const BucketPiece& p : routes.kept) {
    got.sources.push_back(*p.block);
    got.rows += static_cast<int64_t>(p.rows.size());
  }
  return got;
}

/// Step 5, ordered Repartition: the received pieces in input block order, cut at this
/// member's output blocks' sizes.
std::vector<ExchangeOutput> EmitRepartition(const Received& got, int member, const OutputLayout& layout) {
  struct Piece {
    int64_t block;
    int32_t source;
    int64_t begin, count;
  };
  std::vector<Piece> pieces;
  for (size_t j = 0; j < got.decoded.size(); ++j) {
    int64_t at = 0;
    for (const auto& [block, n] : got.decoded[j].pieces) {
      pieces.push_back({block, static_cast<int32_t>(j), at, n});
      at += n;
    }
  }
  std::sort(pieces.begin(), pieces.end(), [](const Piece& a, const Piece& b) { return a.block < b.block; });
  std::vector<Run> runs;
  for (const Piece& p : pieces) runs.push_back({p.source, p.begin, p.count});
  std::vector<ExchangeOutput> outputs;
  int64_t at = 0;
  for (int64_t o = layout.before[member]; o < layout.before[member + 1]; ++o) {
    const int64_t n = layout.rows[static_cast<size_t>(o)];
    outputs.push_back(n > 0 ? PutGathered(got.sources, SliceRuns(runs, at, n)) : PutOutput(Block()));
    at += n;
  }
  return outputs;
}

/// Step 4 (continued): the order of the received rows: random (shuffles), or by the key,
/// stable by input block and row (a bucket's rows keep their block's order).
std::vector<std::pair<int32_t, int64_t>> OrderRows(const AllToAllSpec& spec, const Received& got,
                                                   const Routes& routes, int member) {
  if (IsShuffle(spec)) return ShuffledOrder(got.decoded, routes.kept, got.first_kept, spec.seed, member);
  std::vector<std::vector<int64_t>> block_of(got.decoded.size());
  for (size_t j = 0; j < got.decoded.size(); ++j) {
    for (const auto& [block, n] : got.decoded[j].pieces) {
      block_of[j].insert(block_of[j].end(), static_cast<size_t>(n), block);
    }
  }
  return SortedOrderBy(got.sources, spec.key, spec.descending, &block_of);
}

/// Step 5, RandomShuffle, Repartition(shuffle), Sort: the ordered rows cut into this
/// member's output blocks, each written straight into its object.
std::vector<ExchangeOutput> EmitBlocks(const AllToAllSpec& spec, const Received& got,
                                       const std::vector<std::pair<int32_t, int64_t>>& order, int64_t my_outputs) {
  std::vector<ExchangeOutput> outputs;
  size_t at = 0;
  for (int64_t n : EqualParts(got.rows, std::max<int64_t>(1, my_outputs))) {
    if (n == 0 && spec.kind != AllToAllSpec::kRepartition) continue;
    outputs.push_back(n > 0 ? PutGathered(got.sources, ToRuns(order, at, at + static_cast<size_t>(n)))
                            : PutOutput(Block()));
    at += static_cast<size_t>(n);
  }
  return outputs;
}

/// Step 5, Aggregate and MapGroups: the sorted rows' groups merged into one row each, or
/// given to the UDF once per group (a slice of the sorted rows: no copy).
std::vector<ExchangeOutput> EmitGroups(const AllToAllSpec& spec, const Block& sorted) {
  std::vector<ExchangeOutput> outputs;
  if (spec.kind == AllToAllSpec::kAggregate) {
    outputs.push_back(PutOutput(MergePartialsSorted(sorted, spec.key, spec.aggs)));
    return outputs;
  }
  const Column& group_keys = sorted.GetColumn(spec.key);
  std::vector<Block> results;
  for (const auto& [b, e] : GroupRanges(group_keys)) {
    try {
      Block out = spec.has_bound ? platform::Invoke<Block>(spec.fn, spec.bound, sorted.Slice(b, e))
                                 : platform::Invoke<Block>(spec.fn, sorted.Slice(b, e));
      if (out.num_rows() > 0) results.push_back(std::move(out));
    } catch (...) {
      throw Error("the function failed on the group of key " + DescribeKey(group_keys, b) + ": " +
                  platform::DescribeException(std::current_exception()));
    }
  }
  if (!results.empty()) outputs.push_back(PutOutput(results.size() == 1 ? results[0] : Block::Concat(results)));
  return outputs;
}

/// One member's whole exchange (all_to_all.h's steps 1 to 5).
std::vector<ExchangeOutput> MemberMain(const MemberPlan& plan, int member, std::function<bool()> aborted) {
  const AllToAllSpec& spec = plan.spec;
  PhaseClock clock;
  collective::Group group = JoinMembers(plan, std::move(aborted));
  collective::Group* g = group.valid() ? &group : nullptr;
  clock.Mark("group");
  MemberInput in = GetInput(spec, plan, member);
  clock.Mark("get");
  const OutputLayout layout = LayOut(spec, plan, in.start.back());
  Routes routes = Route(spec, g, member, in, layout);
  clock.Mark("partition");
  const Received got = SwapBuckets(g, in.schema, routes, clock);
  if (routes.kept.empty()) in.blocks.clear();  // the inputs' objects may go now (kept rows point into them)
  clock.Mark("AllToAllV");

  if (IsOrderedRepartition(spec)) return EmitRepartition(got, member, layout);
  if (got.rows == 0) return {};
  const std::vector<std::pair<int32_t, int64_t>> order = OrderRows(spec, got, routes, member);
  clock.Mark("order");
  if (spec.kind == AllToAllSpec::kRandomShuffle || spec.kind == AllToAllSpec::kRepartition ||
      spec.kind == AllToAllSpec::kSort) {
    std::vector<ExchangeOutput> outputs = EmitBlocks(spec, got, order, plan.outputs_per_member[member]);
    clock.Mark("gather into the store");
    clock.Print(member, got.sent_bytes);
    return outputs;
  }
  return EmitGroups(spec, Gather(got.sources, order, 0, order.size()));
}

}  // namespace

/// One member of an exchange: a WorkerGroup loop, given the MemberPlan as bytes. Returns its
/// output blocks' refs and metadata as bytes: the group holds them (by holding this task's
/// result) until the driver has read them. The group's abort (another member failed, or the
/// driver gave up) breaks the member out of its collectives.
std::string PrismDataAllToAllMember(std::string config) {
  const platform::WorkerContext& me = platform::CurrentWorker();
  const MemberPlan plan = platform::FromBytes<MemberPlan>(config);
  auto aborted = std::make_shared<std::atomic<bool>>(false);
  me.OnAbort([aborted] { aborted->store(true); });
  try {
    return platform::ToBytes(MemberMain(plan, me.info().index, [aborted] { return aborted->load(); }));
  } catch (...) {
    throw OpError("prism::data: " + plan.spec.Name() + " failed on member " + std::to_string(me.info().index) +
                  " (rank " + std::to_string(me.info().rank) + "): " +
                  platform::DescribeException(std::current_exception()));
  }
}

}  // namespace prism::data::internal

PRISM_REMOTE(prism::data::internal::PrismDataAllToAllMember);

namespace prism::data::internal {

// ---- The driver side -------------------------------------------------------------------------

namespace {

bool InMpiJob() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  return initialized && !finalized;
}

}  // namespace

AllToAllExchange::AllToAllExchange(const AllToAllSpec& spec, std::vector<ExchangeInput> inputs,
                                   double reserve_timeout_s)
    : spec_(spec) {
  const bool timing = std::getenv("PRISM_DATA_A2A_TIMING") != nullptr;
  auto mark = [&](const char* what) {
    if (timing) timing_ += std::string(what) + " " + std::to_string(PhaseClock::WallSeconds()) + ", ";
  };
  mark("driver started");
  const std::string what = "prism::data: " + spec_.Name();
  // One schema: the first non-empty block's.
  std::vector<ExchangeInput> used;
  for (ExchangeInput& in : inputs) {
    if (in.rows > 0) used.push_back(std::move(in));
  }
  inputs.clear();
  if (used.empty()) {
    if (spec_.kind == AllToAllSpec::kRepartition) {
      for (int64_t o = 0; o < spec_.num_blocks; ++o) outputs_.push_back(PutOutput(Block()));
    }
    done_ = true;
    return;
  }
  const ExchangeInput& first = used.front();
  for (size_t b = 1; b < used.size(); ++b) {
    if (used[b].names != first.names || used[b].dtypes != first.dtypes || used[b].shapes != first.shapes) {
      throw Error(what + ": the blocks have different columns (" + JoinNames(first.names) + " and " +
                  JoinNames(used[b].names) + ", or their types differ); make them alike first (e.g. with "
                  "SelectColumns or a Map)");
    }
  }
  auto column = [&](const std::string& name, const char* role) -> size_t {
    auto it = std::find(first.names.begin(), first.names.end(), name);
    if (it == first.names.end()) {
      throw Error(what + ": there is no column \"" + name + "\" to " + role + "; the dataset has " +
                  JoinNames(first.names));
    }
    return static_cast<size_t>(it - first.names.begin());
  };
  if (spec_.kind == AllToAllSpec::kSort || spec_.kind == AllToAllSpec::kAggregate ||
      spec_.kind == AllToAllSpec::kMapGroups) {
    const size_t k = column(spec_.key, spec_.kind == AllToAllSpec::kSort ? "sort by" : "group by");
    if (!first.shapes[k].empty()) {
      throw Error(what + ": the key column \"" + spec_.key + "\" holds arrays (" +
                  ShapeToString(first.shapes[k]) + " per row); a key must be one value per row");
    }
  }
  if (spec_.kind == AllToAllSpec::kAggregate) {
    for (const AggSpec& agg : spec_.aggs) {
      if (agg.kind == AggSpec::kCount) continue;
      const size_t c = column(agg.column, "aggregate");
      const auto dtype = static_cast<DType>(first.dtypes[c]);
      if (!IsNumeric(dtype) || !first.shapes[c].empty()) {
        throw Error(what + ": " + agg.Name() + " needs a numeric column of scalars (int32, int64, uint8, "
                    "float32, float64), but \"" + agg.column + "\" holds " + DTypeName(dtype) +
                    (first.shapes[c].empty() ? "" : ShapeToString(first.shapes[c])));
      }
    }
  }
  if (!spec_.has_seed) {
    std::random_device rd;
    spec_.seed = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  }

  // The members: one per rank with a CPU, in an MPI job; else one.
  std::vector<int> candidates;
  const bool mpi = InMpiJob();
  if (mpi) {
    for (const auto& node : state::ListNodes()) {
      auto cpu = node.resources_total.find("CPU");
      if (cpu != node.resources_total.end() && cpu->second >= 1) candidates.push_back(node.rank);
    }
  }
  const int members = std::max<int>(1, static_cast<int>(candidates.size()));
  platform::WorkerGroupOptions group_options;
  group_options.num_workers = members;
  group_options.resources_per_worker = {{"CPU", 1.0}};
  group_options.strategy = PlacementStrategy::SPREAD;
  group_options.one_worker_per_rank = members > 1;
  group_options.name = "data_" + spec_.Name();
  group_options.reserve_timeout_s = static_cast<int>(std::clamp(reserve_timeout_s, 1.0, 1e6));
  mark("nodes listed");
  const std::string reserving = what + ": could not reserve one CPU on each of " + std::to_string(members) +
                                " ranks for the exchange (ExecutionOptions::task_timeout_s bounds the wait): ";
  try {
    group_ = std::make_unique<platform::WorkerGroup>(group_options);
  } catch (const ResourceError& e) {
    throw ResourceError(reserving + e.what());
  } catch (const Error& e) {
    throw Error(reserving + e.what());
  }
  mark("bundles reserved");
  MemberPlan plan;
  plan.spec = spec_;
  for (const platform::WorkerInfo& w : group_->workers()) plan.ranks.push_back(w.rank);
  plan.key = "prism-data-a2a/" + group_->id();
  plan.collective = mpi && members > 1;
  plan.timeout_ms = static_cast<int64_t>(std::max(1.0, reserve_timeout_s) * 1000);
  plan.names = first.names;
  plan.dtypes = first.dtypes;
  plan.shapes = first.shapes;
  std::vector<uint64_t> bytes;
  std::vector<int> ranks;
  for (const ExchangeInput& in : used) {
    plan.blocks.push_back(in.block);
    plan.rows.push_back(in.rows);
    bytes.push_back(in.bytes);
    ranks.push_back(in.rank);
  }
  for (int m : AssignBlocks(bytes, ranks, plan.ranks)) plan.member_of.push_back(m);
  if (spec_.kind == AllToAllSpec::kRepartition) {
    plan.outputs_per_member = EqualParts(spec_.num_blocks, members);
  } else {
    plan.outputs_per_member = EqualParts(static_cast<int64_t>(used.size()), members);
  }
  inputs_ = plan.blocks;  // the config holds their ids only
  results_.resize(static_cast<size_t>(members));
  group_->Start(platform::RegisteredName(PrismDataAllToAllMember), platform::ToBytes(plan));
  tasks_ = members;
  mark("members launched");
}

// The group aborts members still running (waiting up to 30 s for them) and gives the
// reservation back.
AllToAllExchange::~AllToAllExchange() = default;

bool AllToAllExchange::Poll(int timeout_ms) {
  if (done_) return true;
  if (!failure_.empty()) throw Error(failure_);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(std::max(0, timeout_ms));
  while (group_->Running()) {
    const int64_t left = timeout_ms < 0 ? -1
                                        : std::max<int64_t>(0, std::chrono::duration_cast<std::chrono::milliseconds>(
                                                                   deadline - std::chrono::steady_clock::now())
                                                                   .count());
    std::optional<platform::WorkerEvent> e = group_->Next(left);
    if (!e) return false;
    if (e->kind == platform::WorkerEvent::kFailed) Fail(*e);
    if (e->kind == platform::WorkerEvent::kFinished) {
      // Read now, while the group holds the member's result (and so its blocks).
      results_.at(static_cast<size_t>(e->worker)) = platform::FromBytes<std::vector<ExchangeOutput>>(e->bytes);
    }
  }
  for (std::vector<ExchangeOutput>& member : results_) {
    for (ExchangeOutput& out : member) outputs_.push_back(std::move(out));
  }
  results_.clear();
  if (!timing_.empty()) timing_ += "outputs received " + std::to_string(PhaseClock::WallSeconds()) + ", ";
  group_.reset();  // the reservation goes back
  inputs_.clear();
  if (!timing_.empty()) std::fprintf(stderr, "prism::data exchange driver: %sreleased %.3f\n", timing_.c_str(), PhaseClock::WallSeconds());
  done_ = true;
  return true;
}

void AllToAllExchange::Fail(const platform::WorkerEvent& e) {
  const int rank = group_->workers().at(static_cast<size_t>(e.worker)).rank;
  // A failed member fails the operator. The group's end aborts the others (their
  // collectives see it and stop; they are waited for up to 30 s), so their CPUs are free
  // when the error reaches the caller.
  group_.reset();
  inputs_.clear();
  results_.clear();
  failure_ = IsOpErrorType(e.error_type) ? e.message
                                         : "prism::data: " + spec_.Name() + " failed on member " +
                                               std::to_string(e.worker) + " (rank " + std::to_string(rank) +
                                               "): " + e.bytes;
  throw Error(failure_);
}

}  // namespace prism::data::internal
