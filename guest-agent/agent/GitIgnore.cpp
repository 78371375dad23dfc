#include "agent/GitIgnore.hpp"

#include "protocol/PathGlob.hpp"

namespace airlock::guest {
void GitIgnore::addFile(const std::string& dir, std::string_view contents) {
    std::size_t i = 0;
    while (i < contents.size() && rules_.size() < kMaxRules) {
        std::size_t j = contents.find('\n', i);
        if (j == std::string_view::npos) j = contents.size();
        std::string line(contents.substr(i, j - i));
        i = j + 1;
        if (!line.empty() && line.back() == '\r') line.pop_back();
        // Trailing spaces go unless escaped.
        while (!line.empty() && line.back() == ' ' &&
               !(line.size() >= 2 && line[line.size() - 2] == '\\'))
            line.pop_back();
        if (line.empty() || line[0] == '#') continue;
        Rule r;
        r.base = dir;
        if (line[0] == '!') {
            r.negate = true;
            line.erase(0, 1);
        } else if (line[0] == '\\' && line.size() > 1 && (line[1] == '#' || line[1] == '!')) {
            line.erase(0, 1);
        }
        if (!line.empty() && line.back() == '/') {
            r.dirOnly = true;
            line.pop_back();
        }
        if (line.empty()) continue;
        if (line.find('/') != std::string::npos) {
            r.anchored = true;
            if (line[0] == '/') line.erase(0, 1);
        }
        if (line.empty() || line.size() > 1024) continue;
        r.pattern = std::move(line);
        rules_.push_back(std::move(r));
    }
}

bool GitIgnore::ignored(const std::string& relPath, bool isDirectory) const {
    for (auto it = rules_.rbegin(); it != rules_.rend(); ++it) {
        const Rule& r = *it;
        if (r.dirOnly && !isDirectory) continue;
        std::string_view rel = relPath;
        if (!r.base.empty()) {
            if (rel.size() <= r.base.size() || rel.compare(0, r.base.size(), r.base) != 0 ||
                rel[r.base.size()] != '/')
                continue;
            rel.remove_prefix(r.base.size() + 1);
        }
        bool hit;
        if (r.anchored) {
            hit = protocol::wildmatch(r.pattern, rel);
        } else {
            auto slash = rel.rfind('/');
            hit = protocol::wildmatch(
                r.pattern, slash == std::string_view::npos ? rel : rel.substr(slash + 1));
        }
        if (hit) return !r.negate;
    }
    return false;
}

}  // namespace airlock::guest
