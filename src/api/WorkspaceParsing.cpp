#include "api/WorkspaceParsing.hpp"

#include <regex>

#include "core/Error.hpp"
#include "core/Hex.hpp"
#include "core/JsonFields.hpp"

namespace airlock::api {
using nlohmann::json;

namespace {

std::string boundedString(const json& j, const char* key, std::size_t max, bool required,
                          const std::string& what) {
    auto it = j.find(key);
    if (it == j.end()) {
        if (required) throw Error(ErrorCode::bad_request, what + ": '" + key + "' is required");
        return {};
    }
    if (!it->is_string())
        throw Error(ErrorCode::bad_request, what + ": '" + key + "' must be a string");
    const auto& s = it->get_ref<const std::string&>();
    if (s.size() > max) throw Error(ErrorCode::bad_request, what + ": '" + key + "' is too long");
    return s;
}

bool flag(const json& j, const char* key, bool dflt, const std::string& what) {
    auto it = j.find(key);
    if (it == j.end()) return dflt;
    if (!it->is_boolean())
        throw Error(ErrorCode::bad_request, what + ": '" + key + "' must be true or false");
    return it->get<bool>();
}

bool printable(const std::string& s) {
    for (unsigned char c : s)
        if (c < 0x20 || c == 0x7f) return false;
    return true;
}

}  // namespace

WorkspaceSpec parseWorkspaceSpec(const json& j) {
    const std::string what = "workspace";
    if (!j.is_object()) throw Error(ErrorCode::bad_request, "'workspace' must be an object");
    rejectUnknownFields(j,
                        {"repo", "ref", "commit", "branch", "path", "credential", "submodules",
                         "write_scope", "enforce_scope"},
                        what);
    WorkspaceSpec s;
    s.repo = boundedString(j, "repo", 2048, true, what);
    s.ref = boundedString(j, "ref", 256, false, what);
    s.commit = boundedString(j, "commit", 40, false, what);
    if (!s.ref.empty() && !s.commit.empty())
        throw Error(ErrorCode::bad_request, "workspace: give 'ref' or 'commit', not both");
    if (!s.commit.empty() && !isLowerHex(s.commit, 40))
        throw Error(ErrorCode::bad_request, "workspace: 'commit' must be 40 lowercase hex digits");
    if (!printable(s.ref))
        throw Error(ErrorCode::bad_request, "workspace: 'ref' has control characters");
    s.branch = boundedString(j, "branch", 200, true, what);
    if (j.contains("path")) {
        s.path = boundedString(j, "path", 1024, true, what);
        if (s.path.empty() || s.path[0] != '/' || s.path == "/" ||
            s.path.find("/..") != std::string::npos || s.path.find("/./") != std::string::npos ||
            !printable(s.path) || s.path.back() == '/')
            throw Error(ErrorCode::bad_request,
                        "workspace: 'path' must be an absolute directory path (not /)");
    }
    s.credential = boundedString(j, "credential", 64, false, what);
    s.submodules = flag(j, "submodules", true, what);
    s.enforceScope = flag(j, "enforce_scope", false, what);
    if (auto it = j.find("write_scope"); it != j.end()) {
        if (!it->is_array() || it->size() > 256)
            throw Error(ErrorCode::bad_request,
                        "workspace: 'write_scope' must be a list of at most 256 globs");
        for (const auto& g : *it) {
            if (!g.is_string() || g.get_ref<const std::string&>().empty() ||
                g.get_ref<const std::string&>().size() > 512)
                throw Error(ErrorCode::bad_request,
                            "workspace: 'write_scope' entries must be non-empty strings");
            s.writeScope.push_back(g.get<std::string>());
        }
    }
    return s;
}

workspace::CredentialSpec parseCredential(const std::string& body) {
    json j = parseJsonBody(body);
    const std::string what = "credential";
    rejectUnknownFields(j, {"name", "kind", "host", "username", "secret", "known_hosts", "scope"},
                        what);
    workspace::CredentialSpec c;
    c.name = boundedString(j, "name", 64, true, what);
    static const std::regex nameRe("[A-Za-z0-9][A-Za-z0-9._-]{0,63}");
    if (!std::regex_match(c.name, nameRe))
        throw Error(ErrorCode::bad_request,
                    "credential: 'name' must be letters, digits, '.', '_' or '-'");
    c.kind = boundedString(j, "kind", 32, true, what);
    if (c.kind != "https-token" && c.kind != "https-basic" && c.kind != "ssh-key")
        throw Error(ErrorCode::bad_request,
                    "credential: 'kind' must be https-token, https-basic or ssh-key");
    c.host = boundedString(j, "host", 260, true, what);
    static const std::regex hostRe("([A-Za-z0-9._-]+|\\[[0-9A-Fa-f:.]+\\])(:[0-9]{1,5})?");
    if (!std::regex_match(c.host, hostRe))
        throw Error(ErrorCode::bad_request,
                    "credential: 'host' must be a host name, with ':port' when not the default");
    c.username = boundedString(j, "username", 256, c.kind == "https-basic", what);
    if (!printable(c.username))
        throw Error(ErrorCode::bad_request, "credential: 'username' has control characters");
    c.secret = boundedString(j, "secret", 16384, true, what);
    if (c.secret.empty())
        throw Error(ErrorCode::bad_request, "credential: 'secret' must not be empty");
    c.knownHosts = boundedString(j, "known_hosts", 65536, c.kind == "ssh-key", what);
    if (c.kind != "ssh-key" && !c.knownHosts.empty())
        throw Error(ErrorCode::bad_request, "credential: 'known_hosts' is for ssh-key credentials");
    // Beyond the workspace's own repository, a credential goes only to
    // repository paths under these prefixes (a submodule elsewhere is
    // fetched without it).
    if (auto it = j.find("scope"); it != j.end()) {
        if (!it->is_array() || it->size() > 32)
            throw Error(ErrorCode::bad_request,
                        "credential: 'scope' must be a list of at most 32 path prefixes");
        for (const auto& p : *it) {
            if (!p.is_string() || p.get_ref<const std::string&>().size() > 512 ||
                !workspace::RemoteUrl::validScopePrefix(p.get<std::string>()))
                throw Error(ErrorCode::bad_request,
                            "credential: 'scope' entries are repository path prefixes like "
                            "\"/org/\" (no '.' or '..' segments, '%', '?', '#' or '\\')");
            c.scope.push_back(p.get<std::string>());
        }
    }
    return c;
}

json credentialJson(const CredentialRecord& c) {
    json j{{"name", c.name}, {"kind", c.kind}, {"host", c.host}, {"created_at", c.createdAt}};
    if (!c.username.empty()) j["username"] = c.username;
    j["scope"] = c.scope;
    return j;
}

namespace {
json submodulesJson(const std::vector<workspace::SubmoduleCheckout>& subs, bool whole) {
    json out = json::array();
    for (const auto& s : subs)
        out.push_back(whole ? json{{"name", s.name}, {"path", s.path}, {"url", s.url}, {"commit", s.commit}}
                            : json{{"path", s.path}, {"commit", s.commit}});
    return out;
}
}  // namespace

json workspaceInfoJson(const workspace::WorkspaceInfo& i) {
    return {{"repo", i.repo},
            {"base_ref", i.baseRef},
            {"base_commit", i.baseCommit},
            {"branch", i.branch},
            {"path", i.path},
            {"write_scope", i.writeScope},
            {"enforce_scope", i.enforceScope},
            {"credential", i.credential},
            {"head", i.head.empty() ? json(nullptr) : json(i.head)},
            {"submodules", submodulesJson(i.submodules, false)},
            {"skipped_submodules", submodulesJson(i.skippedSubmodules, true)},
            {"warnings", i.warnings},
            {"changed_files", i.changedFiles ? json(*i.changedFiles) : json(nullptr)}};
}

json workspaceDiffJson(const workspace::WorkspaceDiff& d) {
    return {{"base_commit", d.baseCommit},      {"tree", d.tree},
            {"files", workspace::changedFilesJson(d.diff.files)},            {"additions", d.diff.additions},
            {"deletions", d.diff.deletions},    {"out_of_scope", d.diff.outOfScope}};
}

json workspaceCommitJson(const workspace::WorkspaceCommit& c) {
    return {{"commit", c.commit}, {"tree", c.tree}, {"parent", c.parent}, {"branch", c.branch}};
}

json pushRequestedJson(const workspace::PushStatus& p) {
    return {{"push_id", p.pushId}, {"approval_id", p.approvalId}, {"state", p.state},
            {"commit", p.commit},  {"branch", p.branch},          {"repo", p.repo}};
}

json pushStatusJson(const workspace::PushStatus& p) {
    json out{{"push_id", p.pushId},
             {"approval_id", p.approvalId},
             {"state", p.state},
             {"requested_at", p.requestedAt},
             {"repo", p.repo},
             {"branch", p.branch},
             {"commit", p.commit},
             {"lease", p.lease}};
    if (!p.decidedBy.empty()) {
        out["decided_by"] = p.decidedBy;
        out["decided_at"] = p.decidedAt;
        out["decision_reason"] = p.decisionReason;
    }
    if (!p.error.empty()) out["error"] = p.error;
    return out;
}

CommitRequest parseCommitRequest(const std::string& body) {
    json j = parseJsonBody(body);
    const std::string what = "commit request";
    rejectUnknownFields(j, {"message", "author"}, what);
    CommitRequest r;
    r.message = boundedString(j, "message", 64 * 1024, true, what);
    if (r.message.find_first_not_of(" \t\r\n") == std::string::npos)
        throw Error(ErrorCode::bad_request, "commit request: 'message' must not be empty");
    auto a = j.find("author");
    if (a == j.end() || !a->is_object())
        throw Error(ErrorCode::bad_request,
                    "commit request: 'author' {\"name\",\"email\"} is required");
    rejectUnknownFields(*a, {"name", "email"}, "author");
    r.authorName = boundedString(*a, "name", 256, true, "author");
    r.authorEmail = boundedString(*a, "email", 256, true, "author");
    for (const auto& s : {r.authorName, r.authorEmail})
        if (s.empty() || !printable(s) || s.find_first_of("<>") != std::string::npos)
            throw Error(
                ErrorCode::bad_request,
                "author: name and email must be non-empty, without '<', '>' or control characters");
    return r;
}

std::string parsePushRequest(const std::string& body) {
    json j = parseJsonBody(body);
    rejectUnknownFields(j, {"commit"}, "push request");
    std::string c = boundedString(j, "commit", 40, true, "push request");
    if (!isLowerHex(c, 40))
        throw Error(ErrorCode::bad_request,
                    "push request: 'commit' must be 40 lowercase hex digits");
    return c;
}

bool parseResetRequest(const std::string& body) {
    if (body.empty()) return false;
    json j = parseJsonBody(body);
    rejectUnknownFields(j, {"clean_ignored"}, "reset request");
    return flag(j, "clean_ignored", false, "reset request");
}

}  // namespace airlock::api
