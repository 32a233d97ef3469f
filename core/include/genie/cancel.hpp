// Cancellation: a callback the engines poll while they work (the C API's
// genie_engine_options::cancel).  When it returns nonzero the call stops and
// returns Status::Cancelled(), releasing everything as on any error path.
// It may be called from any thread, so it must only read flags.
#pragma once

namespace genie {

struct CancelCheck {
  int (*fn)(void* arg) = nullptr;  // nullptr: never cancelled
  void* arg = nullptr;

  bool requested() const { return fn != nullptr && fn(arg) != 0; }
};

}  // namespace genie
