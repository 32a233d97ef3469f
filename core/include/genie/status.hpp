// Status values travel through every layer; no exception crosses a layer boundary.
#pragma once
#include <string>
#include <utility>
#include "genie/types.h"

namespace genie {

class Status {
 public:
  Status() = default;
  Status(genie_status code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return {}; }
  static Status InvalidArgument(std::string m) { return {GENIE_INVALID_ARGUMENT, std::move(m)}; }
  static Status OutOfMemory(std::string m) { return {GENIE_OUT_OF_MEMORY, std::move(m)}; }
  static Status DeviceOutOfMemory(std::string m) { return {GENIE_DEVICE_OUT_OF_MEMORY, std::move(m)}; }
  static Status DeviceUnavailable(std::string m) { return {GENIE_DEVICE_UNAVAILABLE, std::move(m)}; }
  static Status DeviceError(std::string m) { return {GENIE_DEVICE_ERROR, std::move(m)}; }
  static Status Internal(std::string m) { return {GENIE_INTERNAL_ERROR, std::move(m)}; }
  static Status Cancelled(std::string m = "cancelled by the caller") {
    return {GENIE_CANCELLED, std::move(m)};
  }

  bool ok() const { return code_ == GENIE_OK; }
  genie_status code() const { return code_; }
  const std::string& message() const { return message_; }

 private:
  genie_status code_ = GENIE_OK;
  std::string message_;
};

#define GENIE_RETURN_IF_ERROR(expr)          \
  do {                                       \
    ::genie::Status genie_status_ = (expr);  \
    if (!genie_status_.ok()) return genie_status_; \
  } while (0)

}  // namespace genie
