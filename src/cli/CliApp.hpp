#pragma once
#include <iosfwd>
#include <string>
#include <vector>

namespace airlock::cli {

// The `airlock` command line: parses argv, calls the REST API, prints.
// Returns the process exit code (exec/run: the command's own exit code).
int runCli(const std::vector<std::string>& args, const std::string& url, const std::string& apiKey,
           std::ostream& out, std::ostream& err);

}  // namespace airlock::cli
