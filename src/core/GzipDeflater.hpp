#pragma once
#include <zlib.h>

#include <string>
#include <string_view>

namespace airlock {

// A gzip stream made as its bytes come: each call returns what is ready.
class GzipDeflater {
  public:
    GzipDeflater();
    ~GzipDeflater();
    GzipDeflater(const GzipDeflater&) = delete;
    GzipDeflater& operator=(const GzipDeflater&) = delete;

    // Compressed bytes for `data`, flushed so a reader gets them now (a
    // slow file is not held back until more comes).
    std::string add(std::string_view data);
    // The rest and gzip's trailer; nothing may be added after.
    std::string finish();

  private:
    std::string run(std::string_view data, int flush);
    z_stream z_{};
    bool finished_ = false;
};

}  // namespace airlock
