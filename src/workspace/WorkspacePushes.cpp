#include "workspace/WorkspacePushes.hpp"

#include "core/Ids.hpp"
#include "workspace/GitRemoteAccess.hpp"
#include "workspace/GitSupport.hpp"
#include "workspace/RemoteUrl.hpp"
#include "workspace/WorkingTree.hpp"

namespace airlock::workspace {
using nlohmann::json;

WorkspacePushes::WorkspacePushes(const WorkspaceConfig& config, WorkspaceSandboxes& sandboxes,
                                 WorkspaceCredentials& credentials, GitMirrors& mirrors,
                                 WorkspaceRecords& records)
    : config_(config),
      sandboxes_(sandboxes),
      credentials_(credentials),
      mirrors_(mirrors),
      records_(records) {
    // A push a restart interrupted did not happen as far as anyone knows:
    // failed, and the agent may ask again (the lease is checked anew).
    for (const auto& g : sandboxes_.gates().running("psh-")) {
        sandboxes_.gates().finishPublish(g.id, "failed",
                                          "airlockd restarted during the push; ask again");
        sandboxes_.recordEvent(sandboxRef(g.sandboxId, g.tenant), "push.rejected",
                               {{"push_id", g.id},
                                {"reason", "airlockd restarted during the push"},
                                {"failed", true}});
    }
    worker_ = std::thread([this] { work(); });
}

WorkspacePushes::~WorkspacePushes() {
    {
        std::lock_guard lock(queueMutex_);
        stopping_ = true;
    }
    queueCv_.notify_all();
    if (worker_.joinable()) worker_.join();
}

PushStatus WorkspacePushes::request(const std::string& tenant, const std::string& id,
                                    const std::string& commitHex) {
    auto held = records_.holdOwned(tenant, id);
    auto r = records_.load(tenant, id);
    parseOid(commitHex);
    if (r.head.empty())
        throw Error(ErrorCode::conflict, "nothing to push: commit the workspace first");
    if (commitHex != r.head)
        throw Error(ErrorCode::conflict,
                    "only the task branch's last commit (" + r.head + ") can be pushed");
    if (r.branch.rfind(config_.pushBranchPrefix, 0) != 0)
        throw Error(ErrorCode::forbidden, "pushes go only to branches under '" +
                                              config_.pushBranchPrefix + "'; '" + r.branch +
                                              "' is not");
    RemoteUrl url = RemoteUrl::parse(r.repo);
    requireAllowedAddress(url, config_.addressPolicy);
    std::vector<std::string> mirrors{mirrors_.mirrorPath(tenant, url)};
    Repository work = mirrors_.openWorkRepo(tenant, mirrors);
    Commit c = lookupCommit(work.get(), commitHex);
    Commit base = lookupCommit(work.get(), r.baseCommit);
    std::string treeHex = oidHex(*git_commit_tree_id(c.get()));
    auto d = diffTrees(work.get(), *git_commit_tree_id(base.get()), *git_commit_tree_id(c.get()),
                       r.writeScope);
    if (r.enforceScope && !d.outOfScope.empty())
        throw Error(ErrorCode::conflict,
                    "changes outside the write scope: " + json(d.outOfScope).dump());
    auto credential = credentials_.open(tenant, r.credential, url);
    std::string lease =
        GitRemoteAccess(url, credential, config_.gitTimeout).branchValue(work.get(), r.branch);
    std::string pushId = newId("psh-");
    auto sandbox = sandboxes_.get(tenant, id);
    std::string stats = std::to_string(d.files.size()) + " files, +" + std::to_string(d.additions) +
                        " -" + std::to_string(d.deletions);
    // The approver sees what evidence found of exactly this tree; a bundle
    // sealed for another tree says nothing about it.
    auto brief = evidenceSummary_ ? evidenceSummary_(id, treeHex) : std::nullopt;
    json evidence = nullptr;
    std::string evidenceReason;
    std::string evidenceText = "; no evidence bundle for this tree";
    if (!brief) {
        evidenceReason = "no evidence bundle of this sandbox was sealed for tree " + treeHex +
                         " (the commit's tree)";
    } else {
        json s = json::parse(brief->summaryJson, nullptr, false);
        if (!s.is_object()) s = json::object();
        evidence = {{"id", brief->id}, {"summary", s}};
        std::string tests = s.contains("tests") && s["tests"].is_string()
                                ? s["tests"].get<std::string>()
                                : std::string("?");
        evidenceText = "; evidence " + brief->id + ": tests " + tests;
        if (s.contains("findings") && s["findings"].is_array() && !s["findings"].empty()) {
            evidenceText += ", findings";
            for (const auto& k : s["findings"])
                if (k.is_string()) evidenceText += " " + k.get<std::string>();
        }
    }
    // Per file: what the approver reads before the patch (GET /v1/approvals/{id}/patch).
    json diffstat = json::array();
    for (const auto& f : d.files)
        diffstat.push_back({{"path", f.path},
                            {"old_path", f.oldPath},
                            {"status", f.status},
                            {"additions", f.additions},
                            {"deletions", f.deletions},
                            {"binary", f.binary}});
    // The commit stays in the tenant's store while its approval may be read.
    git_reference* keep = nullptr;
    git_oid commitOid = parseOid(commitHex);
    check(git_reference_create(&keep, work.get(), ("refs/airlock/approvals/" + pushId).c_str(),
                               &commitOid, 1, "push approval"),
          ErrorCode::internal, "ref");
    git_reference_free(keep);
    auto g = sandboxes_.gates().parkPublish(
        sandbox, pushId, "git push " + r.repo + " " + commitHex + ":refs/heads/" + r.branch,
        "a push publishes the agent's work (" + stats + " against " + r.baseCommit.substr(0, 12) +
            evidenceText + ")",
        {{"push_id", pushId},
         {"evidence", evidence},
         {"evidence_reason", evidenceReason.empty() ? json(nullptr) : json(evidenceReason)},
         {"sandbox", id},
         {"repo", r.repo},
         {"branch", r.branch},
         {"commit", commitHex},
         {"tree", treeHex},
         {"lease", lease},
         {"base_commit", r.baseCommit},
         {"base", r.baseCommit},
         {"credential", r.credential},
         {"files", d.files.size()},
         {"additions", d.additions},
         {"deletions", d.deletions},
         {"diffstat",
          {{"files", diffstat}, {"additions", d.additions}, {"deletions", d.deletions}}}});
    sandboxes_.recordEvent(sandbox, "push.requested",
                            {{"push_id", pushId},
                             {"approval_id", g.approvalId},
                             {"repo", r.repo},
                             {"branch", r.branch},
                             {"commit", commitHex},
                             {"tree", treeHex},
                             {"lease", lease},
                             {"stats", stats},
                             {"request_digest", g.requestDigest}});
    PushStatus status;
    status.pushId = pushId;
    status.approvalId = g.approvalId;
    status.state = g.state;
    status.commit = commitHex;
    status.branch = r.branch;
    status.repo = r.repo;
    status.lease = lease;
    return status;
}

PushStatus WorkspacePushes::state(const std::string& tenant, const std::string& id,
                                  const std::string& pushId) {
    sandboxes_.get(tenant, id);
    auto g = isValidId(pushId, "psh-") ? sandboxes_.gates().find(pushId) : std::nullopt;
    if (!g || g->tenant != tenant || g->sandboxId != id)
        throw Error(ErrorCode::not_found, "no push " + pushId);
    auto req = json::parse(g->requestJson, nullptr, false);
    PushStatus status;
    status.pushId = g->id;
    status.approvalId = g->approvalId;
    status.state = g->state == "running" ? "pushing" : g->state;
    status.requestedAt = g->requestedAt;
    if (req.is_object()) {
        status.repo = req.value("repo", "");
        status.branch = req.value("branch", "");
        status.commit = req.value("commit", "");
        status.lease = req.value("lease", "");
    }
    status.decidedBy = g->decidedBy;
    status.decidedAt = g->decidedAt;
    status.decisionReason = g->decisionReason;
    status.error = g->error;
    return status;
}

std::string WorkspacePushes::patch(const GatedExec& approval) {
    auto req = sandboxes_.gates().verifiedRequest(approval);
    std::string commitHex = req.value("commit", ""), baseHex = req.value("base_commit", "");
    RemoteUrl url = RemoteUrl::parse(req.value("repo", ""));
    Repository work = mirrors_.openWorkRepo(approval.tenant, {mirrors_.mirrorPath(approval.tenant, url)});
    Commit c = lookupCommit(work.get(), commitHex);
    Commit base = lookupCommit(work.get(), baseHex);
    return diffTrees(work.get(), *git_commit_tree_id(base.get()), *git_commit_tree_id(c.get()), {})
        .patch;
}

void WorkspacePushes::decided(const GatedExec& g, bool approved) {
    auto sandbox = sandboxRef(g.sandboxId, g.tenant);
    if (!approved) {
        sandboxes_.recordEvent(sandbox, "push.denied",
                                {{"push_id", g.id},
                                 {"approval_id", g.approvalId},
                                 {"by", g.decidedBy},
                                 {"reason", g.decisionReason}});
        return;
    }
    sandboxes_.recordEvent(
        sandbox, "push.approved",
        {{"push_id", g.id}, {"approval_id", g.approvalId}, {"by", g.decidedBy}});
    {
        std::lock_guard lock(queueMutex_);
        queue_.push_back(g);
    }
    queueCv_.notify_one();
}

void WorkspacePushes::work() {
    while (true) {
        GatedExec g;
        {
            std::unique_lock lock(queueMutex_);
            queueCv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
            if (stopping_) {
                for (const auto& left : queue_)
                    sandboxes_.gates().finishPublish(left.id, "failed",
                                                      "airlockd stopped before the push");
                return;
            }
            g = queue_.front();
            queue_.pop_front();
        }
        run(g);
    }
}

void WorkspacePushes::run(const GatedExec& g) {
    auto sandbox = sandboxRef(g.sandboxId, g.tenant);
    try {
        // Exactly what was approved: the parked request its digest binds.
        auto req = sandboxes_.gates().verifiedRequest(g);
        if (!req.is_object()) throw Error(ErrorCode::internal, "the parked push is damaged");
        std::string repoText = req.value("repo", ""), branch = req.value("branch", ""),
                    commitHex = req.value("commit", ""), lease = req.value("lease", "");
        RemoteUrl url = RemoteUrl::parse(repoText);
        auto credential = credentials_.open(g.tenant, req.value("credential", ""), url);
        // The mirror learns the remote's current branches (for the
        // fast-forward check); then the lease is checked on the wire.
        std::string mirror = mirrors_.fetch(g.tenant, url, credential);
        Repository work = mirrors_.openWorkRepo(g.tenant, {mirror});
        GitRemoteAccess remote(url, credential, config_.gitTimeout);
        std::string now = remote.branchValue(work.get(), branch);
        if (now != lease)
            throw PushRejected("the remote branch " + branch +
                               " moved since the push was requested (" +
                               (lease.empty() ? "absent" : lease.substr(0, 12)) + " -> " +
                               (now.empty() ? "absent" : now.substr(0, 12)) + ")");
        git_oid target = parseOid(commitHex);
        if (req.contains("tree")) {
            Commit approved = lookupCommit(work.get(), commitHex);
            if (oidHex(*git_commit_tree_id(approved.get())) != req.value("tree", ""))
                throw Error(ErrorCode::conflict, "commit " + commitHex +
                                                     " does not hold the approved tree");
        }
        if (!now.empty()) {
            git_oid current = parseOid(now);
            if (!git_oid_equal(&current, &target) &&
                git_graph_descendant_of(work.get(), &target, &current) != 1)
                throw PushRejected("non-fast-forward: " + branch + " is at " + now.substr(0, 12) +
                                   ", which the commit does not contain");
        }
        std::string localRef = "refs/airlock/push/" + g.id;
        git_reference* ref = nullptr;
        check(git_reference_create(&ref, work.get(), localRef.c_str(), &target, 1, "push"),
              ErrorCode::internal, "ref");
        git_reference_free(ref);
        remote.push(work.get(), localRef, branch);
        sandboxes_.gates().finishPublish(g.id, "pushed", "");
        sandboxes_.recordEvent(
            sandbox, "push.pushed",
            {{"push_id", g.id}, {"repo", repoText}, {"branch", branch}, {"commit", commitHex}});
    } catch (const PushRejected& e) {
        sandboxes_.gates().finishPublish(g.id, "rejected", e.what());
        sandboxes_.recordEvent(sandbox, "push.rejected",
                                {{"push_id", g.id}, {"reason", e.what()}});
    } catch (const std::exception& e) {
        sandboxes_.gates().finishPublish(g.id, "failed", e.what());
        sandboxes_.recordEvent(sandbox, "push.rejected",
                                {{"push_id", g.id}, {"reason", e.what()}, {"failed", true}});
    }
}

}  // namespace airlock::workspace
