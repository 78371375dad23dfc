// libFuzzer target: what a tenant sends to build a template, as the server
// reads it: a Dockerfile, a recipe (JSON), a multipart/form-data body, a
// .dockerignore and a build context (a tar). The first byte picks which.
// Whatever the bytes: a result or a typed Error, never another exception.
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>
#include <string_view>

#include "api/MultipartForm.hpp"
#include "core/Error.hpp"
#include "templates/BuildContext.hpp"
#include "templates/DockerIgnore.hpp"
#include "templates/DockerfileParser.hpp"
#include "templates/TemplateSpecJson.hpp"

using namespace airlock;
using namespace airlock::templates;

namespace {

void dockerfile(std::string_view text) {
    auto parsed = parseDockerfile(text, {{"V", "1"}}, {{"PATH", "/usr/bin:/bin"}});
    for (const auto& s : parsed.steps) stepText(s), stepJson(s);
}

void recipe(std::string_view text) {
    auto j = nlohmann::json::parse(text, nullptr, false);
    if (j.is_discarded()) return;
    auto spec = parseTemplateSpec(j);
    specJson(spec);
}

void multipart(std::string_view bytes) {
    auto nl = bytes.find('\n');
    if (nl == std::string_view::npos) return;
    for (const auto& part : parseMultipartForm(bytes.substr(0, nl), bytes.substr(nl + 1), 8))
        if (part.name.empty()) std::abort();  // a part always has its name
}

void ignore(std::string_view text) {
    auto nl = text.find('\n');
    DockerIgnore patterns(text.substr(0, nl == std::string_view::npos ? text.size() : nl));
    for (const char* path : {"a", "a/b", "node_modules/x", ".git/config", "src/app.log", "x/../y"})
        patterns.ignored(path);
}

void context(std::string_view bytes) {
    static const std::string path = "/tmp/airlock-fuzz-context-" + std::to_string(::getpid()) + ".tar";
    std::ofstream(path, std::ios::binary | std::ios::trunc).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    auto c = BuildContext::open(path, 1000, 64u << 20);
    for (const char* src : {".", "a/", "a", "*"}) {
        try {
            c.select(src);
            c.digestOf(src);
        } catch (const Error&) {
        }
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size == 0) return 0;
    std::string_view input(reinterpret_cast<const char*>(data) + 1, size - 1);
    try {
        switch (data[0] % 5) {
            case 0: dockerfile(input); break;
            case 1: recipe(input); break;
            case 2: multipart(input); break;
            case 3: ignore(input); break;
            case 4: context(input); break;
        }
    } catch (const Error&) {
        // refused, as the server would answer it
    }
    return 0;
}
