// Tests of the sequence-similarity building blocks: UTF-8, ordered n-grams
// and their keywords, Lemma 5.1, the Theorem 5.1 bound, the Levenshtein
// implementations, CPU batch verification, and the top-k certificate.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "genie/sequence.hpp"

namespace genie {
namespace {

using Str = std::vector<CodePoint>;

Str Decode(const std::string& s) {
  Str out;
  Status st = DecodeUtf8(s.data(), s.size(), &out);
  EXPECT_TRUE(st.ok()) << st.message();
  return out;
}

// Characters drawn from a small alphabet (so grams repeat), with non-ASCII
// ones: Latin-1, CJK, an emoji (4-byte UTF-8).
const CodePoint kAlphabet[] = {'a', 'b', 'c', 'd', 0xE9, 0xDF, 0x65E5, 0x1F600};

Str RandomString(std::mt19937* rng, int32_t len, int32_t alphabet = 8) {
  std::uniform_int_distribution<int32_t> pick(0, alphabet - 1);
  Str s(static_cast<std::size_t>(len));
  for (CodePoint& c : s) c = kAlphabet[pick(*rng)];
  return s;
}

// s with `edits` random substitutions, insertions and deletions.
Str Mutate(std::mt19937* rng, Str s, int32_t edits) {
  std::uniform_int_distribution<int32_t> op(0, 2);
  std::uniform_int_distribution<int32_t> ch(0, 7);
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

// A length favouring the edge cases: 0, 1, n-ish, around 64, long.
int32_t RandomLength(std::mt19937* rng) {
  static const int32_t kLens[] = {0, 1, 2, 3, 5, 8, 13, 20, 40, 63, 64, 65, 100, 200};
  return kLens[std::uniform_int_distribution<int32_t>(0, 13)(*rng)];
}

using Gram = std::pair<Str, int32_t>;

std::set<Gram> GramSet(const Str& s, int32_t n) {
  std::vector<OrderedNgram> grams;
  EXPECT_TRUE(OrderedNgrams(s, n, &grams).ok());
  const Str padded = PadForNgrams(s, n);
  std::set<Gram> out;
  for (const OrderedNgram& g : grams) {
    out.insert({Str(padded.begin() + g.start, padded.begin() + g.start + n), g.occurrence});
  }
  EXPECT_EQ(out.size(), grams.size());  // pairs are distinct
  return out;
}

// sum over grams of min(occurrences): Lemma 5.1's right-hand side.
int32_t MinOccurrenceSum(const Str& a, const Str& b, int32_t n) {
  auto histogram = [n](const Str& s) {
    const Str p = PadForNgrams(s, n);
    std::map<Str, int32_t> h;
    for (std::size_t i = 0; i + static_cast<std::size_t>(n) <= p.size(); ++i) {
      ++h[Str(p.begin() + static_cast<std::ptrdiff_t>(i),
              p.begin() + static_cast<std::ptrdiff_t>(i) + n)];
    }
    return h;
  };
  const auto ha = histogram(a), hb = histogram(b);
  int32_t sum = 0;
  for (const auto& [g, c] : ha) {
    auto it = hb.find(g);
    if (it != hb.end()) sum += std::min(c, it->second);
  }
  return sum;
}

int32_t TrueCount(const Str& a, const Str& b, int32_t n) {
  const auto ga = GramSet(a, n), gb = GramSet(b, n);
  int32_t c = 0;
  for (const Gram& g : ga) c += gb.count(g) ? 1 : 0;
  return c;
}

NgramKeywords Keywords(const Str& s, int32_t n, int32_t bits = 32) {
  NgramKeywords k;
  NgramOptions o;
  o.n = n;
  o.keyword_bits = bits;
  Status st = ComputeNgramKeywords(s, o, &k);
  EXPECT_TRUE(st.ok()) << st.message();
  return k;
}

// ---- UTF-8 ----

TEST(SequenceUtf8, DecodesCharactersNotBytes) {
  EXPECT_EQ(Decode(""), Str{});
  EXPECT_EQ(Decode("abc"), (Str{'a', 'b', 'c'}));
  EXPECT_EQ(Decode("h\xC3\xA9llo"), (Str{'h', 0xE9, 'l', 'l', 'o'}));
  EXPECT_EQ(Decode("\xE6\x97\xA5\xE6\x9C\xAC"), (Str{0x65E5, 0x672C}));
  EXPECT_EQ(Decode("\xF0\x9F\x98\x80!"), (Str{0x1F600, '!'}));
  EXPECT_EQ(Decode("\xF4\x8F\xBF\xBF"), (Str{0x10FFFF}));
  EXPECT_EQ(Decode(std::string("a\0b", 3)), (Str{'a', 0, 'b'}));
}

TEST(SequenceUtf8, RejectsInvalid) {
  const char* bad[] = {"\xC3",         "\x80",         "a\xBF",       "\xC0\xAF",
                       "\xE0\x80\xAF", "\xED\xA0\x80", "\xF4\x90\x80\x80",
                       "\xFF",         "\xC3\x28",     "\xF0\x9F\x98"};
  for (const char* s : bad) {
    Str out;
    Status st = DecodeUtf8(s, std::char_traits<char>::length(s), &out);
    EXPECT_EQ(st.code(), GENIE_INVALID_ARGUMENT) << "input " << ::testing::PrintToString(s);
    NgramKeywords k;
    EXPECT_EQ(ComputeNgramKeywordsUtf8(s, std::char_traits<char>::length(s), NgramOptions{}, &k)
                  .code(),
              GENIE_INVALID_ARGUMENT);
  }
}

// ---- n-grams ----

TEST(SequenceNgrams, PaddingRuleAndExample51) {
  const CodePoint B = kGramPadBegin, E = kGramPadEnd;
  // The paper's Example 5.1, inside the padding.
  const auto g = GramSet(Decode("aabaab"), 3);
  const std::set<Gram> expected = {{{B, B, 'a'}, 0}, {{B, 'a', 'a'}, 0}, {{'a', 'a', 'b'}, 0},
                                   {{'a', 'b', 'a'}, 0}, {{'b', 'a', 'a'}, 0},
                                   {{'a', 'a', 'b'}, 1}, {{'a', 'b', E}, 0}, {{'b', E, E}, 0}};
  EXPECT_EQ(g, expected);
  // Short strings: every non-empty string has L + n - 1 windows.
  EXPECT_EQ(GramSet(Decode("ab"), 3),
            (std::set<Gram>{{{B, B, 'a'}, 0}, {{B, 'a', 'b'}, 0}, {{'a', 'b', E}, 0},
                            {{'b', E, E}, 0}}));
  EXPECT_EQ(GramSet(Decode("x"), 2), (std::set<Gram>{{{B, 'x'}, 0}, {{'x', E}, 0}}));
  // The empty string: the n - 1 grams B^(n-1-i) E^(i+1).
  EXPECT_EQ(GramSet(Str{}, 2), (std::set<Gram>{{{B, E}, 0}}));
  EXPECT_EQ(GramSet(Str{}, 3), (std::set<Gram>{{{B, B, E}, 0}, {{B, E, E}, 0}}));
  EXPECT_EQ(GramSet(Str{}, 8).size(), 7u);
  // n = 8 on a short multi-byte string.
  const Str s = Decode("\xE6\x97\xA5\xC3\xA9");
  const auto g8 = GramSet(s, 8);
  EXPECT_EQ(g8.size(), 9u);
  EXPECT_TRUE(g8.count({{B, B, B, B, B, B, 0x65E5, 0xE9}, 0}));
  EXPECT_TRUE(g8.count({{0x65E5, 0xE9, E, E, E, E, E, E}, 0}));
  // Repeats: "aaaa" with n = 2: (Ba,0) (aa,0) (aa,1) (aa,2) (aE,0).
  EXPECT_EQ(GramSet(Decode("aaaa"), 2),
            (std::set<Gram>{{{B, 'a'}, 0}, {{'a', 'a'}, 0}, {{'a', 'a'}, 1}, {{'a', 'a'}, 2},
                            {{'a', E}, 0}}));
}

TEST(SequenceNgrams, KeywordsCountAndValidation) {
  for (int32_t n = kMinGramLength; n <= kMaxGramLength; ++n) {
    for (const char* text : {"", "a", "ab", "h\xC3\xA9llo w\xC3\xB6rld", "aaaaaaaaaaaaaaaa"}) {
      NgramKeywords k;
      NgramOptions o;
      o.n = n;
      ASSERT_TRUE(ComputeNgramKeywordsUtf8(text, std::char_traits<char>::length(text), o, &k).ok());
      const Str s = Decode(text);
      EXPECT_EQ(k.length, static_cast<int32_t>(s.size()));
      EXPECT_EQ(k.grams, static_cast<int32_t>(s.size()) + n - 1);
      EXPECT_GE(k.keywords.size(), 1u);
      EXPECT_TRUE(std::is_sorted(k.keywords.begin(), k.keywords.end()));
      EXPECT_EQ(k.lost, k.grams - static_cast<int32_t>(k.keywords.size()));
      EXPECT_EQ(k.lost, 0);  // no 32-bit collision on these
    }
  }
  // Characters, not bytes: "é" (2 bytes) has 1 + n - 1 grams.
  EXPECT_EQ(Keywords(Decode("\xC3\xA9"), 3).grams, 3);
  // Keywords are a fixed function (stored in indexes): pin a few values.
  const Str abc = {'a', 'b', 'c'};
  EXPECT_EQ(NgramKeyword(abc.data(), 3, 0), NgramKeyword(abc.data(), 3, 0));
  EXPECT_NE(NgramKeyword(abc.data(), 3, 0), NgramKeyword(abc.data(), 3, 1));
  EXPECT_NE(NgramKeyword(abc.data(), 3, 0), NgramKeyword(abc.data(), 2, 0));
  std::vector<OrderedNgram> out;
  EXPECT_EQ(OrderedNgrams(abc, 1, &out).code(), GENIE_INVALID_ARGUMENT);
  EXPECT_EQ(OrderedNgrams(abc, 9, &out).code(), GENIE_INVALID_ARGUMENT);
  NgramKeywords k;
  NgramOptions o;
  o.keyword_bits = 0;
  EXPECT_EQ(ComputeNgramKeywords(abc, o, &k).code(), GENIE_INVALID_ARGUMENT);
}

// The keywords follow the rule: each window's gram numbered by the equal
// windows before it, hashed by NgramKeyword (the reference here counts them
// directly), for short strings (windows compared in place) and long ones
// (OrderedNgrams' sort), with grams that repeat, at every n and width.
TEST(SequenceNgrams, KeywordsFollowTheOccurrenceRule) {
  std::mt19937 rng(52);
  for (int32_t iter = 0; iter < 700; ++iter) {
    const int32_t n = kMinGramLength + iter % (kMaxGramLength - kMinGramLength + 1);
    const Str s = RandomString(&rng, iter % 3 == 0 ? 40 + iter % 120 : iter % 70, 1 + iter % 4);
    NgramOptions o;
    o.n = n;
    o.keyword_bits = iter % 5 == 0 ? 20 : 32;
    const Str p = PadForNgrams(s, n);
    std::vector<int32_t> want;
    for (std::size_t w = 0; w + static_cast<std::size_t>(n) <= p.size(); ++w) {
      int32_t occurrence = 0;
      for (std::size_t v = 0; v < w; ++v) occurrence += std::equal(p.begin() + v, p.begin() + v + n, p.begin() + w);
      const int32_t kw = NgramKeyword(p.data() + w, n, occurrence);
      want.push_back(o.keyword_bits < 32 ? static_cast<int32_t>(static_cast<uint32_t>(kw) >> (32 - o.keyword_bits)) : kw);
    }
    std::sort(want.begin(), want.end());
    want.erase(std::unique(want.begin(), want.end()), want.end());
    NgramKeywords k;
    ASSERT_TRUE(ComputeNgramKeywords(s, o, &k).ok());
    ASSERT_EQ(k.keywords, want) << "n " << n << " length " << s.size();
    EXPECT_EQ(k.grams, static_cast<int32_t>(s.size()) + n - 1);
  }
  // Keywords are stored in indexes: values pinned from genie 0.10.0's genie_ngrams()
  EXPECT_EQ(Keywords(Decode("abc"), 3).keywords,
            (std::vector<int32_t>{-2135123322, -638137043, 53731218, 804995333, 1078119090}));
  EXPECT_EQ(Keywords(Decode("h\xC3\xA9llo w\xC3\xB6rld"), 4).keywords,
            (std::vector<int32_t>{-1931059962, -890395726, -843014104, -634108781, -614999578, -475535866,
                                  -467725146, -421175307, -410806816, -205796651, 19121527, 309890868,
                                  563267543, 841059630}));
  std::string ab;
  for (int32_t i = 0; i < 40; ++i) ab += "ab";
  const std::vector<int32_t> long_keywords = Keywords(Decode(ab), 3).keywords;  // 82 windows: sorted
  ASSERT_EQ(long_keywords.size(), 82u);
  EXPECT_EQ(long_keywords.front(), -2066604448);
  EXPECT_EQ(long_keywords[40], 44026037);
  EXPECT_EQ(long_keywords.back(), 2087300781);
  const std::vector<int32_t> short_keywords = Keywords(Decode(ab.substr(0, 40)), 3).keywords;  // 42: compared
  ASSERT_EQ(short_keywords.size(), 42u);
  EXPECT_EQ(short_keywords.front(), -2066604448);
  EXPECT_EQ(short_keywords[17], 43770118);
  EXPECT_EQ(short_keywords.back(), 2015848327);
}

// A batch's keywords are each string's own, on one thread or several;
// empty strings, long ones and bad input included.
TEST(SequenceNgrams, BatchKeywordsAreEachStringsOwn) {
  std::mt19937 rng(53);
  std::string text;
  std::vector<int64_t> offsets{0};
  std::vector<std::string> strings;
  for (int32_t i = 0; i < 3000; ++i) {
    std::string u;
    for (CodePoint c : RandomString(&rng, i % 11 == 0 ? 0 : (i % 97 == 0 ? 300 : 1 + i % 30), 2 + i % 6)) {
      if (c < 0x80) {
        u += static_cast<char>(c);
      } else if (c < 0x800) {
        u += static_cast<char>(0xC0 | (c >> 6)), u += static_cast<char>(0x80 | (c & 0x3F));
      } else if (c < 0x10000) {
        u += static_cast<char>(0xE0 | (c >> 12)), u += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
        u += static_cast<char>(0x80 | (c & 0x3F));
      } else {
        u += static_cast<char>(0xF0 | (c >> 18)), u += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
        u += static_cast<char>(0x80 | ((c >> 6) & 0x3F)), u += static_cast<char>(0x80 | (c & 0x3F));
      }
    }
    strings.push_back(u);
    text += u;
    offsets.push_back(static_cast<int64_t>(text.size()));
  }
  const int32_t count = static_cast<int32_t>(strings.size());
  for (int32_t n : {2, 3, 5}) {
    for (int32_t threads : {1, 3}) {
      NgramOptions o;
      o.n = n;
      std::vector<int32_t> keywords(static_cast<std::size_t>(NgramKeywordsBound(offsets.data(), count, n)));
      std::vector<int64_t> starts(static_cast<std::size_t>(count) + 1);
      ASSERT_TRUE(ComputeNgramKeywordsBatch(text.data(), offsets.data(), count, o, threads, CancelCheck(),
                                            keywords.data(), starts.data()).ok());
      EXPECT_EQ(starts[0], 0);
      for (int32_t i = 0; i < count; ++i) {
        NgramKeywords one;
        ASSERT_TRUE(ComputeNgramKeywordsUtf8(strings[i].data(), strings[i].size(), o, &one).ok());
        ASSERT_EQ(std::vector<int32_t>(keywords.begin() + starts[i], keywords.begin() + starts[i + 1]), one.keywords)
            << "string " << i << " n " << n << " threads " << threads;
      }
    }
  }
  // offsets that do not start at 0 (a later batch of the same text)
  NgramOptions o;
  std::vector<int32_t> keywords(static_cast<std::size_t>(NgramKeywordsBound(offsets.data() + 100, 5, 3)));
  std::vector<int64_t> starts(6);
  ASSERT_TRUE(ComputeNgramKeywordsBatch(text.data(), offsets.data() + 100, 5, o, 2, CancelCheck(), keywords.data(),
                                        starts.data()).ok());
  NgramKeywords one;
  ASSERT_TRUE(ComputeNgramKeywordsUtf8(strings[104].data(), strings[104].size(), o, &one).ok());
  EXPECT_EQ(std::vector<int32_t>(keywords.begin() + starts[4], keywords.begin() + starts[5]), one.keywords);
  // none, bad input, cancel
  int64_t none_start = -1;
  EXPECT_TRUE(ComputeNgramKeywordsBatch(nullptr, offsets.data(), 0, o, 2, CancelCheck(), nullptr, &none_start).ok());
  EXPECT_EQ(none_start, 0);
  const int64_t down[] = {0, 5, 3};
  EXPECT_EQ(ComputeNgramKeywordsBatch(text.data(), down, 2, o, 1, CancelCheck(), keywords.data(), starts.data()).code(),
            GENIE_INVALID_ARGUMENT);
  const char bad[] = "ab\xC3";
  const int64_t bad_offsets[] = {0, 3};
  EXPECT_EQ(ComputeNgramKeywordsBatch(bad, bad_offsets, 1, o, 1, CancelCheck(), keywords.data(), starts.data()).code(),
            GENIE_INVALID_ARGUMENT);
  o.n = 9;
  EXPECT_EQ(ComputeNgramKeywordsBatch(text.data(), offsets.data(), 2, o, 1, CancelCheck(), keywords.data(),
                                      starts.data()).code(),
            GENIE_INVALID_ARGUMENT);
  o.n = 3;
  CancelCheck cancelled;
  cancelled.fn = [](void*) { return 1; };
  EXPECT_EQ(ComputeNgramKeywordsBatch(text.data(), offsets.data(), count, o, 2, cancelled, keywords.data(),
                                      starts.data()).code(),
            GENIE_CANCELLED);
}

TEST(SequenceNgrams, Lemma51OnRandomStrings) {
  std::mt19937 rng(51);
  int32_t mismatches = 0;
  for (int32_t iter = 0; iter < 400; ++iter) {
    const int32_t n = kMinGramLength + iter % (kMaxGramLength - kMinGramLength + 1);
    const int32_t alphabet = 2 + iter % 7;
    const Str a = RandomString(&rng, RandomLength(&rng) % 70, alphabet);
    const Str b = iter % 2 ? Mutate(&rng, a, iter % 5) : RandomString(&rng, RandomLength(&rng) % 70, alphabet);
    const int32_t c = TrueCount(a, b, n);
    ASSERT_EQ(c, MinOccurrenceSum(a, b, n)) << "n=" << n;
    // The set count of the keywords: never below C - lost(q), and equal to C
    // unless a 32-bit collision happened.
    const NgramKeywords ka = Keywords(a, n), kb = Keywords(b, n);
    const int32_t set_count = KeywordSetCount(ka.keywords, kb.keywords);
    EXPECT_LE(c, set_count + ka.lost);
    EXPECT_LE(c, set_count + kb.lost);
    mismatches += set_count != c ? 1 : 0;
  }
  EXPECT_LE(mismatches, 1);
}

// ---- bounds ----

TEST(SequenceBounds, Formula) {
  // Identical strings: count = L + n - 1 gives 0.
  EXPECT_EQ(EditDistanceLowerBound(5, 5, 5 + 3 - 1, 3), 0);
  EXPECT_EQ(EditDistanceLowerBound(0, 0, 2, 3), 0);
  // No shared gram: ceil((max + n - 1) / n).
  EXPECT_EQ(CountLowerBound(10, 4, 0, 3), 4);  // (10 + 2) / 3
  EXPECT_EQ(CountLowerBound(10, 4, 1, 3), 4);  // ceil(11 / 3)
  EXPECT_EQ(CountLowerBound(10, 4, 2, 3), 4);
  EXPECT_EQ(CountLowerBound(10, 4, 3, 3), 3);
  EXPECT_EQ(EditDistanceLowerBound(10, 4, 12, 3), 6);  // the length difference wins
  EXPECT_EQ(EditDistanceLowerBound(0, 3, 0, 8), 3);
  EXPECT_EQ(CountLowerBound(2, 2, 100, 2), 0);  // counts above the maximum clamp to 0
  EXPECT_EQ(UnseenLowerBound(10, 3, 3), CountLowerBound(10, 10, 3, 3));
}

TEST(SequenceBounds, NeverExceedsTrueDistance) {
  std::mt19937 rng(5);
  int32_t positive = 0, pairs = 0;
  for (int32_t iter = 0; iter < 3000; ++iter) {
    const int32_t n = kMinGramLength + iter % (kMaxGramLength - kMinGramLength + 1);
    const int32_t alphabet = 2 + iter % 7;
    Str a = RandomString(&rng, RandomLength(&rng) % 66, alphabet);
    Str b;
    switch (iter % 4) {
      case 0: b = RandomString(&rng, RandomLength(&rng) % 66, alphabet); break;
      case 1: b = Mutate(&rng, a, 1); break;
      case 2: b = Mutate(&rng, a, 1 + iter % 6); break;
      default: b = Mutate(&rng, a, iter % 3); a.resize(a.size() / 2); break;
    }
    const int32_t ed = LevenshteinReference(a, b);
    const int32_t c = TrueCount(a, b, n);
    ASSERT_LE(EditDistanceLowerBound(static_cast<int64_t>(a.size()), static_cast<int64_t>(b.size()), c, n), ed)
        << "n=" << n << " |a|=" << a.size() << " |b|=" << b.size() << " C=" << c;
    // Hashed keywords, with forced collisions at few bits: the count an
    // engine sees plus the query's lost keywords is still a valid count.
    for (int32_t bits : {32, 8, 3}) {
      const NgramKeywords ka = Keywords(a, n, bits), kb = Keywords(b, n, bits);
      const int32_t set_count = KeywordSetCount(ka.keywords, kb.keywords);
      ASSERT_GE(set_count + ka.lost, c) << "bits=" << bits;
      const int32_t lb = EditDistanceLowerBound(ka.length, kb.length, set_count + ka.lost, n);
      ASSERT_LE(lb, ed) << "bits=" << bits << " n=" << n;
      ASSERT_LE(EditDistanceLowerBound(kb.length, ka.length, set_count + kb.lost, n), ed);
      if (bits == 32) {
        positive += CountLowerBound(ka.length, kb.length, set_count + ka.lost, n) > 0 ? 1 : 0;
        ++pairs;
      }
    }
  }
  // The bound is not vacuous.
  EXPECT_GT(positive, pairs / 4);
}

// ---- Levenshtein ----

TEST(SequenceLevenshtein, KnownValues) {
  EXPECT_EQ(LevenshteinReference(Decode("kitten"), Decode("sitting")), 3);
  EXPECT_EQ(LevenshteinMyers(Decode("kitten"), Decode("sitting")), 3);
  EXPECT_EQ(Levenshtein(Decode(""), Decode("abc")), 3);
  EXPECT_EQ(Levenshtein(Decode("abc"), Decode("")), 3);
  EXPECT_EQ(Levenshtein(Decode(""), Decode("")), 0);
  // One character, not two bytes.
  EXPECT_EQ(Levenshtein(Decode("caf\xC3\xA9"), Decode("cafe")), 1);
  EXPECT_EQ(Levenshtein(Decode("\xF0\x9F\x98\x80"), Decode("")), 1);
  EXPECT_EQ(LevenshteinBanded(Decode("kitten"), Decode("sitting"), 2), 3);
  EXPECT_EQ(LevenshteinBanded(Decode("kitten"), Decode("sitting"), 3), 3);
  EXPECT_EQ(LevenshteinBanded(Decode("kitten"), Decode("sitting"), 0), 1);
  EXPECT_EQ(Levenshtein(Decode("kitten"), Decode("sitting"), 1), 2);
  const Str long_a(65, 'a');
  EXPECT_EQ(LevenshteinMyers(long_a, long_a), -1);
}

TEST(SequenceLevenshtein, AllImplementationsAgree) {
  std::mt19937 rng(64);
  const int32_t lens[] = {0, 1, 2, 7, 63, 64, 65, 130, 200};
  for (int32_t iter = 0; iter < 1500; ++iter) {
    const int32_t alphabet = 2 + iter % 7;
    const int32_t la = lens[iter % 9];
    const int32_t lb = lens[(iter / 9) % 9];
    const Str a = RandomString(&rng, la, alphabet);
    Str b;
    if (iter % 3 == 0) {
      b = RandomString(&rng, lb, alphabet);
    } else {
      b = Mutate(&rng, a, iter % 3 == 1 ? iter % 7 : iter % 40);
    }
    const int32_t ref = LevenshteinReference(a, b);
    ASSERT_EQ(ref, LevenshteinReference(b, a));
    if (std::min(a.size(), b.size()) <= static_cast<std::size_t>(kMyersMaxLength)) {
      ASSERT_EQ(LevenshteinMyers(a, b), ref) << "|a|=" << a.size() << " |b|=" << b.size();
      ASSERT_EQ(LevenshteinMyers(b, a), ref);
    }
    ASSERT_EQ(Levenshtein(a, b), ref) << "|a|=" << a.size() << " |b|=" << b.size();
    for (int32_t t : {0, 1, ref - 1, ref, ref + 1, ref + 17, 1000}) {
      if (t < 0) continue;
      const int32_t expect = ref <= t ? ref : t + 1;
      ASSERT_EQ(LevenshteinBanded(a, b, t), expect) << "t=" << t << " |a|=" << a.size() << " |b|=" << b.size();
      ASSERT_EQ(LevenshteinBanded(b, a, t), expect);
      ASSERT_EQ(Levenshtein(a, b, t), expect);
    }
  }
}

// ---- batch ----

EditDistanceBatch RandomBatch(uint32_t seed, int32_t queries, int32_t max_candidates,
                              bool caps) {
  std::mt19937 rng(seed);
  EditDistanceBatch batch;
  for (int32_t q = 0; q < queries; ++q) {
    const Str query = RandomString(&rng, RandomLength(&rng), 2 + q % 7);
    batch.queries.Add(query);
    const int32_t nc = std::uniform_int_distribution<int32_t>(0, max_candidates)(rng);
    for (int32_t c = 0; c < nc; ++c) {
      batch.candidates.Add(c % 2 ? Mutate(&rng, query, c % 9)
                                 : RandomString(&rng, RandomLength(&rng), 2 + q % 7));
    }
    batch.candidate_offsets.push_back(batch.candidates.size());
    if (caps) batch.max_distance.push_back(q % 3 == 0 ? -1 : q % 11);
  }
  return batch;
}

TEST(SequenceBatch, CpuMatchesReference) {
  for (bool caps : {false, true}) {
    const EditDistanceBatch batch = RandomBatch(caps ? 7 : 8, 40, 30, caps);
    for (int32_t threads : {1, 2, 0}) {
      std::vector<int32_t> d;
      Status st = CpuEditDistances(batch, threads, &d);
      ASSERT_TRUE(st.ok()) << st.message();
      ASSERT_EQ(d.size(), static_cast<std::size_t>(batch.candidates.size()));
      for (int32_t q = 0; q < batch.queries.size(); ++q) {
        for (int64_t j = batch.candidate_offsets[q]; j < batch.candidate_offsets[q + 1]; ++j) {
          int32_t ref = LevenshteinReference(batch.queries.Get(q),
                                             batch.candidates.Get(static_cast<int32_t>(j)));
          const int32_t cap = caps ? batch.max_distance[q] : -1;
          if (cap >= 0 && ref > cap) ref = cap + 1;
          ASSERT_EQ(d[static_cast<std::size_t>(j)], ref) << "q=" << q << " j=" << j;
        }
      }
    }
  }
}

TEST(SequenceBatch, RejectsMalformedBatches) {
  EditDistanceBatch batch = RandomBatch(9, 3, 4, false);
  std::vector<int32_t> d;
  EXPECT_TRUE(CpuEditDistances(EditDistanceBatch{}, 2, &d).ok());
  EXPECT_TRUE(d.empty());
  EditDistanceBatch bad = batch;
  bad.candidate_offsets.pop_back();
  EXPECT_EQ(CpuEditDistances(bad, 1, &d).code(), GENIE_INVALID_ARGUMENT);
  bad = batch;
  bad.max_distance = {1};
  EXPECT_EQ(CpuEditDistances(bad, 1, &d).code(), GENIE_INVALID_ARGUMENT);
  bad = batch;
  bad.candidates.offsets.back() += 1;
  EXPECT_EQ(CpuEditDistances(bad, 1, &d).code(), GENIE_INVALID_ARGUMENT);
  EXPECT_EQ(CpuEditDistances(batch, 1, nullptr).code(), GENIE_INVALID_ARGUMENT);
}

// ---- certificate ----

TEST(SequenceCertificate, HandMadeCases) {
  TopKCertificate cert;
  std::vector<CandidateBound> c = {{10, 5, 0, true}, {8, 5, 1, true}, {2, 5, 0, false}};
  TopKCertificateInput in;
  in.k = 2;
  in.n = 3;
  in.query_length = 5;
  in.candidates = c;
  in.unseen_count_bound = 2;
  ASSERT_TRUE(CertifyTopK(in, &cert).ok());
  // The open candidate: ceil((5 + 2 - 2) / 3) = 2 >= d_2 = 1; unseen likewise.
  EXPECT_TRUE(cert.exact);
  EXPECT_EQ(cert.kth_distance, 1);
  EXPECT_EQ(cert.open_lower_bound, 2);
  EXPECT_EQ(cert.unseen_lower_bound, 2);
  in.query_lost = 3;  // the unseen bound drops to ceil(2/3) = 1: still >= 1
  ASSERT_TRUE(CertifyTopK(in, &cert).ok());
  EXPECT_TRUE(cert.exact);
  in.query_lost = 5;  // count 7: the bound drops to 0 < 1
  ASSERT_TRUE(CertifyTopK(in, &cert).ok());
  EXPECT_FALSE(cert.exact);
  // Fewer than k verified: exact only when nothing else exists.
  in.query_lost = 0;
  in.k = 3;
  ASSERT_TRUE(CertifyTopK(in, &cert).ok());
  EXPECT_FALSE(cert.exact);
  c[2].exact = true;
  in.k = 5;
  in.unseen_count_bound = -1;
  ASSERT_TRUE(CertifyTopK(in, &cert).ok());
  EXPECT_TRUE(cert.exact);
  EXPECT_EQ(cert.kth_distance, -1);
  in.k = 0;
  EXPECT_EQ(CertifyTopK(in, &cert).code(), GENIE_INVALID_ARGUMENT);
}

TEST(SequenceCertificate, CertifiedMeansBruteForceTopK) {
  std::mt19937 rng(52);
  int32_t certified = 0, runs = 0;
  for (int32_t round = 0; round < 12; ++round) {
    const int32_t n = kMinGramLength + round % (kMaxGramLength - kMinGramLength + 1);
    const int32_t bits = round % 3 == 2 ? 6 : 32;  // forced collisions
    // Clusters of similar strings plus random ones, short and empty ones too.
    std::vector<Str> db;
    for (int32_t c = 0; c < 15; ++c) {
      const Str base = RandomString(&rng, 3 + c % 12 * 2, 4 + c % 5);
      for (int32_t v = 0; v < 8; ++v) db.push_back(Mutate(&rng, base, v % 4));
    }
    for (int32_t r = 0; r < 40; ++r) db.push_back(RandomString(&rng, r % 9, 8));
    std::vector<NgramKeywords> kws;
    for (const Str& s : db) kws.push_back(Keywords(s, n, bits));
    const int32_t total = static_cast<int32_t>(db.size());

    for (int32_t qi = 0; qi < 12; ++qi) {
      const Str q = qi % 4 == 3 ? RandomString(&rng, qi % 3, 8)
                                : Mutate(&rng, db[static_cast<std::size_t>(rng() % db.size())], qi % 4);
      const NgramKeywords kq = Keywords(q, n, bits);
      std::vector<int32_t> truth;
      for (const Str& s : db) truth.push_back(LevenshteinReference(q, s));
      std::sort(truth.begin(), truth.end());
      // The engine's view: objects with count >= 1, count desc, id asc.
      std::vector<std::pair<int32_t, int32_t>> hits;  // (count, id)
      for (int32_t o = 0; o < total; ++o) {
        const int32_t c = KeywordSetCount(kq.keywords, kws[static_cast<std::size_t>(o)].keywords);
        if (c >= 1) hits.push_back({c, o});
      }
      std::sort(hits.begin(), hits.end(), [](const auto& x, const auto& y) {
        return x.first != y.first ? x.first > y.first : x.second < y.second;
      });
      for (int32_t k : {1, 3, 10}) {
        for (int32_t K : {k, 2 * k, 32, total}) {
          const int32_t got = std::min<int32_t>(K, static_cast<int32_t>(hits.size()));
          CodePointStrings cands;
          std::vector<int32_t> counts;
          for (int32_t j = 0; j < got; ++j) {
            cands.Add(db[static_cast<std::size_t>(hits[static_cast<std::size_t>(j)].second)]);
            counts.push_back(hits[static_cast<std::size_t>(j)].first);
          }
          std::vector<CandidateBound> bounds;
          ASSERT_TRUE(VerifyTopKCandidates(q, cands, counts, k, n, kq.lost, &bounds).ok());
          TopKCertificateInput in;
          in.k = k;
          in.n = n;
          in.query_length = kq.length;
          in.query_lost = kq.lost;
          in.candidates = bounds;
          if (got == total) {
            in.unseen_count_bound = -1;
          } else if (got == K) {
            in.unseen_count_bound = hits[static_cast<std::size_t>(K) - 1].first;
          } else {
            in.unseen_count_bound = 0;  // every string with count >= 1 was returned
          }
          TopKCertificate cert;
          ASSERT_TRUE(CertifyTopK(in, &cert).ok());
          ++runs;
          if (got == total) {
            EXPECT_TRUE(cert.exact) << "every string verified";
          }
          if (!cert.exact) continue;
          ++certified;
          std::vector<int32_t> mine;
          for (const CandidateBound& b : bounds) {
            if (b.exact) mine.push_back(b.distance);
          }
          std::sort(mine.begin(), mine.end());
          const std::size_t kk = std::min<std::size_t>(static_cast<std::size_t>(k), truth.size());
          ASSERT_GE(mine.size(), kk);
          mine.resize(kk);
          ASSERT_EQ(mine, std::vector<int32_t>(truth.begin(), truth.begin() + static_cast<std::ptrdiff_t>(kk)))
              << "n=" << n << " k=" << k << " K=" << K << " bits=" << bits;
          // The exact distances really are distances.
          for (int32_t j = 0; j < got; ++j) {
            if (bounds[static_cast<std::size_t>(j)].exact) {
              ASSERT_EQ(bounds[static_cast<std::size_t>(j)].distance,
                        LevenshteinReference(q, cands.Get(j)));
            } else {
              ASSERT_LE(bounds[static_cast<std::size_t>(j)].distance,
                        LevenshteinReference(q, cands.Get(j)));
            }
          }
        }
      }
    }
  }
  // Not vacuous, and not trivial either.
  EXPECT_GT(certified, runs / 3);
  EXPECT_LT(certified, runs);
}

}  // namespace
// The batched round of genie_similar: every query of a batch at once, with
// the distance function counting how many pairs it was given.
TEST(SequenceSimilarBatch, CertifiedQueriesEqualBruteForce) {
  std::mt19937 rng(77);
  std::vector<Str> db;
  for (int32_t c = 0; c < 20; ++c) {
    const Str base = RandomString(&rng, 2 + c % 10 * 3, 4 + c % 5);
    for (int32_t v = 0; v < 6; ++v) db.push_back(Mutate(&rng, base, v % 4));
  }
  for (int32_t r = 0; r < 30; ++r) db.push_back(RandomString(&rng, r % 7, 8));
  const int32_t total = static_cast<int32_t>(db.size());
  int32_t certified = 0, uncertified = 0, pairs_saved = 0;
  for (int32_t n : {2, 3, 5, 8}) {
    std::vector<NgramKeywords> kws;
    for (const Str& s : db) kws.push_back(Keywords(s, n));
    for (int32_t k : {1, 4, 12}) {
      for (int32_t K : {k / 2 + 1, k, 3 * k, total}) {
        SimilarBatch batch;
        batch.n = n;
        batch.k = k;
        std::vector<Str> queries;
        std::vector<std::vector<int32_t>> candidate_ids;
        for (int32_t qi = 0; qi < 10; ++qi) {
          const Str q = qi == 9 ? Str{}
                                : Mutate(&rng, db[static_cast<std::size_t>(rng() % db.size())], qi % 5);
          queries.push_back(q);
          batch.queries.Add(q);
          const NgramKeywords kq = Keywords(q, n);
          std::vector<std::pair<int32_t, int32_t>> hits;
          for (int32_t o = 0; o < total; ++o) {
            const int32_t c = KeywordSetCount(kq.keywords, kws[static_cast<std::size_t>(o)].keywords);
            if (c >= 1) hits.push_back({c, o});
          }
          std::sort(hits.begin(), hits.end(), [](const auto& x, const auto& y) {
            return x.first != y.first ? x.first > y.first : x.second < y.second;
          });
          const int32_t got = std::min<int32_t>(K, static_cast<int32_t>(hits.size()));
          candidate_ids.emplace_back();
          for (int32_t j = 0; j < got; ++j) {
            batch.candidates.Add(db[static_cast<std::size_t>(hits[static_cast<std::size_t>(j)].second)]);
            batch.candidate_counts.push_back(hits[static_cast<std::size_t>(j)].first);
            candidate_ids.back().push_back(hits[static_cast<std::size_t>(j)].second);
          }
          batch.candidate_offsets.push_back(batch.candidates.size());
          batch.unseen_count_bound.push_back(
              got == total ? -1 : got == K ? hits[static_cast<std::size_t>(K) - 1].first : 0);
        }
        int64_t pairs = 0;
        auto cpu = [&pairs](const EditDistanceBatch& b, std::vector<int32_t>* out) {
          pairs += b.candidates.size();
          return CpuEditDistances(b, 2, out);
        };
        SimilarVerdict verdict;
        Status st = VerifySimilarBatch(batch, cpu, &verdict);
        ASSERT_TRUE(st.ok()) << st.message();
        ASSERT_EQ(verdict.distances_computed, pairs);
        pairs_saved += batch.candidates.size() - static_cast<int32_t>(pairs);
        for (std::size_t q = 0; q < queries.size(); ++q) {
          std::vector<int32_t> truth;
          for (const Str& s : db) truth.push_back(LevenshteinReference(queries[q], s));
          std::sort(truth.begin(), truth.end());
          std::vector<int32_t> mine;
          for (int64_t j = batch.candidate_offsets[q]; j < batch.candidate_offsets[q + 1]; ++j) {
            const CandidateBound& b = verdict.candidates[static_cast<std::size_t>(j)];
            const int32_t real = LevenshteinReference(queries[q], batch.candidates.Get(static_cast<int32_t>(j)));
            if (b.exact) {
              ASSERT_EQ(b.distance, real);
              mine.push_back(b.distance);
            } else {
              ASSERT_LE(b.distance, real);
            }
          }
          std::sort(mine.begin(), mine.end());
          const TopKCertificate& cert = verdict.certificates[q];
          const std::size_t kk = std::min<std::size_t>(static_cast<std::size_t>(k), truth.size());
          const int32_t open = std::min(cert.open_lower_bound, cert.unseen_lower_bound);
          if (cert.exact) {
            ++certified;
            ASSERT_GE(mine.size(), kk);
            ASSERT_EQ(std::vector<int32_t>(mine.begin(), mine.begin() + static_cast<std::ptrdiff_t>(kk)),
                      std::vector<int32_t>(truth.begin(), truth.begin() + static_cast<std::ptrdiff_t>(kk)))
                << "n=" << n << " k=" << k << " K=" << K << " q=" << q;
          } else {
            ++uncertified;
            // The rows genie_similar flags exact without a certificate.
            for (std::size_t i = 0; i < std::min(mine.size(), kk); ++i) {
              if (mine[i] <= open) {
                ASSERT_LE(mine[i], truth[kk - 1]);
              }
            }
          }
          if (candidate_ids[q].size() == static_cast<std::size_t>(total)) {
            EXPECT_TRUE(cert.exact);
          }
        }
      }
    }
  }
  EXPECT_GT(certified, 0);
  EXPECT_GT(uncertified, 0);
  EXPECT_GT(pairs_saved, 0) << "the filters never skipped a pair";
}

TEST(SequenceSimilarBatch, RejectsMalformedInput) {
  SimilarBatch batch;
  batch.queries.Add(Str{'a'});
  batch.candidate_offsets = {0, 1};
  batch.unseen_count_bound = {0};
  auto cpu = [](const EditDistanceBatch& b, std::vector<int32_t>* out) {
    return CpuEditDistances(b, 1, out);
  };
  SimilarVerdict verdict;
  EXPECT_FALSE(VerifySimilarBatch(batch, cpu, &verdict).ok());  // no candidate for offset 1
  batch.candidates.Add(Str{'b'});
  batch.candidate_counts = {1};
  EXPECT_TRUE(VerifySimilarBatch(batch, cpu, &verdict).ok());
  batch.k = 0;
  EXPECT_FALSE(VerifySimilarBatch(batch, cpu, &verdict).ok());
  batch.k = 1;
  batch.n = 9;
  EXPECT_FALSE(VerifySimilarBatch(batch, cpu, &verdict).ok());
  batch.n = 3;
  auto broken = [](const EditDistanceBatch&, std::vector<int32_t>* out) {
    out->clear();
    return Status::Ok();
  };
  EXPECT_EQ(VerifySimilarBatch(batch, broken, &verdict).code(), Status::Internal("").code());
}

}  // namespace genie
