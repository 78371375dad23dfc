#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace airlock::egress {

// An intercepted host's answer on its way to the guest, with every injected
// value in it (a host that echoes the header it got) replaced by as many
// '*': lengths, and so the answer's framing, stay as they were. A value may
// arrive split across reads, so the last (longest value - 1) bytes are held
// back whatever they are, until more bytes come or flush() (the caller's
// when the host has nothing more for now): a hold-back that depended on the
// bytes would tell the guest which prefix of a value the host had sent. A
// value whose start was flushed has its rest masked when it comes.
class AnswerMasker {
  public:
    explicit AnswerMasker(std::vector<std::string> values);
    // What may go to the guest now of what came so far.
    std::string feed(std::string_view bytes);
    // The bytes held back (the answer paused or ended), masked as far as
    // they go.
    std::string flush();
    bool holding() const { return window_.size() > sent_; }

  private:
    void mask();
    // window_[sent_, upTo) goes out.
    std::string release(std::size_t upTo);
    std::vector<std::string> values_;
    std::size_t keep_ = 0;
    // The last bytes sent (at most keep_), then those held back.
    std::string window_;
    std::size_t sent_ = 0;
};

}  // namespace airlock::egress
