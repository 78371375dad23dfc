#include "evidence/ReportHtml.hpp"

#include <cstdio>

#include "core/Html.hpp"

namespace airlock {
namespace {

using json = nlohmann::json;

constexpr std::size_t kMaxDiffLinesPerFile = 2000;
constexpr std::size_t kMaxDiffBytes = 4u << 20;
constexpr std::size_t kMaxRows = 2000;

std::string cellText(const json& j, const char* key) {
    if (!j.is_object() || !j.contains(key)) return {};
    const auto& v = j[key];
    return v.is_string() ? v.get<std::string>() : v.is_null() ? std::string() : v.dump();
}

std::string h(const std::string& s) { return htmlEscape(s); }

// Percent-encodes a relative path for an attribute (then escaped as text).
std::string urlPath(const std::string& path) {
    std::string out;
    for (unsigned char c : path) {
        if (std::isalnum(c) || c == '/' || c == '-' || c == '_' || c == '.' || c == '~') {
            out.push_back(static_cast<char>(c));
        } else {
            char buf[4];
            std::snprintf(buf, sizeof buf, "%%%02X", c);
            out += buf;
        }
    }
    return out;
}

const char* kStyle = R"(
body{font:14px/1.45 system-ui,sans-serif;margin:0;color:#1b1f24;background:#fff}
main{max-width:1200px;margin:0 auto;padding:16px 24px}
h1{font-size:22px;margin:8px 0}h2{font-size:18px;border-bottom:1px solid #d0d7de;padding-bottom:4px;margin-top:28px}
h3{font-size:14px;margin:16px 0 4px;font-family:ui-monospace,monospace}
table{border-collapse:collapse;width:100%;margin:6px 0}th,td{border:1px solid #d0d7de;padding:3px 6px;text-align:left;vertical-align:top}
th{background:#f6f8fa}code,pre{font-family:ui-monospace,monospace;font-size:12px}
pre{margin:0;padding:6px;background:#f6f8fa;overflow-x:auto;white-space:pre-wrap;word-break:break-all}
.add{background:#e6ffec}.del{background:#ffebe9}.hunk{color:#6e7781;background:#ddf4ff}
.sev-high{color:#fff;background:#cf222e}.sev-medium{color:#000;background:#fff8c5}.sev-low{background:#ddf4ff}.sev-info{background:#eaeef2}
.badge{padding:1px 6px;border-radius:8px;font-size:12px}.flag{font-size:11px;padding:0 4px;border:1px solid #8c959f;border-radius:4px;margin-left:3px}
.note{color:#57606a}img.artifact{max-width:400px;border:1px solid #d0d7de}
)";

void row(std::string& out, std::initializer_list<std::string> cells, const char* tag = "td") {
    out += "<tr>";
    for (const auto& c : cells) out += std::string("<") + tag + ">" + c + "</" + tag + ">";
    out += "</tr>\n";
}

// The patch cut into per-file pieces ("diff --git ..." to the next one).
std::vector<std::pair<std::string, std::string>> splitPatch(const std::string& patch) {
    std::vector<std::pair<std::string, std::string>> parts;
    std::size_t pos = patch.rfind("diff --git ", 0) == 0 ? 0 : patch.find("\ndiff --git ");
    while (pos != std::string::npos) {
        if (patch[pos] == '\n') ++pos;
        auto next = patch.find("\ndiff --git ", pos);
        std::string part =
            patch.substr(pos, next == std::string::npos ? std::string::npos : next + 1 - pos);
        auto eol = part.find('\n');
        std::string header = part.substr(0, eol);
        // "diff --git a/x b/x": the path after " b/".
        auto b = header.rfind(" b/");
        parts.emplace_back(b == std::string::npos ? header : header.substr(b + 3), part);
        pos = next;
    }
    return parts;
}

void renderDiff(std::string& out, const std::string& patch) {
    std::size_t shownBytes = 0;
    for (const auto& [path, part] : splitPatch(patch)) {
        out += "<h3 id=\"diff-" + h(urlPath(path)) + "\">" + h(path) + "</h3>\n<pre>";
        std::size_t lines = 0, pos = 0;
        bool cut = false;
        while (pos < part.size()) {
            auto eol = part.find('\n', pos);
            std::string line =
                part.substr(pos, eol == std::string::npos ? std::string::npos : eol - pos);
            pos = eol == std::string::npos ? part.size() : eol + 1;
            if (++lines > kMaxDiffLinesPerFile || shownBytes > kMaxDiffBytes) {
                cut = true;
                break;
            }
            shownBytes += line.size();
            const char* cls = nullptr;
            if (line.rfind("+++", 0) == 0 || line.rfind("---", 0) == 0)
                cls = nullptr;
            else if (!line.empty() && line[0] == '+')
                cls = "add";
            else if (!line.empty() && line[0] == '-')
                cls = "del";
            else if (line.rfind("@@", 0) == 0)
                cls = "hunk";
            if (cls)
                out += std::string("<span class=\"") + cls + "\">" + h(line) + "</span>\n";
            else
                out += h(line) + "\n";
        }
        out += "</pre>\n";
        if (cut)
            out +=
                "<p class=\"note\">Cut here; the whole change is in changes/changes.patch.</p>\n";
    }
}

bool imageType(const std::string& type) {
    return type == "image/png" || type == "image/jpeg" || type == "image/gif" ||
           type == "image/webp";
}

}  // namespace

std::string renderReport(const EvidenceModel& m, const json& findings, const json& tests) {
    const json& man = m.manifest;
    std::string out =
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; img-src 'self' "
        "file:; "
        "style-src 'unsafe-inline'\">\n"
        "<title>Evidence " +
        h(cellText(man, "id")) + "</title>\n<style>" + kStyle + "</style></head>\n<body><main>\n";
    out += "<h1>Evidence bundle " + h(cellText(man, "id")) + "</h1>\n";

    // 1. Summary and findings.
    out += "<section id=\"summary\"><h2>Summary</h2>\n<table>\n";
    const json task =
        man.contains("task") && man["task"].is_object() ? man["task"] : json::object();
    const json ws = man.contains("workspace") && man["workspace"].is_object() ? man["workspace"]
                                                                              : json::object();
    const json tmpl =
        man.contains("template") && man["template"].is_object() ? man["template"] : json::object();
    row(out,
        {"Sandbox", h(cellText(man, "sandbox")) + " (tenant " + h(cellText(man, "tenant")) + ")"});
    if (!task.empty()) {
        row(out, {"Task", h(cellText(task, "id")) +
                              (cellText(task, "requested_by").empty()
                                   ? ""
                                   : " requested by " + h(cellText(task, "requested_by")))});
        row(out, {"Prompt", "<pre>" + h(cellText(task, "prompt")) + "</pre>"});
    }
    row(out, {"Template",
              h(cellText(tmpl, "name")) + " <code>" + h(cellText(tmpl, "digest")) + "</code>"});
    if (ws.empty()) {
        row(out, {"Workspace", "none (no repository was checked out in this sandbox)"});
    } else {
        row(out, {"Repository", h(cellText(ws, "repo")) + " at " + h(cellText(ws, "ref"))});
        row(out, {"Base commit", "<code>" + h(cellText(ws, "base_commit")) + "</code>"});
        row(out, {"Branch", h(cellText(ws, "branch"))});
        row(out, {"Final tree",
                  "<code>" + h(cellText(ws, "final_tree")) + "</code>" +
                      (cellText(ws, "final_commit").empty()
                           ? ""
                           : " commit <code>" + h(cellText(ws, "final_commit")) + "</code>")});
    }
    row(out, {"Time", h(cellText(man, "started_at")) + " to " + h(cellText(man, "ended_at"))});
    row(out,
        {"Tests", h(cellText(tests, "result")) + ": " + h(cellText(tests, "passed")) + " passed, " +
                      h(cellText(tests, "failed")) + " failed, " + h(cellText(tests, "errors")) +
                      " errors, " + h(cellText(tests, "skipped")) + " skipped"});
    if (man.contains("counts") && man["counts"].is_object()) {
        std::string counts;
        for (const auto& [k, v] : man["counts"].items()) counts += h(k) + " " + h(v.dump()) + "; ";
        row(out, {"Counts", counts});
    }
    out += "</table>\n<h2 id=\"findings\">Findings</h2>\n";
    const json list = findings.contains("findings") ? findings["findings"] : json::array();
    if (list.empty())
        out += "<p>No findings.</p>\n";
    else {
        out += "<table>\n";
        row(out, {"Severity", "Kind", "Summary", "Evidence"}, "th");
        for (const auto& f : list) {
            std::string ev;
            if (f.contains("evidence") && f["evidence"].is_array())
                for (std::size_t i = 0; i < f["evidence"].size() && i < 20; ++i)
                    ev += "<code>" + h(f["evidence"][i].dump()) + "</code><br>";
            row(out, {"<span class=\"badge sev-" + h(cellText(f, "severity")) + "\">" +
                          h(cellText(f, "severity")) + "</span>",
                      h(cellText(f, "kind")), h(cellText(f, "summary")), ev});
        }
        out += "</table>\n";
    }
    out += "</section>\n";

    // 2. The diff, per file.
    out += "<section id=\"diff\"><h2>Changes</h2>\n";
    if (m.files.empty())
        out += "<p>No file changed" + std::string(ws.empty() ? " (no workspace)" : "") + ".</p>\n";
    else {
        out += "<table>\n";
        row(out, {"Status", "Path", "+", "-", "Flags"}, "th");
        for (const auto& f : m.files) {
            std::string flags;
            for (const char* flag : {"binary", "lockfile", "manifest", "generated", "sensitive"})
                if (f.value(flag, false))
                    flags += std::string("<span class=\"flag\">") + flag + "</span>";
            if (f.value("in_scope", true) == false)
                flags += "<span class=\"flag\">out of scope</span>";
            std::string path = cellText(f, "path");
            if (cellText(f, "old_path") != "" && cellText(f, "old_path") != path)
                path = cellText(f, "old_path") + " -> " + path;
            row(out,
                {h(cellText(f, "status")),
                 "<a href=\"#diff-" + h(urlPath(cellText(f, "path"))) + "\">" + h(path) + "</a>",
                 h(cellText(f, "additions")), h(cellText(f, "deletions")), flags});
        }
        out += "</table>\n";
        renderDiff(out, m.patch);
    }
    out += "</section>\n";

    // 3. Tests.
    out += "<section id=\"tests\"><h2>Tests</h2>\n<p>Result: <b>" + h(cellText(tests, "result")) +
           "</b></p>\n";
    if (tests.contains("failed_tests") && !tests["failed_tests"].empty()) {
        out += "<table>\n";
        row(out, {"Failed test", "Class", "Status", "Message", "Report"}, "th");
        for (const auto& t : tests["failed_tests"])
            row(out, {h(cellText(t, "name")), h(cellText(t, "classname")), h(cellText(t, "status")),
                      h(cellText(t, "message")), h(cellText(t, "report"))});
        out += "</table>\n";
    }
    if (!m.testRuns.empty()) {
        out += "<table>\n";
        row(out, {"Test run", "Exit code", "Ended"}, "th");
        for (const auto& r : m.testRuns)
            row(out,
                {"<code>" + h(r.command) + "</code>",
                 std::to_string(r.exitCode) + (r.timedOut ? " (timed out)" : ""), h(r.endedAt)});
        out += "</table>\n";
    }
    out += "</section>\n";

    // 4. The command timeline.
    out += "<section id=\"commands\"><h2>Commands</h2>\n<table>\n";
    row(out, {"Time", "Decision", "Command", "Exit", "Purpose", "Approval"}, "th");
    std::size_t n = 0;
    for (const auto& c : m.commands) {
        if (++n > kMaxRows) break;
        row(out, {h(cellText(c, "at")), h(cellText(c, "decision")),
                  "<code>" + h(cellText(c, "command")) + "</code>" +
                      (c.contains("reported_by")
                           ? " <span class=\"note\">(typed at a terminal, as reported by the " +
                                 h(cellText(c, "reported_by")) + ")</span>"
                           : std::string()),
                  h(cellText(c, "exit_code")), h(cellText(c, "purpose")),
                  h(cellText(c, "approval"))});
    }
    out += "</table>\n";
    if (m.commands.size() > kMaxRows)
        out += "<p class=\"note\">More in commands/commands.jsonl.</p>\n";
    out += "</section>\n";

    // 5. Network.
    out += "<section id=\"network\"><h2>Network</h2>\n";
    if (m.egress.empty())
        out += "<p>No outbound connection was attempted.</p>\n";
    else {
        out += "<table>\n";
        row(out, {"Time", "Destination", "Decision", "Reason"}, "th");
        n = 0;
        for (const auto& e : m.egress) {
            if (++n > kMaxRows) break;
            row(out, {h(cellText(e, "at")), h(cellText(e, "host")) + ":" + h(cellText(e, "port")),
                      h(cellText(e, "decision")), h(cellText(e, "reason"))});
        }
        out += "</table>\n";
    }
    out += "</section>\n";

    // 6. Packages and lockfile changes.
    out += "<section id=\"packages\"><h2>Packages</h2>\n";
    if (m.packages.empty())
        out += "<p>No package came through the package proxy.</p>\n";
    else {
        out += "<table>\n";
        row(out, {"Time", "Ecosystem", "Package", "Version", "Decision", "Reason"}, "th");
        n = 0;
        for (const auto& p : m.packages) {
            if (++n > kMaxRows) break;
            row(out,
                {h(cellText(p, "at")), h(cellText(p, "ecosystem")), h(cellText(p, "name")),
                 h(cellText(p, "version")), h(cellText(p, "decision")), h(cellText(p, "reason"))});
        }
        out += "</table>\n";
    }
    if (!m.dependencyChanges.empty()) {
        out += "<h3>Lockfile and manifest changes</h3>\n<table>\n";
        row(out, {"File", "Package", "Change", "Before", "After"}, "th");
        for (const auto& c : m.dependencyChanges)
            row(out, {h(c.file), h(c.name), h(c.change), h(c.before), h(c.after)});
        out += "</table>\n";
    }
    out += "</section>\n";

    // 7. Artifacts.
    out += "<section id=\"artifacts\"><h2>Artifacts</h2>\n";
    if (m.artifacts.empty())
        out += "<p>None collected.</p>\n";
    else {
        out += "<table>\n";
        row(out, {"Path", "Type", "Size", "Note"}, "th");
        for (const auto& a : m.artifacts) {
            std::string note = a.skipped.empty() ? "" : "not collected: " + h(a.skipped);
            if (!a.sensitive.empty())
                note +=
                    (note.empty() ? "" : "; ") + std::string("looks sensitive: ") + h(a.sensitive);
            std::string cell = h(a.path);
            if (a.collected && imageType(a.type) && a.sensitive.empty())
                cell += "<br><img class=\"artifact\" alt=\"" + h(a.path) + "\" src=\"" +
                        h(urlPath(a.bundlePath)) + "\">";
            row(out, {cell, h(a.type), std::to_string(a.size), note});
        }
        out += "</table>\n";
    }
    out += "</section>\n";

    // 8. How to check this bundle without trusting the daemon.
    out +=
        "<section id=\"verify\"><h2>How to verify</h2>\n<pre>"
        "sha256sum -c SHA256SUMS\n"
        "openssl dgst -sha256 -verify evidence-key.pem -signature SHA256SUMS.sig SHA256SUMS\n"
        "git checkout " +
        h(cellText(ws, "base_commit")) +
        " &amp;&amp; git apply --index changes/changes.patch &amp;&amp; git write-tree   # = " +
        h(cellText(ws, "final_tree")) +
        "\n"
        "airlock evidence verify BUNDLE.tar.gz --key evidence-key.pem --repo CLONE</pre>\n"
        "<p class=\"note\">The public key comes from the daemon's <code>GET "
        "/v1/evidence/keys</code> (key id <code>" +
        h(cellText(man.contains("signing") ? man["signing"] : json::object(), "keyid")) +
        "</code>), never from the bundle itself.</p>\n</section>\n";
    out += "</main></body></html>\n";
    return out;
}

}  // namespace airlock
