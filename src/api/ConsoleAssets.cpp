#include "api/ConsoleAssets.hpp"

#include <filesystem>
#include <fstream>

#include "api/ErrorMapping.hpp"
#include "core/Ids.hpp"
#include "core/Log.hpp"

namespace airlock::api {
namespace fs = std::filesystem;

namespace {

std::string contentType(const std::string& name) {
    static const std::map<std::string, std::string> kTypes = {
        {".html", "text/html; charset=utf-8"},     {".js", "text/javascript; charset=utf-8"},
        {".css", "text/css; charset=utf-8"},       {".svg", "image/svg+xml"},
        {".png", "image/png"},                     {".ico", "image/x-icon"},
        {".woff2", "font/woff2"},                  {".json", "application/json"},
        {".map", "application/json"},              {".txt", "text/plain; charset=utf-8"}};
    auto it = kTypes.find(fs::path(name).extension().string());
    return it == kTypes.end() ? std::string() : it->second;
}

bool plainName(const std::string& name) {
    if (name.empty() || name.size() > 200 || name.front() == '/' || name.find("..") != std::string::npos)
        return false;
    for (unsigned char ch : name)
        if (!std::isalnum(ch) && ch != '.' && ch != '-' && ch != '_' && ch != '/') return false;
    return true;
}

}  // namespace

ConsoleAssets::ConsoleAssets(const std::string& dir) {
    std::error_code ec;
    if (dir.empty() || !fs::is_directory(dir, ec)) return;
    std::size_t total = 0;
    for (auto it = fs::recursive_directory_iterator(dir, ec);
         !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
        if (!it->is_regular_file(ec) || it->is_symlink(ec)) continue;
        std::string name = fs::relative(it->path(), dir, ec).generic_string();
        std::string type = contentType(name);
        if (ec || type.empty() || !plainName(name)) continue;
        std::ifstream in(it->path(), std::ios::binary);
        std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        total += bytes.size();
        if (files_.size() >= kMaxFiles || total > kMaxBytes) {
            logWarn("api", "the console in " + dir + " is larger than it may be; not served");
            files_.clear();
            return;
        }
        files_[name] = File{type, std::move(bytes)};
    }
    if (!installed() && !files_.empty()) {
        logWarn("api", "the console in " + dir + " has no index.html; not served");
        files_.clear();
    }
}

std::string ConsoleAssets::policy(const std::string& nonce) {
    return "default-src 'none'; script-src 'self'; style-src 'self' 'nonce-" + nonce +
           "'; connect-src 'self'; img-src 'self' data:; font-src 'self'; base-uri 'none'; "
           "form-action 'self'; frame-ancestors 'none'";
}

ApiResponse ConsoleAssets::serve(const std::string& relativePath) const {
    if (!installed())
        return errorResponse(ErrorCode::not_found,
                             "the console is not installed on this server (scripts/setup builds "
                             "it beside the binaries)");
    std::string name = relativePath.empty() ? "index.html" : relativePath;
    auto it = files_.find(name);
    if (it == files_.end()) return errorResponse(ErrorCode::not_found, "no console file " + name);
    ApiResponse r{200, it->second.type, it->second.bytes};
    std::string nonce = newSecretToken().substr(0, 24);
    if (name == "index.html") {
        for (auto at = r.body.find(kNoncePlaceholder); at != std::string::npos;
             at = r.body.find(kNoncePlaceholder, at + nonce.size()))
            r.body.replace(at, std::string_view(kNoncePlaceholder).size(), nonce);
    }
    r.headers["Content-Security-Policy"] = policy(nonce);
    r.headers["X-Content-Type-Options"] = "nosniff";
    r.headers["Referrer-Policy"] = "no-referrer";
    r.headers["X-Frame-Options"] = "DENY";
    r.headers["Cache-Control"] = "no-cache";
    return r;
}

}  // namespace airlock::api
