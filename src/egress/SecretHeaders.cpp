#include "egress/SecretHeaders.hpp"

#include <algorithm>
#include <cctype>
#include <optional>

#include "core/AsciiLower.hpp"
#include "core/SecretCipher.hpp"

namespace airlock::egress {

namespace {
bool tokenChar(unsigned char c) {
    return std::isalnum(c) ||
           std::string_view("!#$%&'*+-.^_`|~").find(static_cast<char>(c)) != std::string_view::npos;
}

std::string trimmed(std::string_view v) {
    while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
    while (!v.empty() && (v.back() == ' ' || v.back() == '\t')) v.remove_suffix(1);
    return std::string(v);
}

bool replaceAll(std::string& text, const std::string& from, const std::string& to) {
    if (from.empty()) return false;
    bool any = false;
    for (auto at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) {
        text.replace(at, from.size(), to);
        any = true;
    }
    return any;
}

// The host of a Host field: without its port, lowercase, no trailing dot.
std::string hostOf(const std::string& field) {
    std::string h = field;
    if (!h.empty() && h.front() == '[') {
        auto close = h.find(']');
        h = close == std::string::npos ? "" : h.substr(1, close - 1);
    } else if (auto colon = h.rfind(':'); colon != std::string::npos) {
        h = h.substr(0, colon);
    }
    h = asciiLower(h);
    if (!h.empty() && h.back() == '.') h.pop_back();
    return h;
}

struct Field {
    std::string name, value;
};

RewrittenHead malformed(RewrittenHead r, std::string why) {
    r.outcome = RewrittenHead::Outcome::malformed;
    r.why = std::move(why);
    return r;
}
}  // namespace

HostPattern HostPattern::parse(const std::string& entry) {
    HostPattern p;
    std::string h = asciiLower(entry);
    std::string portText;
    if (!h.empty() && h.front() == '[') {
        auto close = h.find(']');
        if (close == std::string::npos) return {};
        if (close + 1 < h.size()) {
            if (h[close + 1] != ':') return {};
            portText = h.substr(close + 2);
        }
        h = h.substr(1, close - 1);
    } else if (auto colon = h.find(':'); colon != std::string::npos) {
        if (h.find(':', colon + 1) != std::string::npos) {
            portText.clear();  // a bare IPv6 address: no port
        } else {
            portText = h.substr(colon + 1);
            h = h.substr(0, colon);
        }
    }
    if (!portText.empty()) {
        if (portText.size() > 5 || portText.find_first_not_of("0123456789") != std::string::npos)
            return {};
        unsigned long n = std::stoul(portText);
        if (n == 0 || n > 65535) return {};
        p.port = static_cast<unsigned>(n);
    }
    if (!h.empty() && h.back() == '.') h.pop_back();
    p.host = h;
    return p;
}

bool InjectedSecret::coversHost(const std::string& host, unsigned port) const {
    std::string h = asciiLower(host);
    if (h.size() > 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
    if (!h.empty() && h.back() == '.') h.pop_back();
    for (const auto& entry : hosts) {
        auto p = HostPattern::parse(entry);
        if (p.host.empty()) continue;
        bool portOk = p.port ? p.port == port : (port == 443 || port == 80);
        if (!portOk) continue;
        if (p.host.rfind("*.", 0) == 0) {
            std::string suffix = p.host.substr(1);  // ".example.org"
            if (h.size() > suffix.size() &&
                h.compare(h.size() - suffix.size(), suffix.size(), suffix) == 0)
                return true;
        } else if (p.host == h) {
            return true;
        }
    }
    return false;
}

RewrittenHead rewriteRequestHead(std::string_view raw, const std::string& host, unsigned port,
                                 const std::vector<InjectedSecret>& secrets, std::size_t maxHead) {
    RewrittenHead r;
    if (raw.size() > maxHead)
        return malformed(r, "the request head is over " + std::to_string(maxHead) + " bytes");
    if (raw.size() < 4 || raw.substr(raw.size() - 4) != "\r\n\r\n")
        return malformed(r, "the request head does not end with an empty line");
    // Lines end in CRLF only: a bare CR or LF is how one request hides in another.
    std::vector<std::string_view> lines;
    std::string_view rest = raw.substr(0, raw.size() - 2);
    while (!rest.empty()) {
        auto end = rest.find("\r\n");
        std::string_view line = rest.substr(0, end);
        if (line.find_first_of("\r\n") != std::string_view::npos ||
            line.find('\0') != std::string_view::npos)
            return malformed(r, "a bare CR, LF or NUL in the request head");
        lines.push_back(line);
        rest.remove_prefix(end + 2);
    }
    if (lines.empty()) return malformed(r, "no request line");
    // METHOD SP target SP HTTP/1.x
    std::string_view start = lines[0];
    auto sp1 = start.find(' ');
    auto sp2 = sp1 == std::string_view::npos ? sp1 : start.find(' ', sp1 + 1);
    if (sp1 == std::string_view::npos || sp2 == std::string_view::npos || sp1 == 0 ||
        sp2 == sp1 + 1 || start.find(' ', sp2 + 1) != std::string_view::npos)
        return malformed(r, "the request line is not METHOD TARGET VERSION");
    r.method = std::string(start.substr(0, sp1));
    std::string target(start.substr(sp1 + 1, sp2 - sp1 - 1));
    std::string version(start.substr(sp2 + 1));
    if (!std::all_of(r.method.begin(), r.method.end(),
                     [](unsigned char c) { return tokenChar(c); }))
        return malformed(r, "the method is not a token");
    r.path = target.substr(0, target.find('?'));
    if (version != "HTTP/1.1" && version != "HTTP/1.0")
        return malformed(r, "only HTTP/1.1 and 1.0 pass here, not " + version.substr(0, 16));
    std::vector<Field> fields;
    for (std::size_t i = 1; i < lines.size(); ++i) {
        std::string_view line = lines[i];
        if (!line.empty() && (line.front() == ' ' || line.front() == '\t'))
            return malformed(r, "a folded header line (obs-fold)");
        auto colon = line.find(':');
        if (colon == std::string_view::npos || colon == 0)
            return malformed(r, "a header line with no name");
        std::string_view name = line.substr(0, colon);
        if (!std::all_of(name.begin(), name.end(), [](unsigned char c) { return tokenChar(c); }))
            return malformed(r, "a header name that is not a token (or space before its colon)");
        fields.push_back({std::string(name), trimmed(line.substr(colon + 1))});
    }
    std::optional<std::string> hostField;
    bool length = false, encoding = false;
    std::string lastCoding;
    for (const auto& f : fields) {
        std::string n = asciiLower(f.name);
        if (n == "host") {
            if (hostField) return malformed(r, "two Host fields");
            hostField = f.value;
        } else if (n == "content-length") {
            length = true;
        } else if (n == "transfer-encoding") {
            encoding = true;
            auto comma = f.value.rfind(',');
            lastCoding = asciiLower(
                trimmed(comma == std::string::npos ? f.value : f.value.substr(comma + 1)));
        }
    }
    if (!hostField) return malformed(r, "no Host field");
    std::string wanted = asciiLower(host);
    if (!wanted.empty() && wanted.back() == '.') wanted.pop_back();
    if (wanted.size() > 2 && wanted.front() == '[' && wanted.back() == ']')
        wanted = wanted.substr(1, wanted.size() - 2);
    if (hostOf(*hostField) != wanted)
        return malformed(r, "the Host field names another host than the connection's");
    if (length && encoding) return malformed(r, "both Content-Length and Transfer-Encoding");
    if (encoding && lastCoding != "chunked")
        return malformed(r, "a Transfer-Encoding that does not end in chunked");

    // What the guest may not send here: another host's secret.
    auto carries = [&](const std::string& text, const InjectedSecret& s) {
        return (!s.placeholder.empty() && text.find(s.placeholder) != std::string::npos) ||
               (!s.value.empty() && text.find(s.value) != std::string::npos);
    };
    auto basicOf = [](const std::string& value) -> std::optional<std::string> {
        if (asciiLower(value.substr(0, 6)) != "basic ") return std::nullopt;
        try {
            return base64Decode(trimmed(std::string_view(value).substr(6)));
        } catch (const std::exception&) {
            return std::nullopt;
        }
    };
    const std::string whole(raw);
    for (const auto& s : secrets) {
        if (s.coversHost(wanted, port)) continue;
        bool seen = carries(whole, s);
        for (const auto& f : fields)
            if (auto decoded = basicOf(f.value)) seen = seen || carries(*decoded, s);
        if (seen) {
            r.outcome = RewrittenHead::Outcome::blocked;
            r.secret = s.name;
            r.why = "the request to " + wanted + " carries secret '" + s.name +
                    "', which is only for its own hosts";
            return r;
        }
    }

    // A value that could end a header line never goes into one.
    for (const auto& s : secrets)
        if (s.coversHost(wanted, port) &&
            (s.value.find_first_of(std::string("\r\n\0", 3)) != std::string::npos ||
             s.format.find_first_of(std::string("\r\n\0", 3)) != std::string::npos)) {
            r.outcome = RewrittenHead::Outcome::blocked;
            r.secret = s.name;
            r.why = "secret '" + s.name + "' holds a line break: it cannot go in a header";
            return r;
        }

    // Rewritten: placeholders replaced, headers set, the proxy's own fields dropped.
    std::vector<std::string> used;
    auto note = [&](const std::string& name) {
        if (std::find(used.begin(), used.end(), name) == used.end()) used.push_back(name);
    };
    std::vector<Field> out;
    bool covered = std::any_of(secrets.begin(), secrets.end(), [&](const InjectedSecret& s) {
        return s.coversHost(wanted, port);
    });
    for (auto f : fields) {
        std::string n = asciiLower(f.name);
        if (n == "proxy-authorization" || n == "proxy-connection") continue;
        if (n == "accept-encoding" && covered) continue;
        bool drop = false;
        for (const auto& s : secrets)
            if (s.coversHost(wanted, port) && !s.header.empty() && asciiLower(s.header) == n)
                drop = true;
        if (drop) continue;
        for (const auto& s : secrets) {
            if (!s.coversHost(wanted, port) || s.placeholder.empty()) continue;
            if (replaceAll(f.value, s.placeholder, s.value)) note(s.name);
            if (auto decoded = basicOf(f.value);
                decoded && replaceAll(*decoded, s.placeholder, s.value)) {
                f.value = f.value.substr(0, 6) + base64Encode(*decoded);
                note(s.name);
            }
        }
        out.push_back(std::move(f));
    }
    for (const auto& s : secrets) {
        if (!s.coversHost(wanted, port)) continue;
        if (!s.placeholder.empty() && replaceAll(target, s.placeholder, s.value)) note(s.name);
        if (!s.header.empty()) {
            std::string value = s.format;
            replaceAll(value, "{value}", s.value);
            out.push_back({s.header, value});
            note(s.name);
        }
    }
    // A host a secret goes to answers uncompressed, so that a value it
    // echoes is seen and masked (AnswerMasker) before the guest gets it.
    if (covered) out.push_back({"Accept-Encoding", "identity"});
    r.head = r.method + " " + target + " " + version + "\r\n";
    for (const auto& f : out) r.head += f.name + ": " + f.value + "\r\n";
    r.head += "\r\n";
    // Where no value goes (a method, a header's name) a placeholder stays:
    // the host would see it, so the request does not go.
    for (const auto& s : secrets)
        if (!s.placeholder.empty() && r.head.find(s.placeholder) != std::string::npos) {
            r.head.clear();
            r.outcome = RewrittenHead::Outcome::blocked;
            r.secret = s.name;
            r.why = "secret '" + s.name + "' has its placeholder where no value can go";
            return r;
        }
    r.injected = std::move(used);
    r.outcome = RewrittenHead::Outcome::forward;
    return r;
}

}  // namespace airlock::egress
