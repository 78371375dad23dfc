#include "egress/EgressAllowlist.hpp"

#include <boost/asio/ip/address.hpp>

#include "core/Error.hpp"

namespace airlock::egress {
namespace {

bool validLabel(const std::string& label) {
    if (label.empty() || label.size() > 63 || label.front() == '-' || label.back() == '-')
        return false;
    for (char c : label)
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_'))
            return false;
    return true;
}

bool validHostName(const std::string& host) {
    if (host.empty() || host.size() > 253) return false;
    std::size_t start = 0;
    while (true) {
        std::size_t dot = host.find('.', start);
        if (!validLabel(
                host.substr(start, dot == std::string::npos ? std::string::npos : dot - start)))
            return false;
        if (dot == std::string::npos) return true;
        start = dot + 1;
    }
}

}  // namespace

std::optional<std::uint16_t> parsePort(std::string_view s) {
    if (s.empty() || s.size() > 5 || s.find_first_not_of("0123456789") != std::string_view::npos)
        return std::nullopt;
    unsigned long v = std::stoul(std::string(s));
    if (v < 1 || v > 65535) return std::nullopt;
    return static_cast<std::uint16_t>(v);
}

std::optional<std::string> normalizeHost(std::string host) {
    for (auto& c : host) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
        host = host.substr(1, host.size() - 2);
        boost::system::error_code ec;
        auto a = boost::asio::ip::make_address_v6(host, ec);
        if (ec) return std::nullopt;
        return a.to_string();
    }
    if (!host.empty() && host.back() == '.') host.pop_back();  // "example.com." is example.com
    boost::system::error_code ec;
    auto v4 = boost::asio::ip::make_address_v4(host, ec);
    if (!ec) return v4.to_string();
    if (host.find(':') != std::string::npos) {
        auto v6 = boost::asio::ip::make_address_v6(host, ec);
        if (ec) return std::nullopt;
        return v6.to_string();
    }
    // Numeric forms ("2130706433", "0x7f.1", "127.1") are addresses to
    // inet_aton and so to getaddrinfo: refuse them rather than guess. No
    // top-level domain starts with a digit.
    auto last = host.substr(host.rfind('.') == std::string::npos ? 0 : host.rfind('.') + 1);
    if (last.empty() || !(last[0] >= 'a' && last[0] <= 'z')) return std::nullopt;
    if (!validHostName(host)) return std::nullopt;
    return host;
}

std::string AllowEntry::text() const {
    std::string h = host.find(':') != std::string::npos ? "[" + host + "]" : host;
    return port ? h + ":" + std::to_string(*port) : h;
}

EgressAllowlist EgressAllowlist::parse(const std::vector<std::string>& entries) {
    if (entries.size() > kMaxEntries)
        throw Error(ErrorCode::bad_request,
                    "network.allow has more than " + std::to_string(kMaxEntries) + " entries");
    EgressAllowlist list;
    for (const auto& raw : entries) {
        auto bad = [&](const std::string& why) {
            return Error(ErrorCode::bad_request,
                         "network.allow entry '" + raw.substr(0, 100) + "': " + why);
        };
        if (raw.empty() || raw.size() > 300)
            throw bad("must be a host name, *.domain or IP, optionally :port");
        AllowEntry e;
        std::string host = raw;
        // host:port, [v6]:port; a bare IPv6 literal has more than one colon.
        if (host.front() == '[') {
            auto close = host.find(']');
            if (close == std::string::npos) throw bad("unterminated [");
            if (close + 1 < host.size()) {
                if (host[close + 1] != ':') throw bad("expected :port after ]");
                e.port = parsePort(host.substr(close + 2));
                if (!e.port) throw bad("port must be 1-65535");
            }
            host = host.substr(0, close + 1);
        } else if (auto colon = host.find(':');
                   colon != std::string::npos && host.find(':', colon + 1) == std::string::npos) {
            e.port = parsePort(host.substr(colon + 1));
            if (!e.port) throw bad("port must be 1-65535");
            host = host.substr(0, colon);
        }
        bool wildcard = host.rfind("*.", 0) == 0;
        if (wildcard) host = host.substr(2);
        if (host.find('*') != std::string::npos) throw bad("* is only allowed as a leading '*.'");
        auto normal = normalizeHost(host);
        if (!normal) throw bad("not a valid host name or IP address");
        if (wildcard) {
            if (normal->find('.') == std::string::npos || normal->find(':') != std::string::npos ||
                normal->find_first_not_of("0123456789.") == std::string::npos)
                throw bad("a wildcard needs a domain with at least two labels (*.example.com)");
            e.host = "*." + *normal;
        } else {
            e.host = *normal;
        }
        list.entries_.push_back(std::move(e));
    }
    return list;
}

namespace {
bool hostMatches(const AllowEntry& e, const std::string& host) {
    if (e.host.rfind("*.", 0) != 0) return e.host == host;
    std::string_view suffix = std::string_view(e.host).substr(1);  // ".example.org"
    return host.size() > suffix.size() &&
           std::string_view(host).substr(host.size() - suffix.size()) == suffix;
}
}  // namespace

bool EgressAllowlist::hostListed(const std::string& host) const {
    for (const auto& e : entries_)
        if (hostMatches(e, host)) return true;
    return false;
}

bool EgressAllowlist::hostListedExactly(const std::string& host) const {
    for (const auto& e : entries_)
        if (e.host == host) return true;
    return false;
}

bool EgressAllowlist::allows(const std::string& host, std::uint16_t port) const {
    for (const auto& e : entries_)
        if (hostMatches(e, host) && (e.port ? *e.port == port : (port == 80 || port == 443)))
            return true;
    return false;
}

std::vector<std::string> EgressAllowlist::texts() const {
    std::vector<std::string> out;
    for (const auto& e : entries_) out.push_back(e.text());
    return out;
}

}  // namespace airlock::egress
