#pragma once
#include <string>

namespace airlock::test {

// Where this build's binaries, templates and sources are. Only
// BuildPaths.cpp is compiled with them (a target of its own), so no other
// test file's object depends on the checkout's path and the compiler cache
// serves them to a clone anywhere.
const std::string& binDir();
const std::string& templatesDir();
const std::string& sourceDir();

}  // namespace airlock::test
