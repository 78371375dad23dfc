#include "evidence/JunitReport.hpp"

#include <libxml/parser.h>
#include <libxml/tree.h>

#include <cstdlib>
#include <memory>
#include <mutex>

#include "core/Error.hpp"

namespace airlock {
namespace {

using Doc = std::unique_ptr<xmlDoc, decltype(&xmlFreeDoc)>;

[[noreturn]] void refuseReport(const std::string& why) {
    throw Error(ErrorCode::bad_request, "not a JUnit XML report: " + why);
}

bool named(const xmlNode* n, const char* name) {
    return n->type == XML_ELEMENT_NODE &&
           xmlStrcmp(n->name, reinterpret_cast<const xmlChar*>(name)) == 0;
}

std::string attr(const xmlNode* n, const char* name, std::size_t cap = 1024) {
    xmlChar* v = xmlGetNoNsProp(n, reinterpret_cast<const xmlChar*>(name));
    if (!v) return {};
    std::string s(reinterpret_cast<const char*>(v));
    xmlFree(v);
    if (s.size() > cap) s = s.substr(0, cap) + "...";
    return s;
}

class Walker {
  public:
    explicit Walker(std::vector<JunitCase>& out) : out_(out) {}

    void suite(const xmlNode* n, const std::string& parent, int depth) {
        if (depth > 32) refuseReport("test suites nested deeper than 32");
        std::string name = attr(n, "name");
        if (name.empty()) name = parent;
        for (const xmlNode* c = n->children; c; c = c->next) {
            if (named(c, "testsuite") || named(c, "testsuites"))
                suite(c, name, depth + 1);
            else if (named(c, "testcase"))
                testcase(c, name);
        }
    }

  private:
    void testcase(const xmlNode* n, const std::string& suiteName) {
        if (out_.size() >= JunitReport::kMaxCases)
            refuseReport("more than " + std::to_string(JunitReport::kMaxCases) + " test cases");
        JunitCase c;
        c.suite = suiteName;
        c.classname = attr(n, "classname");
        c.name = attr(n, "name");
        if (c.name.empty()) refuseReport("a testcase has no name");
        std::string t = attr(n, "time");
        char* end = nullptr;
        double v = t.empty() ? 0 : std::strtod(t.c_str(), &end);
        c.timeS = (!t.empty() && end && *end == '\0' && v >= 0 && v < 1e9) ? v : 0;
        c.status = "passed";
        // failure and error outrank skipped, whatever their order.
        for (const xmlNode* k = n->children; k; k = k->next) {
            if (named(k, "failure") || named(k, "error")) {
                if (c.status != "error") c.status = named(k, "failure") ? "failed" : "error";
                if (c.message.empty()) c.message = attr(k, "message", 512);
            } else if (named(k, "skipped") && c.status == "passed") {
                c.status = "skipped";
            }
        }
        out_.push_back(std::move(c));
    }
    std::vector<JunitCase>& out_;
};

}  // namespace

JunitReport JunitReport::parse(std::string_view xml) {
    static std::once_flag init;
    std::call_once(init, [] { xmlInitParser(); });
    if (xml.size() > kMaxBytes) refuseReport("larger than " + std::to_string(kMaxBytes) + " bytes");
    // Refused before the parser sees it: a DTD is where entity expansion
    // bombs and external entities live, and no test runner writes one.
    if (xml.find("<!DOCTYPE") != std::string_view::npos) refuseReport("it has a DOCTYPE");
    // No NOENT (entities stay references), no DTD loading, no network; a
    // document with an internal subset is refused below before any walk.
    // Read as UTF-8 whatever it declares, so that the DOCTYPE check above
    // cannot be dodged by another encoding.
    Doc doc(xmlReadMemory(
                xml.data(), static_cast<int>(xml.size()), "junit.xml", "UTF-8",
                XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING | XML_PARSE_NOCDATA),
            xmlFreeDoc);
    if (!doc) refuseReport("it is not well-formed XML");
    if (doc->intSubset || doc->extSubset) refuseReport("it has a DOCTYPE");
    const xmlNode* root = xmlDocGetRootElement(doc.get());
    if (!root || !(named(root, "testsuites") || named(root, "testsuite")))
        refuseReport("the root element is neither <testsuites> nor <testsuite>");
    JunitReport report;
    Walker(report.cases_).suite(root, "", 0);
    return report;
}

std::size_t JunitReport::count(const std::string& status) const {
    std::size_t n = 0;
    for (const auto& c : cases_) n += c.status == status;
    return n;
}

}  // namespace airlock
