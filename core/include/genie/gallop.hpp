// Galloping search: the first position of a sorted range at which
// before(value, v) stops holding, found by doubling steps from the range's
// start and a binary search of the last step.  For searches that start near
// the answer (a query's ascending keywords, a run's next list): O(log d) in
// the distance d from the start instead of O(log n).
#pragma once
#include <algorithm>
#include <cstddef>

namespace genie {

template <typename It, typename T, typename Before>
It Gallop(It from, It last, const T& v, Before before) {
  It lo = from, hi = from;
  std::ptrdiff_t step = 1;
  while (hi != last && before(*hi, v)) {  // every value before hi is before v
    lo = hi + 1;
    hi = last - hi > step ? hi + step : last;
    step *= 2;
  }
  return std::partition_point(lo, hi, [&](const auto& x) { return before(x, v); });
}

}  // namespace genie
