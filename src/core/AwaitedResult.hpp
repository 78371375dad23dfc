#pragma once
#include <chrono>
#include <condition_variable>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>

namespace airlock {

// The blocking face of an asynchronous call that completes with a value or
// an error from another thread: hand callback() to the call, then wait().
template <typename T>
class AwaitedResult {
public:
    // The completion callback; it may run on any thread, once.
    std::function<void(std::optional<T>, std::exception_ptr)> callback() {
        return [state = state_](std::optional<T> value, std::exception_ptr error) {
            std::lock_guard lock(state->mutex);
            state->value = std::move(value);
            state->error = error;
            state->done = true;
            state->cv.notify_all();
        };
    }
    // False when `wait` passed first (the result may still come).
    bool waitFor(std::chrono::milliseconds wait) {
        std::unique_lock lock(state_->mutex);
        return state_->cv.wait_for(lock, wait, [&] { return state_->done; });
    }
    // Waits for the completion, then returns the value or rethrows the error.
    T get() {
        std::unique_lock lock(state_->mutex);
        state_->cv.wait(lock, [&] { return state_->done; });
        if (state_->error) std::rethrow_exception(state_->error);
        return std::move(*state_->value);
    }

private:
    struct State {
        std::mutex mutex;
        std::condition_variable cv;
        bool done = false;
        std::optional<T> value;
        std::exception_ptr error;
    };
    std::shared_ptr<State> state_ = std::make_shared<State>();
};

}  // namespace airlock
