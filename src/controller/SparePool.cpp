#include "controller/SparePool.hpp"

#include <algorithm>

#include "core/Log.hpp"

namespace airlock {

SparePool::SparePool(Vms& vms, unsigned perShape, std::chrono::milliseconds takeWait)
    : vms_(vms), perShape_(perShape), takeWait_(takeWait) {
    if (perShape_ > 0) thread_ = std::thread([this] { worker(); });
}

SparePool::~SparePool() { stopWorker(); }

void SparePool::stopWorker() {
    {
        std::lock_guard lock(mutex_);
        stopping_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
}

bool SparePool::holds(const std::string& id, const std::string& snapshot) const {
    auto it = loaded_.find(id);
    return snapshot.empty() ? it == loaded_.end() : it != loaded_.end() && it->second == snapshot;
}

void SparePool::want(const std::string& shape, std::chrono::milliseconds delay,
                     const std::string& snapshot) {
    if (perShape_ == 0) return;
    {
        std::lock_guard lock(mutex_);
        if (stopping_) return;
        requests_.push_back({shape, std::chrono::steady_clock::now() + delay, snapshot});
    }
    cv_.notify_all();  // the worker, not a clone waiting for a spare
}

std::optional<SparePool::Taken> SparePool::take(const std::string& shape,
                                                const std::string& snapshot) {
    // A spare already on its way (asked for by the snapshot just taken, or by
    // the previous clone) is ready sooner than a VM started now, which would
    // also compete with it for the cores: wait for it, a bounded time.
    std::unique_lock lock(mutex_);
    if (perShape_ == 0) return std::nullopt;
    bool asked = false;
    for (auto& request : requests_)
        if (request.shape == shape) {
            request.due = std::min(request.due, std::chrono::steady_clock::now());  // wanted now
            asked = true;
        }
    if (asked) cv_.notify_all();
    auto usable = [&](const std::string& holding) -> std::optional<std::size_t> {
        auto it = spares_.find(shape);
        if (it == spares_.end()) return std::nullopt;
        for (std::size_t i = 0; i < it->second.size(); ++i)
            if (holds(it->second[i], holding)) return i;
        return std::nullopt;
    };
    auto loadedReady = [&] { return !snapshot.empty() && usable(snapshot).has_value(); };
    auto ready = [&] { return loadedReady() || usable("").has_value(); };
    auto coming = [&] {
        return starting_ == shape ||
               std::any_of(requests_.begin(), requests_.end(),
                           [&](const Request& r) { return r.shape == shape; });
    };
    // The state being loaded for this very snapshot is worth the wait even
    // when a spare without state is there already.
    auto loadingThis = [&] { return starting_ == shape && loading_ == snapshot; };
    cv_.wait_for(lock, takeWait_, [&] {
        return stopping_ || loadedReady() || (!loadingThis() && (ready() || !coming()));
    });
    if (stopping_) return std::nullopt;
    std::optional<std::size_t> index;
    if (!snapshot.empty()) index = usable(snapshot);
    bool loaded = index.has_value();
    if (!index) index = usable("");
    if (!index) return std::nullopt;
    auto& ids = spares_[shape];
    Taken taken{ids[*index], loaded};
    ids.erase(ids.begin() + static_cast<std::ptrdiff_t>(*index));
    if (ids.empty()) spares_.erase(shape);
    loaded_.erase(taken.id);
    return taken;
}

std::size_t SparePool::count() const {
    std::lock_guard lock(mutex_);
    std::size_t n = 0;
    for (const auto& [shape, ids] : spares_) n += ids.size();
    return n;
}

bool SparePool::idle() const {
    std::lock_guard lock(mutex_);
    return !starting_ && requests_.empty();
}

void SparePool::worker() {
    while (true) {
        std::string shape, snapshot;
        std::optional<std::string> reuse, evict;
        {
            std::unique_lock lock(mutex_);
            while (true) {
                if (stopping_) return;
                auto next = std::min_element(
                    requests_.begin(), requests_.end(),
                    [](const Request& a, const Request& b) { return a.due < b.due; });
                if (next == requests_.end()) {
                    cv_.wait(lock);
                    continue;
                }
                if (next->due > std::chrono::steady_clock::now()) {
                    auto due = next->due;  // the wait may change the queue
                    cv_.wait_until(lock, due);
                    continue;
                }
                shape = next->shape;
                snapshot = next->snapshot;
                requests_.erase(next);
                auto& ids = spares_[shape];
                if (!snapshot.empty() && std::any_of(ids.begin(), ids.end(), [&](auto& id) {
                        return holds(id, snapshot);
                    })) {
                    cv_.notify_all();  // loaded already: a clone may wait on this request
                    continue;
                }
                if (snapshot.empty() && ids.size() >= perShape_) {
                    cv_.notify_all();
                    continue;
                }
                // A preload takes a spare still waiting for state if there is
                // one; when the shape is full of spares holding other
                // snapshots, the latest snapshot wins the oldest one's place.
                reuse.reset();
                evict.reset();
                if (!snapshot.empty()) {
                    auto plain = std::find_if(ids.begin(), ids.end(),
                                              [&](auto& id) { return holds(id, ""); });
                    if (plain != ids.end()) {
                        reuse = *plain;
                        ids.erase(plain);
                    } else if (!ids.empty() && ids.size() >= perShape_) {
                        evict = ids.front();
                        loaded_.erase(ids.front());
                        ids.erase(ids.begin());
                    }
                }
                if (ids.empty()) spares_.erase(shape);
                starting_ = shape;
                if (!snapshot.empty()) loading_ = snapshot;
                break;
            }
        }
        try {
            if (evict) vms_.destroy(*evict);
            if (snapshot.empty()) {
                if (auto id = vms_.boot(shape)) offer(shape, *id, "");
            } else if (!vms_.snapshotReady(snapshot)) {
                if (reuse) offer(shape, *reuse, "");  // back as it was
            } else if (auto id = reuse ? reuse : vms_.boot(shape)) {
                // The callee destroys a spare whose load failed: a QEMU
                // whose load failed takes no other state.
                vms_.load(*id, snapshot);
                offer(shape, *id, snapshot);
                logDebug("spares", "spare VM " + *id + " holds " + snapshot);
            }
        } catch (const std::exception& e) {
            logWarn("spares", "cannot start a spare VM for " + shape + ": " + e.what());
        }
        // Its shape or snapshot may have gone meanwhile: trimmed while still
        // "starting", so a delete waiting for this start returns only once
        // the VM it no longer wants is torn down, not while it still is.
        trim(false);
        {
            std::lock_guard lock(mutex_);
            starting_.reset();
            loading_.reset();
        }
        cv_.notify_all();  // ready or not: clones waiting for it go on
    }
}

void SparePool::offer(const std::string& shape, const std::string& id,
                      const std::string& snapshot) {
    {
        std::lock_guard lock(mutex_);
        if (!stopping_) {
            spares_[shape].push_back(id);
            if (!snapshot.empty())
                loaded_[id] = snapshot;
            else
                logDebug("spares", "spare VM " + id + " ready for " + shape);
            return;
        }
    }
    destroyAll({id});
}

void SparePool::trim(bool waitForStart) {
    if (perShape_ == 0) return;
    auto inUse = vms_.inUse();
    auto gone = [&](const std::string& snapshot) {
        return !snapshot.empty() && !inUse.snapshots.count(snapshot);
    };
    std::vector<std::string> drop, replace;
    {
        std::unique_lock lock(mutex_);
        std::erase_if(requests_, [&](const Request& r) {
            return !inUse.shapes.count(r.shape) || gone(r.snapshot);
        });
        // A delete leaves no VM behind, not even one still starting, nor
        // the memory of a deleted snapshot in a spare: wait for the worker
        // (then the spare is in spares_ and goes below, or is gone already).
        if (waitForStart)
            cv_.wait_for(lock, std::chrono::seconds(60), [&] {
                return (!starting_ || inUse.shapes.count(*starting_)) &&
                       (!loading_ || !gone(*loading_));
            });
        for (auto it = spares_.begin(); it != spares_.end();) {
            auto& ids = it->second;
            bool shapeWanted = inUse.shapes.count(it->first) > 0;
            for (auto id = ids.begin(); id != ids.end();) {
                auto loaded = loaded_.find(*id);
                if (shapeWanted && (loaded == loaded_.end() || !gone(loaded->second))) {
                    ++id;
                    continue;
                }
                if (loaded != loaded_.end()) {
                    loaded_.erase(loaded);
                    if (shapeWanted) replace.push_back(it->first);
                }
                drop.push_back(*id);
                id = ids.erase(id);
            }
            it = ids.empty() ? spares_.erase(it) : std::next(it);
        }
    }
    destroyAll(drop);
    // A shape still in use keeps its spare, without the deleted state.
    for (const auto& shape : replace) want(shape);
}

void SparePool::stop() {
    stopWorker();
    std::vector<std::string> drop;
    {
        std::lock_guard lock(mutex_);
        for (auto& [shape, ids] : spares_) drop.insert(drop.end(), ids.begin(), ids.end());
        spares_.clear();
        loaded_.clear();
    }
    destroyAll(drop);
}

void SparePool::destroyAll(const std::vector<std::string>& ids) {
    for (const auto& id : ids) {
        try {
            vms_.destroy(id);
        } catch (const std::exception& e) {
            logError("spares", "cannot remove spare " + id + ": " + e.what());
        }
    }
}

}  // namespace airlock
