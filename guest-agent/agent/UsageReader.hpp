#pragma once
#include <string>

#include "protocol/GuestResults.hpp"

namespace airlock::guest {

// The guest's figures for op usage: /proc/stat's cpu line, /proc/meminfo
// and statvfs of "/". The files are read from `procRoot` (tests point it at
// a fake tree). Returns "" or what could not be read.
class UsageReader {
  public:
    explicit UsageReader(std::string procRoot = "/proc", std::string diskRoot = "/")
        : procRoot_(std::move(procRoot)), diskRoot_(std::move(diskRoot)) {}
    std::string read(protocol::GuestUsage& out) const;

  private:
    std::string procRoot_, diskRoot_;
};

}  // namespace airlock::guest
