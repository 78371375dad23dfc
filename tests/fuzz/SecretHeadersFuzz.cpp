// libFuzzer target: a request head on its way to a host with injected
// secrets. Whatever the guest sends, a forwarded head is one CRLF-terminated
// head with no placeholder left in it and no value of a secret that is not
// for its host.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "egress/SecretHeaders.hpp"

using namespace airlock::egress;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    std::string input(reinterpret_cast<const char*>(data), size);
    // The first line names the connection's host; the rest is the head.
    auto newline = input.find('\n');
    std::string host = newline == std::string::npos ? "api.example.com" : input.substr(0, newline);
    std::string raw = newline == std::string::npos ? input : input.substr(newline + 1);
    static const std::vector<InjectedSecret> secrets = [] {
        InjectedSecret a;
        a.name = "A";
        a.value = "VALUE-A-1234";
        a.placeholder = "airlock-secret-A-0011";
        a.hosts = {"api.example.com"};
        a.header = "Authorization";
        a.format = "Bearer {value}";
        InjectedSecret b;
        b.name = "B";
        b.value = "VALUE-B-5678";
        b.placeholder = "airlock-secret-B-2233";
        b.hosts = {"*.example.org"};
        return std::vector<InjectedSecret>{a, b};
    }();
    auto r = rewriteRequestHead(raw, host, 443, secrets);
    if (r.outcome != RewrittenHead::Outcome::forward) {
        if (!r.head.empty() || !r.injected.empty()) std::abort();
        return 0;
    }
    if (r.head.size() < 4 || r.head.compare(r.head.size() - 4, 4, "\r\n\r\n") != 0) std::abort();
    if (r.head.find("\r\n\r\n") != r.head.size() - 4) std::abort();  // one head only
    for (const auto& s : secrets) {
        if (r.head.find(s.placeholder) != std::string::npos && s.coversHost(host)) std::abort();
        if (!s.coversHost(host) && (r.head.find(s.value) != std::string::npos ||
                                    r.head.find(s.placeholder) != std::string::npos))
            std::abort();
    }
    return 0;
}
