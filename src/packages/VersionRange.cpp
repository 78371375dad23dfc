#include "packages/VersionRange.hpp"

#include <cctype>

#include "core/Error.hpp"

namespace airlock::packages {

namespace {
struct Parsed {
    std::vector<unsigned long long> release;
    std::string pre;  // empty: a release
};

Parsed split(std::string_view v) {
    Parsed p;
    if (!v.empty() && (v[0] == 'v' || v[0] == 'V')) v.remove_prefix(1);
    if (auto plus = v.find('+'); plus != std::string_view::npos) v = v.substr(0, plus);
    std::size_t i = 0;
    while (i < v.size()) {
        if (!std::isdigit(static_cast<unsigned char>(v[i]))) break;
        unsigned long long n = 0;
        std::size_t digits = 0;
        while (i < v.size() && std::isdigit(static_cast<unsigned char>(v[i]))) {
            if (digits < 18) n = n * 10 + static_cast<unsigned>(v[i] - '0');
            ++digits;
            ++i;
        }
        p.release.push_back(n);
        if (i < v.size() && v[i] == '.' && i + 1 < v.size() &&
            std::isdigit(static_cast<unsigned char>(v[i + 1])))
            ++i;
        else
            break;
    }
    std::string_view rest = v.substr(i);
    while (!rest.empty() && (rest[0] == '-' || rest[0] == '.' || rest[0] == '_'))
        rest.remove_prefix(1);
    // PEP 440's post-releases sort after their release.
    if (rest.rfind("post", 0) == 0) {
        p.release.push_back(0);
        p.release.push_back(1);
    } else {
        p.pre = std::string(rest);
    }
    while (p.release.size() > 1 && p.release.back() == 0) p.release.pop_back();
    return p;
}

// Pre-release identifiers: numbers below words, numbers numerically.
int comparePre(const std::string& a, const std::string& b) {
    std::size_t i = 0, j = 0;
    while (i < a.size() && j < b.size()) {
        bool da = std::isdigit(static_cast<unsigned char>(a[i]));
        bool db = std::isdigit(static_cast<unsigned char>(b[j]));
        if (da && db) {
            std::size_t si = i, sj = j;
            while (i < a.size() && std::isdigit(static_cast<unsigned char>(a[i]))) ++i;
            while (j < b.size() && std::isdigit(static_cast<unsigned char>(b[j]))) ++j;
            auto na = std::stoull("0" + a.substr(si, std::min<std::size_t>(i - si, 18)));
            auto nb = std::stoull("0" + b.substr(sj, std::min<std::size_t>(j - sj, 18)));
            if (na != nb) return na < nb ? -1 : 1;
            continue;
        }
        if (da != db) return da ? -1 : 1;
        if (a[i] != b[j]) return a[i] < b[j] ? -1 : 1;
        ++i;
        ++j;
    }
    if (i < a.size()) return 1;
    if (j < b.size()) return -1;
    return 0;
}
}  // namespace

int compareVersions(std::string_view a, std::string_view b) {
    auto pa = split(a), pb = split(b);
    std::size_t n = std::max(pa.release.size(), pb.release.size());
    for (std::size_t i = 0; i < n; ++i) {
        auto x = i < pa.release.size() ? pa.release[i] : 0;
        auto y = i < pb.release.size() ? pb.release[i] : 0;
        if (x != y) return x < y ? -1 : 1;
    }
    if (pa.pre.empty() != pb.pre.empty()) return pa.pre.empty() ? 1 : -1;
    return comparePre(pa.pre, pb.pre);
}

bool isPrerelease(std::string_view version) { return !split(version).pre.empty(); }

VersionRange VersionRange::parse(std::string_view text) {
    VersionRange range;
    if (text.size() > 256) throw Error(ErrorCode::bad_request, "a version range is too long");
    std::string all(text);
    std::size_t start = 0;
    bool sawAny = false;
    while (start <= all.size()) {
        auto bar = all.find("||", start);
        std::string part =
            all.substr(start, bar == std::string::npos ? std::string::npos : bar - start);
        start = bar == std::string::npos ? all.size() + 1 : bar + 2;
        std::vector<Comparator> set;
        std::size_t i = 0;
        while (i < part.size()) {
            while (i < part.size() && part[i] == ' ') ++i;
            if (i >= part.size()) break;
            Op op = Op::eq;
            if (part.compare(i, 2, "<=") == 0)
                op = Op::le, i += 2;
            else if (part.compare(i, 2, ">=") == 0)
                op = Op::ge, i += 2;
            else if (part[i] == '<')
                op = Op::lt, ++i;
            else if (part[i] == '>')
                op = Op::gt, ++i;
            else if (part[i] == '=')
                op = Op::eq, ++i;
            while (i < part.size() && part[i] == ' ') ++i;
            std::size_t from = i;
            while (i < part.size() && part[i] != ' ') ++i;
            std::string version = part.substr(from, i - from);
            bool valid = !version.empty() && std::isdigit(static_cast<unsigned char>(version[0]));
            for (char c : version)
                if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-' &&
                    c != '+' && c != '_')
                    valid = false;
            if (!valid)
                throw Error(ErrorCode::bad_request,
                            "'" + std::string(text) +
                                "' is not a version range (comparators such as <2.0.0 or >=1.2 "
                                "<1.4, alternatives joined by ||)");
            set.push_back({op, version});
        }
        if (set.empty()) {
            if (bar != std::string::npos || sawAny)
                throw Error(ErrorCode::bad_request,
                            "'" + std::string(text) + "' has an empty alternative");
            break;
        }
        sawAny = true;
        range.alternatives_.push_back(std::move(set));
        if (bar == std::string::npos) break;
    }
    return range;
}

bool VersionRange::contains(std::string_view version) const {
    if (alternatives_.empty()) return true;
    for (const auto& set : alternatives_) {
        bool all = true;
        for (const auto& c : set) {
            int cmp = compareVersions(version, c.version);
            bool ok = false;
            switch (c.op) {
                case Op::lt:
                    ok = cmp < 0;
                    break;
                case Op::le:
                    ok = cmp <= 0;
                    break;
                case Op::gt:
                    ok = cmp > 0;
                    break;
                case Op::ge:
                    ok = cmp >= 0;
                    break;
                case Op::eq:
                    ok = cmp == 0;
                    break;
            }
            if (!ok) {
                all = false;
                break;
            }
        }
        if (all) return true;
    }
    return false;
}

}  // namespace airlock::packages
