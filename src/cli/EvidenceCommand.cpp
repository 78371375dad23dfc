#include "cli/EvidenceCommand.hpp"

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <sstream>

#include "cli/HttpClient.hpp"
#include "evidence/BundleVerifier.hpp"

namespace airlock::cli {
namespace {

constexpr std::uintmax_t kMaxBundleBytes = 4ull << 30;
constexpr const char* kVerifyUsage =
    "usage: airlock evidence verify FILE [--key PEM] [--repo DIR] [--expect-sandbox ID] "
    "[--expect-commit SHA]\n";

bool readFile(const std::string& path, std::string& out, std::ostream& err) {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        err << "airlock: cannot read " << path << "\n";
        return false;
    }
    in.seekg(0, std::ios::end);
    auto size = static_cast<std::uintmax_t>(in.tellg());
    if (size > kMaxBundleBytes) {
        err << "airlock: " << path << " is larger than 4 GiB\n";
        return false;
    }
    in.seekg(0);
    out.resize(static_cast<std::size_t>(size));
    in.read(out.data(), static_cast<std::streamsize>(size));
    return static_cast<bool>(in);
}

}  // namespace

int runEvidenceVerify(std::vector<std::string> args, HttpClient& client, std::ostream& out,
                      std::ostream& err) {
    std::string file, keyFile, repo, expectSandbox, expectCommit;
    const std::map<std::string, std::string*> options = {{"--key", &keyFile},
                                                         {"--repo", &repo},
                                                         {"--expect-sandbox", &expectSandbox},
                                                         {"--expect-commit", &expectCommit}};
    for (std::size_t i = 0; i < args.size(); ++i) {
        if (auto o = options.find(args[i]); o != options.end() && i + 1 < args.size()) {
            *o->second = args[i + 1];
            ++i;
        } else if (file.empty() && args[i].rfind("--", 0) != 0) {
            file = args[i];
        } else {
            err << kVerifyUsage;
            return 2;
        }
    }
    if (file.empty()) {
        err << kVerifyUsage;
        return 2;
    }
    std::string bundle;
    if (!readFile(file, bundle, err)) return 1;
    std::vector<std::string> keys;
    if (!keyFile.empty()) {
        std::string pem;
        if (!readFile(keyFile, pem, err)) return 1;
        keys.push_back(pem);
    } else {
        // The daemon's published keys, every one ever active: a bundle sealed
        // before a rotation names a retired key.
        auto r = client.request("GET", "/v1/evidence/keys");
        auto j = nlohmann::json::parse(r.body, nullptr, false);
        if (r.status != 200 || !j.is_object() || !j.contains("keys") || !j["keys"].is_array()) {
            err << "airlock: cannot fetch the evidence keys (HTTP " << r.status
                << "); give one with --key\n";
            return 1;
        }
        for (const auto& k : j["keys"])
            if (k.is_object() && k.contains("public_key_pem") && k["public_key_pem"].is_string())
                keys.push_back(k["public_key_pem"].get<std::string>());
    }
    auto result = BundleVerifier::verify(bundle, keys, repo);
    // Is it the bundle the reviewer asked for? A valid bundle of another
    // sandbox or of another commit is not.
    const auto& manifest = result.manifest;
    auto field = [](const nlohmann::json& j, const char* k) {
        return j.is_object() && j.contains(k) && j[k].is_string() ? j[k].get<std::string>()
                                                                  : std::string();
    };
    if (!expectSandbox.empty()) {
        if (field(manifest, "sandbox") == expectSandbox)
            result.passed.push_back("it is a bundle of sandbox " + expectSandbox);
        else
            result.problems.push_back("it is a bundle of sandbox '" + field(manifest, "sandbox") +
                                      "', not " + expectSandbox);
    }
    if (!expectCommit.empty()) {
        const auto ws = manifest.is_object() && manifest.contains("workspace")
                            ? manifest["workspace"]
                            : nlohmann::json();
        std::string commit = field(ws, "final_commit");
        if (!commit.empty() && commit == expectCommit)
            result.passed.push_back("its workspace's final commit is " + expectCommit);
        else
            result.problems.push_back(
                commit.empty() ? "it names no final commit (expected " + expectCommit + ")"
                               : "its workspace's final commit is " + commit + ", not " +
                                     expectCommit);
    }
    for (const auto& p : result.passed) out << "ok: " << p << "\n";
    for (const auto& p : result.problems) out << "FAILED: " << p << "\n";
    out << (result.ok() ? "the bundle verifies\n" : "the bundle does NOT verify\n");
    return result.ok() ? 0 : 1;
}

namespace {

constexpr const char* kEvidenceUsage =
    "usage: airlock evidence seal ID | ls ID | get EVD_ID [-o FILE] | review EVD_ID approve|reject "
    "[REASON]\n"
    "       airlock evidence verify FILE [--key PEM] [--repo DIR] [--expect-sandbox ID] "
    "[--expect-commit SHA]\n";

// The body as JSON, or the API's error message on stderr (nullopt).
std::optional<nlohmann::json> answer(const HttpResult& r, int wanted, std::ostream& err) {
    auto j = nlohmann::json::parse(r.body, nullptr, false);
    if (r.status == wanted && !j.is_discarded()) return j;
    std::string msg = "HTTP " + std::to_string(r.status);
    if (j.is_object() && j.contains("error") && j["error"].is_object())
        msg += ": " + j["error"].value("message", std::string());
    err << "airlock: " << msg << "\n";
    return std::nullopt;
}

std::string summaryLine(const nlohmann::json& e) {
    std::string line = e.value("id", "") + "  " + e.value("kind", "") + "  " +
                       e.value("created_at", "") + "  sha256 " +
                       e.value("sha256", "").substr(0, 16);
    if (e.contains("summary") && e["summary"].is_object()) {
        const auto& s = e["summary"];
        line += "  tests " + s.value("tests", std::string("?"));
        if (s.contains("findings") && s["findings"].is_array()) {
            line += "  findings";
            for (const auto& k : s["findings"]) line += " " + k.get<std::string>();
        }
    }
    return line;
}

}  // namespace

int runEvidence(std::vector<std::string> args, HttpClient& client, std::ostream& out,
                std::ostream& err) {
    if (args.empty()) {
        err << kEvidenceUsage;
        return 2;
    }
    std::string sub = args[0];
    args.erase(args.begin());
    if (sub == "verify") return runEvidenceVerify(args, client, out, err);
    if (sub == "seal" && args.size() == 1) {
        auto j = answer(client.request("POST", "/v1/sandboxes/" + args[0] + "/evidence", "{}"), 201,
                        err);
        if (!j) return 1;
        out << summaryLine(*j) << "\n";
        return 0;
    }
    if (sub == "ls" && args.size() == 1) {
        auto j = answer(client.request("GET", "/v1/sandboxes/" + args[0] + "/evidence"), 200, err);
        if (!j) return 1;
        for (const auto& e : j->value("evidence", nlohmann::json::array()))
            out << summaryLine(e) << "\n";
        return 0;
    }
    if (sub == "get" && (args.size() == 1 || (args.size() == 3 && args[1] == "-o"))) {
        std::string file = args.size() == 3 ? args[2] : args[0] + ".tar.gz";
        auto r = client.request("GET", "/v1/evidence/" + args[0]);
        if (r.status != 200) {
            answer(r, 200, err);
            return 1;
        }
        std::ofstream f(file, std::ios::binary | std::ios::trunc);
        f.write(r.body.data(), static_cast<std::streamsize>(r.body.size()));
        if (!f) {
            err << "airlock: cannot write " << file << "\n";
            return 1;
        }
        out << file << " (" << r.body.size() << " bytes)\n";
        return 0;
    }
    if (sub == "review" && (args.size() == 2 || args.size() == 3) &&
        (args[1] == "approve" || args[1] == "reject")) {
        nlohmann::json body = {{"decision", args[1]}, {"reason", args.size() == 3 ? args[2] : ""}};
        auto j = answer(client.request("POST", "/v1/evidence/" + args[0] + "/review", body.dump()),
                        201, err);
        if (!j) return 1;
        out << args[0] << ": " << j->value("decision", "") << " by " << j->value("reviewer", "")
            << "\n";
        return 0;
    }
    err << kEvidenceUsage;
    return 2;
}

}  // namespace airlock::cli
