#include "support/BuildPaths.hpp"

namespace airlock::test {

const std::string& binDir() {
    static const std::string dir = AIRLOCK_BIN_DIR;
    return dir;
}

const std::string& templatesDir() {
    static const std::string dir = AIRLOCK_TEMPLATES_DIR;
    return dir;
}

const std::string& sourceDir() {
    static const std::string dir = AIRLOCK_SOURCE_DIR;
    return dir;
}

}  // namespace airlock::test
