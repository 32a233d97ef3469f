// The edit distance of one query to many strings (core-internal): what the
// string scan, its re-ranking and the List of Clusters' range search
// compute for every string they read.
#pragma once
#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "genie/cancel.hpp"
#include "genie/myers_pattern.hpp"
#include "genie/sequence.hpp"
#include "genie/span.hpp"

namespace genie {

// The distance function of one query: a prepared pattern when the query is
// short enough, else the banded dynamic programming of levenshtein_kernel.
class QueryDistance {
 public:
  explicit QueryDistance(Span<CodePoint> query) : query_(query) {
    if (query.size() <= static_cast<std::size_t>(kernel::kPatternMaxLength)) {
      pattern_ = std::make_unique<kernel::MyersPattern>();
      kernel::PreparePattern(query.data(), static_cast<int32_t>(query.size()), pattern_.get());
    }
  }
  // kernel::kStopped when cancel asked to stop inside one long distance.
  int32_t operator()(Span<CodePoint> s, int32_t cap, const CancelCheck& cancel) {
    if (pattern_ != nullptr) {
      const CodePoint* t = s.data();
      return kernel::PatternDistance(
          *pattern_, [t](int32_t j) { return t[j]; }, static_cast<int32_t>(s.size()), cap);
    }
    const std::size_t shorter = std::min(query_.size(), s.size());
    if (row_.size() < shorter + 1) row_.resize(shorter + 1);
    // one pair of long strings can take seconds: the DP polls cancel about every millisecond
    auto poll = [&cancel]() { return cancel.requested(); };
    return kernel::CappedDistance(query_.data(), static_cast<int32_t>(query_.size()), s.data(),
                                  static_cast<int32_t>(s.size()), cap, row_.data(), poll);
  }

 private:
  Span<CodePoint> query_;
  std::unique_ptr<kernel::MyersPattern> pattern_;
  std::vector<int32_t> row_;
};

}  // namespace genie
