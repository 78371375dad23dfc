#pragma once
#include <string>

namespace airlock {

// Text made safe inside HTML elements and quoted attributes: & < > " ' as
// entities, NUL as U+FFFD. Every HTML page the host writes (the evidence
// report, the package proxy's simple index) escapes through it.
std::string htmlEscape(const std::string& text);

}  // namespace airlock
