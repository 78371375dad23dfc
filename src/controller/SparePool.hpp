#pragma once
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace airlock {

// Spare VMs: for each clone shape in use, QEMU started ahead of time and
// paused waiting for a migration stream (libvirt's start-up is about a
// second here under TCG, more than loading the state). A snapshot just taken
// or cloned also has its memory state loaded into a spare ahead of time: the
// next clone of it only resumes the VM. The pool keeps the bookkeeping and
// its worker thread; what a spare is comes from its Vms.
class SparePool {
  public:
    // What the pool asks of its owner (the controller); called on the
    // worker thread or the caller's, never under the pool's lock.
    class Vms {
      public:
        virtual ~Vms() = default;
        // Starts a spare of this shape (paused, waiting for state); nullopt
        // when the shape is no longer in use.
        virtual std::optional<std::string> boot(const std::string& shape) = 0;
        // Loads the snapshot's state into `spare`; throws when it cannot
        // (the spare is then destroyed by the callee).
        virtual void load(const std::string& spare, const std::string& snapshot) = 0;
        virtual bool snapshotReady(const std::string& snapshot) = 0;
        virtual void destroy(const std::string& spare) = 0;
        struct InUse {
            std::set<std::string> shapes;     // worth a spare now
            std::set<std::string> snapshots;  // ready: their state may sit in a spare
        };
        virtual InUse inUse() = 0;
    };
    struct Taken {
        std::string id;
        bool loaded = false;  // already holds the snapshot's state (paused)
    };

    // perShape 0: no spares, no thread.
    SparePool(Vms& vms, unsigned perShape, std::chrono::milliseconds takeWait);
    ~SparePool();

    // Asks the worker for a spare of this shape after `delay` (with a
    // snapshot: one loaded with its state).
    void want(const std::string& shape, std::chrono::milliseconds delay = {},
              const std::string& snapshot = {});
    // A spare for a clone of this snapshot: one loaded with it, else one
    // still waiting for state; never one loaded with another snapshot. One
    // on its way is waited for, up to takeWait.
    std::optional<Taken> take(const std::string& shape, const std::string& snapshot);
    // Removes spares (and queued requests) of shapes or snapshots no longer
    // in use; waitForStart: also one being started (a delete leaves no VM
    // behind).
    void trim(bool waitForStart = true);
    // Stops the worker and destroys every spare.
    void stop();
    // Stops the worker only (the spares stay for recover() to remove): what
    // an owner going away does before the pool's callbacks become invalid.
    void stopWorker();
    std::size_t count() const;
    // No spare starting and none asked for.
    bool idle() const;

  private:
    struct Request {
        std::string shape;
        std::chrono::steady_clock::time_point due;
        std::string snapshot;  // to preload; empty: a spare waiting for state
    };
    void worker();
    void offer(const std::string& shape, const std::string& id, const std::string& snapshot);
    bool holds(const std::string& id, const std::string& snapshot) const;
    void destroyAll(const std::vector<std::string>& ids);

    Vms& vms_;
    const unsigned perShape_;
    const std::chrono::milliseconds takeWait_;
    mutable std::mutex mutex_;
    std::condition_variable cv_;
    std::map<std::string, std::vector<std::string>> spares_;  // shape -> spare ids
    std::map<std::string, std::string> loaded_;               // spare id -> the snapshot it holds
    std::deque<Request> requests_;
    std::optional<std::string> starting_;  // the shape the worker is starting now
    std::optional<std::string> loading_;   // the snapshot it is loading now
    bool stopping_ = false;
    std::thread thread_;
};

}  // namespace airlock
