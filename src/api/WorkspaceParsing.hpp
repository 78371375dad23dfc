#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "controller/WorkspaceSpec.hpp"
#include "store/CredentialStore.hpp"
#include "workspace/WorkspaceService.hpp"

namespace airlock::api {

// The bodies of the workspace routes, strictly (unknown fields refused).
WorkspaceSpec parseWorkspaceSpec(const nlohmann::json& j);
workspace::CredentialSpec parseCredential(const std::string& body);
nlohmann::json credentialJson(const CredentialRecord& c);
// The service's answers as the API renders them.
nlohmann::json workspaceInfoJson(const workspace::WorkspaceInfo& info);
nlohmann::json workspaceDiffJson(const workspace::WorkspaceDiff& d);
nlohmann::json workspaceCommitJson(const workspace::WorkspaceCommit& c);
nlohmann::json pushRequestedJson(const workspace::PushStatus& p);
nlohmann::json pushStatusJson(const workspace::PushStatus& p);

struct CommitRequest {
    std::string message, authorName, authorEmail;
};
CommitRequest parseCommitRequest(const std::string& body);
std::string parsePushRequest(const std::string& body);  // the commit
bool parseResetRequest(const std::string& body);        // clean_ignored

}  // namespace airlock::api
