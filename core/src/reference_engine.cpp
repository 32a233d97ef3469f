// The reference engine: the obviously-right oracle the fast engines are
// tested against.  One 64-bit count per object, every posting added, a sort.
// No cleverness here on purpose.
#include <algorithm>
#include <exception>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "genie/engine.hpp"

namespace genie {

Status ValidateK(int32_t k) {
  if (k < 1) return Status::InvalidArgument("k must be at least 1, got " + std::to_string(k));
  return Status::Ok();
}

namespace {

class ReferenceEngine final : public HostIndexEngine {
 public:
  genie_engine_kind kind() const override { return GENIE_ENGINE_CPU_REFERENCE; }

  Status Search(const genie_query_batch& batch, int32_t k, TopKResults* out) override {
    GENIE_RETURN_IF_ERROR(CheckSearch(k, out));
    try {
      CompiledBatch compiled;
      GENIE_RETURN_IF_ERROR(CompileBatch(*index_, batch, &compiled));
      const InvertedIndex& index = *index_;
      const Span<int32_t> postings = index.postings();

      TopKResults results;
      std::vector<int64_t> score(static_cast<std::size_t>(index.num_objects()));
      std::vector<Hit> hits;
      for (int32_t q = 0; q < compiled.num_queries(); ++q) {
        std::fill(score.begin(), score.end(), 0);
        for (int64_t s = compiled.query_slice_offsets[q]; s < compiled.query_slice_offsets[q + 1];
             ++s) {
          const ListSlice& slice = compiled.slices[static_cast<std::size_t>(s)];
          for (int64_t i = slice.begin; i < slice.end; ++i) {
            score[static_cast<std::size_t>(postings[static_cast<std::size_t>(i)])] += slice.weight;
          }
        }
        hits.clear();
        for (std::size_t o = 0; o < score.size(); ++o) {
          if (score[o] >= 1) {
            hits.push_back({static_cast<int32_t>(o), static_cast<int32_t>(score[o])});
          }
        }
        const std::size_t keep = std::min(hits.size(), static_cast<std::size_t>(k));
        std::partial_sort(hits.begin(), hits.begin() + static_cast<std::ptrdiff_t>(keep),
                          hits.end(), HitBefore);
        results.hits.insert(results.hits.end(), hits.begin(),
                            hits.begin() + static_cast<std::ptrdiff_t>(keep));
        results.query_offsets.push_back(static_cast<int64_t>(results.hits.size()));
      }
      *out = std::move(results);
      return Status::Ok();
    } catch (const std::bad_alloc&) {
      return Status::OutOfMemory("out of host memory in the reference engine");
    } catch (const std::exception& e) {
      return Status::Internal(std::string("reference engine failed: ") + e.what());
    }
  }
};

}  // namespace

Status HostIndexEngine::CheckSearch(int32_t k, const TopKResults* out) const {
  if (out == nullptr) return Status::InvalidArgument("results output is NULL");
  GENIE_RETURN_IF_ERROR(ValidateK(k));
  if (index_ == nullptr) return Status::InvalidArgument("no index uploaded to the engine");
  return Status::Ok();
}

Status HostIndexEngine::MatchSet(SetPredicate predicate, Span<int32_t> keywords,
                                 Span<int32_t> object_sizes, std::vector<int32_t>* out) {
  if (out == nullptr) return Status::InvalidArgument("set match output is NULL");
  if (index_ == nullptr) return Status::InvalidArgument("no index uploaded to the engine");
  try {
    return genie::MatchSet(*index_, predicate, keywords, object_sizes, match_cancel_, out);
  } catch (const std::bad_alloc&) {
    return Status::OutOfMemory("out of host memory matching a set");
  }
}

std::unique_ptr<Engine> MakeReferenceEngine() { return std::make_unique<ReferenceEngine>(); }

}  // namespace genie
