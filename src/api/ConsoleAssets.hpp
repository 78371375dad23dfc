#pragma once
#include <map>
#include <optional>
#include <string>

#include "api/HttpTypes.hpp"

namespace airlock::api {

// The console's built files (console/ by scripts/setup), read once at start
// from the directory beside the binaries: a request names one of them or
// nothing (no path reaches the disk). index.html is answered with a fresh
// CSP nonce in its placeholder and in the policy, for the <style> elements
// the terminal makes; scripts come from this origin only.
class ConsoleAssets {
  public:
    static constexpr const char* kNoncePlaceholder = "__CSP_NONCE__";
    static constexpr std::size_t kMaxFiles = 256;
    static constexpr std::size_t kMaxBytes = 16u << 20;

    // Loads what `dir` holds (none: the console is not installed).
    explicit ConsoleAssets(const std::string& dir);
    bool installed() const { return files_.count("index.html") > 0; }
    std::size_t size() const { return files_.size(); }
    // The answer for a path under /console/ ("" or "index.html": the page).
    ApiResponse serve(const std::string& relativePath) const;
    // The policy the page is served under, for a nonce.
    static std::string policy(const std::string& nonce);

  private:
    struct File {
        std::string type, bytes;
    };
    std::map<std::string, File> files_;
};

}  // namespace airlock::api
