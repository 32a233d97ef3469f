// The C API's host threads lent to the caller (genie.h): work of the
// extension's own, spread over the engines' thread pool.
#include <cstdint>

#include "genie/genie.h"
#include "genie/parallel.hpp"
#include "capi_util.hpp"

using genie::capi::Guarded;

genie_status genie_parallel_for(int64_t n, int32_t threads, void (*body)(int64_t i, void* arg), void* arg,
                                int (*cancel)(void* arg), void* cancel_arg, genie_error* err) {
  return Guarded(err, [&]() -> genie::Status {
    if (n < 0 || (n > 0 && body == nullptr))
      return genie::Status::InvalidArgument("genie_parallel_for: bad arguments");
    return genie::ParallelFor(
        n, threads,
        [&](int64_t i) {
          body(i, arg);
          return genie::Status::Ok();
        },
        genie::CancelCheck{cancel, cancel_arg});
  });
}

genie_status genie_parallel_zero(void* data, size_t bytes, int32_t threads, int (*cancel)(void* arg),
                                 void* cancel_arg, genie_error* err) {
  return Guarded(err, [&]() -> genie::Status {
    if (bytes > 0 && data == nullptr) return genie::Status::InvalidArgument("genie_parallel_zero: NULL data");
    return genie::ZeroOnThreads(data, bytes, threads, genie::CancelCheck{cancel, cancel_arg});
  });
}
