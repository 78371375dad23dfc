#include "core/HttpRequestHead.hpp"

#include <algorithm>

namespace airlock {

std::optional<std::string> HttpRequestHead::header(std::string_view name) const {
    for (const auto& h : headers)
        if (h.name == name) return h.value;
    return std::nullopt;
}

HttpRequestHeadParser::Status HttpRequestHeadParser::fail(int status, std::string why) {
    errorStatus_ = status;
    error_ = std::move(why);
    return Status::error;
}

HttpRequestHeadParser::Status HttpRequestHeadParser::parse(std::string_view buffered,
                                                           HttpRequestHead& out,
                                                           std::size_t& headLength) {
    std::size_t end = std::string_view::npos, endLen = 0;
    if (auto crlf = buffered.find("\r\n\r\n"); crlf != std::string_view::npos)
        end = crlf, endLen = 4;
    if (auto lf = buffered.find("\n\n"); lf != std::string_view::npos && lf < end)
        end = lf, endLen = 2;
    if (end == std::string_view::npos) {
        if (buffered.size() > kMaxHead) return fail(431, "request head larger than 16 KiB");
        return Status::need_more;
    }
    if (end + endLen > kMaxHead) return fail(431, "request head larger than 16 KiB");
    headLength = end + endLen;

    std::string_view head = buffered.substr(0, end);
    for (std::size_t i = 0; i < head.size(); ++i)
        if (head[i] == '\0' || (head[i] == '\r' && (i + 1 >= head.size() || head[i + 1] != '\n')))
            return fail(400, "stray CR or NUL in the request head");
    std::vector<std::string_view> lines;
    for (std::size_t pos = 0; pos <= head.size();) {
        auto nl = head.find('\n', pos);
        std::string_view line =
            head.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
        if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
        lines.push_back(line);
        if (nl == std::string_view::npos) break;
        pos = nl + 1;
    }
    if (lines.size() - 1 > kMaxHeaders) return fail(431, "more than 100 header lines");

    // Request line: METHOD SP target SP HTTP/1.x
    std::string_view requestLine = lines[0];
    auto sp1 = requestLine.find(' ');
    auto sp2 = requestLine.rfind(' ');
    if (sp1 == std::string_view::npos || sp2 == sp1) return fail(400, "malformed request line");
    std::string_view method = requestLine.substr(0, sp1);
    std::string_view target = requestLine.substr(sp1 + 1, sp2 - sp1 - 1);
    std::string_view version = requestLine.substr(sp2 + 1);
    if (method.empty() || method.size() > 32 ||
        !std::all_of(method.begin(), method.end(),
                     [](char c) { return (c >= 'A' && c <= 'Z') || c == '-'; }))
        return fail(400, "malformed method");
    if (version != "HTTP/1.1" && version != "HTTP/1.0")
        return fail(505, "only HTTP/1.0 and HTTP/1.1 are served");
    if (target.empty() || std::any_of(target.begin(), target.end(), [](char c) {
            return static_cast<unsigned char>(c) <= 0x20 || c == 0x7f;
        }))
        return fail(400, "malformed request target");

    HttpRequestHead parsed;
    parsed.method = std::string(method);
    parsed.target = std::string(target);
    parsed.version = std::string(version);
    for (std::size_t i = 1; i < lines.size(); ++i) {
        std::string_view line = lines[i];
        if (!line.empty() && (line.front() == ' ' || line.front() == '\t'))
            return fail(400, "folded header lines are not accepted");
        auto colon = line.find(':');
        if (colon == std::string_view::npos || colon == 0)
            return fail(400, "malformed header line");
        std::string name(line.substr(0, colon));
        if (name.find_first_of(" \t") != std::string::npos)
            return fail(400, "malformed header name");
        for (auto& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        std::string_view value = line.substr(colon + 1);
        while (!value.empty() && (value.front() == ' ' || value.front() == '\t'))
            value.remove_prefix(1);
        while (!value.empty() && (value.back() == ' ' || value.back() == '\t'))
            value.remove_suffix(1);
        parsed.headers.push_back({std::move(name), std::string(value), std::string(line)});
    }
    out = std::move(parsed);
    return Status::complete;
}

}  // namespace airlock
