#include <cstdlib>
#include <iostream>

#include "cli/CliApp.hpp"

int main(int argc, char** argv) {
    const char* url = std::getenv("AIRLOCK_URL");
    const char* key = std::getenv("AIRLOCK_API_KEY");
    return airlock::cli::runCli({argv + 1, argv + argc}, url ? url : "http://127.0.0.1:8080", key ? key : "",
                                std::cout, std::cerr);
}
