#pragma once
#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <string_view>
#include <thread>

#include "core/UniqueFd.hpp"
#include "protocol/Frame.hpp"
#include "protocol/FrameDecoder.hpp"

namespace airlock::test {

// A scripted guest: answers the hello, then runs `script` with helpers to
// read the host's frames and write any bytes.
class FakeGuest {
  public:
    using Script = std::function<void(FakeGuest&)>;
    explicit FakeGuest(Script script);
    ~FakeGuest();
    UniqueFd takeHostEnd() { return std::move(host_); }

    bool read(protocol::Frame& out, std::chrono::milliseconds wait);
    // The next frame of a type (others, like window grants, are skipped).
    bool readType(protocol::FrameType type, protocol::Frame& out,
                  std::chrono::milliseconds wait = std::chrono::seconds(5));
    void send(protocol::FrameType type, std::uint32_t stream, std::string_view payload,
              std::uint8_t flags = 0);
    void writeRaw(const std::string& bytes);
    std::atomic<bool> stop_{false};
    std::atomic<bool> done_{false};

  private:
    UniqueFd host_, guest_;
    protocol::FrameDecoder decoder_;
    std::thread thread_;
};

}  // namespace airlock::test
