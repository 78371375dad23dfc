#include "packages/PypiIndex.hpp"

#include <algorithm>
#include <cctype>

#include "core/Clock.hpp"
#include "core/Error.hpp"
#include "core/Hex.hpp"
#include "core/Html.hpp"
#include "core/JsonFields.hpp"

namespace airlock::packages {

using nlohmann::json;

namespace {
std::string lower(std::string s) {
    for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
}

std::string unhtmlEscape(const std::string& s) {
    std::string out;
    for (std::size_t i = 0; i < s.size(); ++i) {
        if (s[i] != '&') {
            out += s[i];
            continue;
        }
        // Entities are short: look a few characters ahead only (linear on any page).
        std::size_t semi = std::string::npos;
        for (std::size_t k = i + 1; k < s.size() && k < i + 12; ++k)
            if (s[k] == ';') {
                semi = k;
                break;
            }
        if (semi == std::string::npos) {
            out += s[i];
            continue;
        }
        std::string ent = s.substr(i + 1, semi - i - 1);
        if (ent == "amp")
            out += '&';
        else if (ent == "lt")
            out += '<';
        else if (ent == "gt")
            out += '>';
        else if (ent == "quot")
            out += '"';
        else if (ent == "#39" || ent == "apos")
            out += '\'';
        else if (ent.size() > 1 && ent[0] == '#' &&
                 ent.find_first_not_of("0123456789", 1) == std::string::npos && ent.size() < 5) {
            int code = std::stoi(ent.substr(1));
            out += code > 0 && code < 128 ? static_cast<char>(code) : '?';
        } else {
            out += s.substr(i, semi - i + 1);
        }
        i = semi;
    }
    return out;
}


// The attributes of one tag's text (after "<a"), names lower-cased.
std::vector<std::pair<std::string, std::string>> attributes(const std::string& tag) {
    std::vector<std::pair<std::string, std::string>> out;
    std::size_t i = 0;
    while (i < tag.size()) {
        while (i < tag.size() && std::isspace(static_cast<unsigned char>(tag[i]))) ++i;
        std::size_t start = i;
        while (i < tag.size() && !std::isspace(static_cast<unsigned char>(tag[i])) &&
               tag[i] != '=' && tag[i] != '/')
            ++i;
        std::string name = lower(tag.substr(start, i - start));
        if (name.empty()) {
            ++i;
            continue;
        }
        while (i < tag.size() && std::isspace(static_cast<unsigned char>(tag[i]))) ++i;
        std::string value;
        bool hasValue = false;
        if (i < tag.size() && tag[i] == '=') {
            hasValue = true;
            ++i;
            while (i < tag.size() && std::isspace(static_cast<unsigned char>(tag[i]))) ++i;
            if (i < tag.size() && (tag[i] == '"' || tag[i] == '\'')) {
                char q = tag[i++];
                auto end = tag.find(q, i);
                if (end == std::string::npos) end = tag.size();
                value = tag.substr(i, end - i);
                i = end + 1;
            } else {
                start = i;
                while (i < tag.size() && !std::isspace(static_cast<unsigned char>(tag[i]))) ++i;
                value = tag.substr(start, i - start);
            }
        }
        out.emplace_back(name, hasValue ? unhtmlEscape(value) : std::string("\x01"));
    }
    return out;
}

void finishFile(PypiFile& f) { f.version = pypiFileVersion(f.filename, f.sdist); }
}  // namespace

std::string pypiFileVersion(const std::string& filename, bool& sdist) {
    sdist = false;
    if (filename.size() > 4 && filename.compare(filename.size() - 4, 4, ".whl") == 0) {
        // name-version(-build)?-python-abi-platform.whl
        std::vector<std::string> parts;
        std::size_t start = 0;
        std::string stem = filename.substr(0, filename.size() - 4);
        while (true) {
            auto dash = stem.find('-', start);
            parts.push_back(
                stem.substr(start, dash == std::string::npos ? std::string::npos : dash - start));
            if (dash == std::string::npos) break;
            start = dash + 1;
        }
        if (parts.size() < 5 || parts.size() > 6) return "";
        return parts[1];
    }
    for (const char* ext : {".tar.gz", ".zip", ".tar.bz2", ".tar.xz", ".tgz", ".tar"}) {
        std::string e = ext;
        if (filename.size() > e.size() &&
            filename.compare(filename.size() - e.size(), e.size(), e) == 0) {
            std::string stem = filename.substr(0, filename.size() - e.size());
            auto dash = stem.rfind('-');
            if (dash == std::string::npos || dash + 1 >= stem.size()) return "";
            sdist = true;
            return stem.substr(dash + 1);
        }
    }
    return "";
}

std::vector<PypiFile> parsePypiIndex(const std::string& body, const std::string& contentType,
                                     const HttpUrl& page) {
    std::vector<PypiFile> files;
    std::string type = lower(contentType);
    if (type.find("json") != std::string::npos) {
        if (!jsonNestingWithin(body, 64))
            throw Error(ErrorCode::bad_request, "the index answered JSON nested too deep");
        auto j = json::parse(body, nullptr, false);
        if (!j.is_object() || !j.contains("files") || !j["files"].is_array())
            throw Error(ErrorCode::bad_request, "the index answered JSON without a file list");
        for (const auto& f : j["files"]) {
            if (!f.is_object() || !f.contains("filename") || !f["filename"].is_string() ||
                !f.contains("url") || !f["url"].is_string())
                continue;
            PypiFile out;
            out.filename = f["filename"].get<std::string>();
            auto url = page.resolve(f["url"].get<std::string>());
            if (!url) continue;
            out.url = url->text();
            if (auto h = f.find("hashes"); h != f.end() && h->is_object())
                if (auto s = h->find("sha256"); s != h->end() && s->is_string())
                    out.sha256 = lower(s->get<std::string>());
            if (auto t = f.find("upload-time"); t != f.end() && t->is_string())
                out.uploaded = parseTimestamp(t->get<std::string>());
            if (auto r = f.find("requires-python"); r != f.end() && r->is_string())
                out.requiresPython = r->get<std::string>();
            if (auto y = f.find("yanked"); y != f.end() && (y->is_boolean() || y->is_string()))
                out.yanked = *y;
            if (auto s = f.find("size"); s != f.end() && s->is_number_unsigned())
                out.size = s->get<std::uint64_t>();
            if (!isLowerHex(out.sha256, 64)) out.sha256.clear();
            finishFile(out);
            files.push_back(std::move(out));
        }
        return files;
    }
    if (type.find("html") == std::string::npos && !type.empty())
        throw Error(ErrorCode::bad_request, "the index answered " + contentType.substr(0, 80));
    std::string lowerBody = lower(body);
    std::size_t at = 0, endTag = 0;
    while ((at = lowerBody.find("<a", at)) != std::string::npos) {
        if (at + 2 < lowerBody.size() &&
            !std::isspace(static_cast<unsigned char>(lowerBody[at + 2]))) {
            at += 2;
            continue;
        }
        auto close = body.find('>', at);
        if (close == std::string::npos) break;
        // The next "</a>" is searched for again only once passed: linear overall.
        if (endTag != std::string::npos && endTag < close) endTag = lowerBody.find("</a>", close);
        auto nextAnchor = lowerBody.find("<a", close);
        bool closed = endTag != std::string::npos && endTag < nextAnchor;
        std::string text = closed ? body.substr(close + 1, endTag - close - 1) : std::string();
        PypiFile out;
        std::string href;
        for (auto& [k, v] : attributes(body.substr(at + 2, close - at - 2))) {
            if (k == "href")
                href = v;
            else if (k == "data-requires-python")
                out.requiresPython = v;
            else if (k == "data-yanked")
                out.yanked = v == "\x01" ? json(true) : json(v);
        }
        at = close;
        if (href.empty()) continue;
        auto hash = href.find("#sha256=");
        if (hash != std::string::npos) out.sha256 = lower(href.substr(hash + 8, 64));
        if (!isLowerHex(out.sha256, 64)) out.sha256.clear();
        auto url = page.resolve(href);
        if (!url) continue;
        out.url = url->text();
        out.filename = unhtmlEscape(text);
        while (!out.filename.empty() &&
               std::isspace(static_cast<unsigned char>(out.filename.back())))
            out.filename.pop_back();
        if (out.filename.empty()) {
            std::string p = url->path();
            out.filename = p.substr(p.rfind('/') + 1);
        }
        finishFile(out);
        files.push_back(std::move(out));
    }
    return files;
}

PypiFilterResult filterPypiFiles(const std::vector<PypiFile>& files, const std::string& project,
                                 const PackageRules& rules, std::int64_t nowUnix) {
    PypiFilterResult out;
    for (const auto& f : files) {
        Verdict v;
        if (f.version.empty())
            v = {Gate::deny, "filename", f.filename + " is not a distribution file name"};
        else if (f.sha256.empty())
            v = {Gate::deny, "digest",
                 f.filename + " has no sha256 in the index: it cannot be verified"};
        else
            v = judge(Ecosystem::pypi, rules.pypi, project, f.version, f.uploaded, f.sdist,
                      nowUnix);
        if (v.gate == Gate::allow || v.gate == Gate::approve)
            out.kept.push_back(f);
        else {
            out.refused.emplace_back(f, v);
            if (rules.dryRun && !f.sha256.empty() && !f.version.empty()) out.kept.push_back(f);
        }
    }
    return out;
}

std::string renderPypiJson(const std::string& project, const std::vector<PypiFile>& files,
                           const std::string& fileBase) {
    json list = json::array();
    json versions = json::array();
    for (const auto& f : files) {
        json j{{"filename", f.filename},
               {"url", fileBase + "/" + f.sha256 + "/" + f.filename},
               {"hashes", {{"sha256", f.sha256}}},
               {"yanked", f.yanked}};
        if (!f.requiresPython.empty()) j["requires-python"] = f.requiresPython;
        if (f.uploaded) j["upload-time"] = formatUnixSeconds(*f.uploaded);
        if (f.size) j["size"] = *f.size;
        list.push_back(j);
        if (std::find(versions.begin(), versions.end(), f.version) == versions.end())
            versions.push_back(f.version);
    }
    return json{{"meta", {{"api-version", "1.1"}}},
                {"name", project},
                {"versions", versions},
                {"files", list}}
        .dump();
}

std::string renderPypiHtml(const std::string& project, const std::vector<PypiFile>& files,
                           const std::string& fileBase) {
    std::string out =
        "<!DOCTYPE html>\n<html><head><meta name=\"pypi:repository-version\" content=\"1.1\">"
        "<title>Links for " +
        htmlEscape(project) + "</title></head><body>\n";
    for (const auto& f : files) {
        out += "<a href=\"" + htmlEscape(fileBase + "/" + f.sha256 + "/" + f.filename) +
               "#sha256=" + f.sha256 + "\"";
        if (!f.requiresPython.empty())
            out += " data-requires-python=\"" + htmlEscape(f.requiresPython) + "\"";
        if (f.yanked.is_string())
            out += " data-yanked=\"" + htmlEscape(f.yanked.get<std::string>()) + "\"";
        else if (f.yanked.is_boolean() && f.yanked.get<bool>())
            out += " data-yanked=\"\"";
        out += ">" + htmlEscape(f.filename) + "</a><br/>\n";
    }
    return out + "</body></html>\n";
}

}  // namespace airlock::packages
