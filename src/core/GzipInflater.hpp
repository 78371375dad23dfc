#pragma once
#include <zlib.h>

#include <cstddef>
#include <string>
#include <string_view>

namespace airlock {

// A gzip body undone piece by piece, never more than `max` bytes of output
// at a time: a small body that inflates to gigabytes (a gzip bomb) is held
// to the pace its reader takes it at. Concatenated members are read as one
// stream (as gzip(1) and Go's reader do). Errors are Error(bad_request).
class GzipInflater {
  public:
    GzipInflater();
    ~GzipInflater();
    GzipInflater(const GzipInflater&) = delete;
    GzipInflater& operator=(const GzipInflater&) = delete;

    // More compressed bytes; only once the last ones are taken (!pending()).
    void feed(std::string_view compressed);
    // Compressed bytes are left to undo.
    bool pending() const { return offset_ < input_.size(); }
    // Up to `max` bytes of output ("" once the fed bytes are all undone).
    std::string next(std::size_t max);
    // The body ended: Error(bad_request) unless it ended with a whole member.
    void finish() const;

  private:
    z_stream z_{};
    std::string input_;
    std::size_t offset_ = 0;
    bool inMember_ = false;  // a member was started and has not ended
};

}  // namespace airlock
