// Error Weighted Hashing: the functions, a code's keywords and a query's
// weighted buckets (genie/ewh.hpp).
#include "genie/ewh.hpp"

#include <algorithm>
#include <string>

#include "genie/codes.hpp"
#include "genie/lsh.hpp"

namespace genie {

namespace {

// A uniform draw in [0, n) without modulo bias (Lemire's rejection).
uint32_t Below(uint64_t* state, uint32_t n) {
  const uint64_t limit = UINT64_MAX - UINT64_MAX % n;
  uint64_t x;
  do {
    x = SplitMix64(state);
  } while (x >= limit);
  return static_cast<uint32_t>(x % n);
}

}  // namespace

int64_t EwhBinomial(int32_t n, int32_t r) {
  if (r < 0 || r > n) return 0;
  int64_t c = 1;
  for (int32_t i = 1; i <= r; ++i) c = c * (n - r + i) / i;
  return c;
}

std::vector<int32_t> EwhDefaultWeights(int32_t errors) {
  std::vector<int32_t> w;
  for (int32_t r = 0; r <= errors; ++r) w.push_back(errors + 1 - r);
  return w;
}

Status EwhFunctions::Create(const EwhParams& params, std::unique_ptr<EwhFunctions>* out) {
  if (out == nullptr) return Status::InvalidArgument("EwhFunctions::Create: NULL output");
  if (params.bits < 1 || params.bits > kMaxCodeBits)
    return Status::InvalidArgument("EWH: codes of " + std::to_string(params.bits) + " bits");
  if (params.functions < 1) return Status::InvalidArgument("EWH needs at least one function");
  const int32_t h_max = std::min(params.bits, kMaxEwhSampleBits);
  if (params.sample_bits < 1 || params.sample_bits > h_max)
    return Status::InvalidArgument("EWH: " + std::to_string(params.sample_bits) +
                                   " bits per function; codes of " + std::to_string(params.bits) +
                                   " bits allow 1 to " + std::to_string(h_max));
  if ((static_cast<int64_t>(params.functions) << params.sample_bits) - 1 > INT32_MAX)
    return Status::InvalidArgument("EWH: m * 2^h is beyond the int32 keyword range");
  auto f = std::unique_ptr<EwhFunctions>(new EwhFunctions());
  f->params_ = params;
  const std::size_t total = static_cast<std::size_t>(params.functions) * static_cast<std::size_t>(params.sample_bits);
  f->bytes_.resize(total);
  f->shifts_.resize(total);
  uint64_t state = params.seed ^ 0x45574821ULL;  // "EWH!": apart from the vector LSH draws
  std::vector<uint32_t> pool(static_cast<std::size_t>(params.bits));
  for (int32_t p = 0; p < params.bits; ++p) pool[static_cast<std::size_t>(p)] = static_cast<uint32_t>(p);
  std::vector<uint32_t> picks(static_cast<std::size_t>(params.sample_bits));
  for (int32_t i = 0; i < params.functions; ++i) {
    // h distinct positions: a partial Fisher-Yates shuffle of [0, b), undone
    // afterwards (m x h steps, where refilling the pool would be m x b)
    for (int32_t j = 0; j < params.sample_bits; ++j) {
      const uint32_t pick = static_cast<uint32_t>(j) + Below(&state, static_cast<uint32_t>(params.bits - j));
      picks[static_cast<std::size_t>(j)] = pick;
      std::swap(pool[static_cast<std::size_t>(j)], pool[pick]);
      const uint32_t position = pool[static_cast<std::size_t>(j)];
      const std::size_t at = static_cast<std::size_t>(i) * static_cast<std::size_t>(params.sample_bits) +
                             static_cast<std::size_t>(j);
      f->bytes_[at] = position / 8;
      f->shifts_[at] = static_cast<uint8_t>(7 - position % 8);
    }
    for (int32_t j = params.sample_bits - 1; j >= 0; --j)
      std::swap(pool[static_cast<std::size_t>(j)], pool[picks[static_cast<std::size_t>(j)]]);
  }
  *out = std::move(f);
  return Status::Ok();
}

uint32_t EwhFunctions::Value(const uint64_t* code, int32_t function) const {
  const auto* bytes = reinterpret_cast<const uint8_t*>(code);
  const int32_t h = params_.sample_bits;
  const std::size_t base = static_cast<std::size_t>(function) * static_cast<std::size_t>(h);
  uint32_t v = 0;
  for (int32_t j = 0; j < h; ++j)
    v |= static_cast<uint32_t>((bytes[bytes_[base + j]] >> shifts_[base + j]) & 1u) << j;
  return v;
}

void EwhFunctions::Keywords(const uint64_t* code, int32_t* out) const {
  for (int32_t i = 0; i < params_.functions; ++i)
    out[i] = static_cast<int32_t>((static_cast<uint32_t>(i) << params_.sample_bits) | Value(code, i));
}

int32_t EwhFunctions::ErrorsAsked(int32_t errors) const {
  return std::clamp(errors, 0, std::min(params_.sample_bits, kMaxEwhErrors));
}

int64_t EwhFunctions::QueryBuckets(int32_t errors) const {
  errors = ErrorsAsked(errors);
  int64_t per_function = 0;
  for (int32_t r = 0; r <= errors; ++r) per_function += EwhBinomial(params_.sample_bits, r);
  return per_function * params_.functions;
}

void EwhFunctions::QueryKeywords(const uint64_t* code, int32_t errors, int32_t* out) const {
  const int32_t h = params_.sample_bits;
  const int32_t e = ErrorsAsked(errors);
  for (int32_t i = 0; i < params_.functions; ++i) {
    const uint32_t base = static_cast<uint32_t>(i) << h;
    const uint32_t v = Value(code, i);
    *out++ = static_cast<int32_t>(base | v);
    int32_t* group = out;
    if (e >= 1)
      for (int32_t a = 0; a < h; ++a) *out++ = static_cast<int32_t>(base | (v ^ (1u << a)));
    std::sort(group, out);  // each group ascending: what an item's ranges should be
    group = out;
    if (e >= 2)
      for (int32_t a = 0; a < h; ++a)
        for (int32_t b = a + 1; b < h; ++b) *out++ = static_cast<int32_t>(base | (v ^ (1u << a) ^ (1u << b)));
    std::sort(group, out);
    group = out;
    if (e >= 3)
      for (int32_t a = 0; a < h; ++a)
        for (int32_t b = a + 1; b < h; ++b)
          for (int32_t c = b + 1; c < h; ++c)
            *out++ = static_cast<int32_t>(base | (v ^ (1u << a) ^ (1u << b) ^ (1u << c)));
    std::sort(group, out);
  }
}

Status EwhFunctions::AddQuery(const uint64_t* code, int32_t errors, Span<int32_t> weights,
                              QueryBatch* batch) const {
  const int32_t h = params_.sample_bits;
  if (batch == nullptr) return Status::InvalidArgument("EWH: NULL batch");
  if (errors < 0 || errors > std::min(h, kMaxEwhErrors))
    return Status::InvalidArgument("EWH: " + std::to_string(errors) + " errors; at most " +
                                   std::to_string(std::min(h, kMaxEwhErrors)) + " with h = " + std::to_string(h));
  if (weights.size() != static_cast<std::size_t>(errors) + 1)
    return Status::InvalidArgument("EWH: one weight per error count 0..e");
  for (int32_t w : weights)
    if (w < 1) return Status::InvalidArgument("EWH: weights must be at least 1");
  std::vector<int32_t> keywords(static_cast<std::size_t>(QueryBuckets(errors)));
  QueryKeywords(code, errors, keywords.data());
  batch->BeginQuery();
  std::vector<KeywordRange> ranges;
  std::size_t at = 0;
  for (int32_t i = 0; i < params_.functions; ++i) {
    for (int32_t r = 0; r <= errors; ++r) {
      const std::size_t count = static_cast<std::size_t>(EwhBinomial(h, r));
      ranges.clear();
      for (std::size_t j = 0; j < count; ++j) ranges.push_back({keywords[at + j], keywords[at + j]});
      at += count;
      batch->AddItem(Span<KeywordRange>(ranges.data(), ranges.size()), weights[static_cast<std::size_t>(r)]);
    }
  }
  return Status::Ok();
}

}  // namespace genie
