#include "core/Html.hpp"

namespace airlock {

std::string htmlEscape(const std::string& text) {
    std::string out;
    out.reserve(text.size());
    for (char c : text) {
        switch (c) {
            case '&':
                out += "&amp;";
                break;
            case '<':
                out += "&lt;";
                break;
            case '>':
                out += "&gt;";
                break;
            case '"':
                out += "&quot;";
                break;
            case '\'':
                out += "&#39;";
                break;
            case '\0':
                out += "&#xFFFD;";
                break;
            default:
                out.push_back(c);
        }
    }
    return out;
}

}  // namespace airlock
