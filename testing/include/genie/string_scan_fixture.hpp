// Random string sets and a brute-force oracle for the string scan tests of
// core/ (CPU engine) and gpu/ (GPU engine against the CPU engine).
#pragma once
#include <algorithm>
#include <cstdint>
#include <random>
#include <tuple>
#include <vector>

#include "genie/sequence.hpp"
#include "genie/string_scan.hpp"

namespace genie {
namespace testing {

// Words over a small alphabet with non-ASCII code points (Latin-1, CJK, an
// emoji), lengths from 0 to max_length, skewed short like a dictionary.
inline CodePointStrings RandomWords(std::mt19937* rng, int32_t n, int32_t max_length) {
  static const CodePoint kAlphabet[] = {'a', 'b', 'c', 'd', 'e', 'f', 0xE9, 0x65E5, 0x1F600};
  std::uniform_int_distribution<int32_t> pick(0, 8);
  std::geometric_distribution<int32_t> extra(0.15);
  CodePointStrings out;
  std::vector<CodePoint> s;
  for (int32_t i = 0; i < n; ++i) {
    const int32_t len = std::min(max_length, (i % 17 == 0 ? 0 : 2) + extra(*rng));
    s.assign(static_cast<std::size_t>(len), 0);
    for (CodePoint& c : s) c = kAlphabet[pick(*rng)];
    out.Add(s);
  }
  return out;
}

// s with `edits` random substitutions, insertions and deletions.
inline std::vector<CodePoint> MutateWord(std::mt19937* rng, std::vector<CodePoint> s, int32_t edits) {
  static const CodePoint kAlphabet[] = {'a', 'b', 'c', 'x', 'y', 0xE9, 0x65E5};
  std::uniform_int_distribution<int32_t> op(0, 2);
  std::uniform_int_distribution<int32_t> ch(0, 6);
  for (int32_t e = 0; e < edits; ++e) {
    const int32_t kind = s.empty() ? 1 : op(*rng);
    const std::size_t pos = std::uniform_int_distribution<std::size_t>(0, s.size())(*rng);
    if (kind == 0 && pos < s.size()) {
      s[pos] = kAlphabet[ch(*rng)];
    } else if (kind == 1) {
      s.insert(s.begin() + static_cast<std::ptrdiff_t>(pos), kAlphabet[ch(*rng)]);
    } else if (pos < s.size()) {
      s.erase(s.begin() + static_cast<std::ptrdiff_t>(pos));
    }
  }
  return s;
}

// The scan by brute force: every string's reference distance, sorted by
// (distance, length, id), within the cap, excluded ones dropped, first k.
inline StringScanResult BruteForceScan(const CodePointStrings& strings,
                                       const StringScanRequest& request) {
  StringScanResult out;
  for (int32_t q = 0; q < request.queries.size(); ++q) {
    std::vector<std::tuple<int32_t, int32_t, int32_t>> all;
    const int32_t cap = request.caps.empty() ? -1 : request.caps[static_cast<std::size_t>(q)];
    for (int32_t id = 0; id < strings.size(); ++id) {
      if (!request.excluded.empty() && request.excluded[static_cast<std::size_t>(id)] != 0) continue;
      const int32_t d = LevenshteinReference(request.queries.Get(q), strings.Get(id));
      if (cap >= 0 && d > cap) continue;
      all.emplace_back(d, static_cast<int32_t>(strings.Get(id).size()), id);
    }
    std::sort(all.begin(), all.end());
    if (all.size() > static_cast<std::size_t>(request.k)) all.resize(request.k);
    for (const auto& t : all) {
      out.objects.push_back(std::get<2>(t));
      out.distances.push_back(std::get<0>(t));
    }
    out.offsets.push_back(static_cast<int64_t>(out.objects.size()));
  }
  return out;
}

}  // namespace testing
}  // namespace genie
