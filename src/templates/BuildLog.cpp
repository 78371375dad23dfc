#include "templates/BuildLog.hpp"

#include <fstream>
#include <nlohmann/json.hpp>

#include "core/Clock.hpp"

namespace airlock::templates {

BuildLog::BuildLog(std::string path) : path_(std::move(path)) {}

std::string BuildLog::render(const Line& l) { return l.time + " " + l.level + " " + l.text + "\n"; }

void BuildLog::append(const std::string& level, const std::string& text) {
    std::vector<Follower> to;
    Line line{nowTimestamp(), level, text.substr(0, kMaxLine)};
    // Control bytes from a guest's output never reach a terminal that follows.
    for (char& c : line.text)
        if (static_cast<unsigned char>(c) < 0x20 && c != '\t') c = ' ';
    std::lock_guard lock(mutex_);
    if (closed_ || full_) return;
    if (bytes_ + line.text.size() > kMaxBytes) {
        full_ = true;
        line = Line{nowTimestamp(), "warn", "the log passed its bound; the rest is not kept"};
    }
    bytes_ += line.text.size() + 40;
    std::ofstream(path_, std::ios::app) << nlohmann::json{{"t", line.time}, {"l", line.level}, {"m", line.text}}.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    lines_.push_back(line);
    for (auto it = followers_.begin(); it != followers_.end();) {
        if (!it->second.line(line)) {
            it = followers_.erase(it);
        } else {
            ++it;
        }
    }
}

void BuildLog::appendOutput(const std::string& level, const std::string& output) {
    std::size_t start = 0;
    while (start < output.size()) {
        auto nl = output.find('\n', start);
        if (nl == std::string::npos) nl = output.size();
        append(level, "  | " + output.substr(start, nl - start));
        start = nl + 1;
    }
}

void BuildLog::close() {
    std::map<std::uint64_t, Follower> ending;
    {
        std::lock_guard lock(mutex_);
        if (closed_) return;
        closed_ = true;
        ending.swap(followers_);
    }
    for (auto& [h, f] : ending) f.end();
}

std::uint64_t BuildLog::follow(Follower f) {
    std::unique_lock lock(mutex_);
    for (const auto& l : lines_)
        if (!f.line(l)) return 0;
    if (closed_) {
        lock.unlock();
        f.end();
        return 0;
    }
    auto h = nextHandle_++;
    followers_.emplace(h, std::move(f));
    return h;
}

void BuildLog::unfollow(std::uint64_t handle) {
    std::lock_guard lock(mutex_);
    followers_.erase(handle);
}

std::vector<BuildLog::Line> BuildLog::lines(std::size_t from) const {
    std::lock_guard lock(mutex_);
    if (from >= lines_.size()) return {};
    return {lines_.begin() + static_cast<std::ptrdiff_t>(from), lines_.end()};
}

std::vector<BuildLog::Line> BuildLog::readFile(const std::string& path) {
    std::vector<Line> out;
    std::ifstream in(path);
    std::string text;
    while (std::getline(in, text)) {
        auto j = nlohmann::json::parse(text, nullptr, false);
        if (!j.is_object()) continue;
        out.push_back(Line{j.value("t", ""), j.value("l", "info"), j.value("m", "")});
    }
    return out;
}

}  // namespace airlock::templates
