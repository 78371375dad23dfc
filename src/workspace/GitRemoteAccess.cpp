#include "workspace/GitRemoteAccess.hpp"

#include <openssl/evp.h>

#include <sstream>

#include "workspace/GitSocket.hpp"

namespace airlock::workspace {

struct GitRemoteAccess::State {
    const RemoteUrl* url = nullptr;
    const BrokeredCredential* credential = nullptr;
    int credentialCalls = 0;
    bool headerSent = false;  // the credential went out up front (https kinds)
    std::chrono::steady_clock::time_point deadline;
    std::string refusal;  // why a callback stopped the operation
    std::uint64_t maxBytes = 0;
    ErrorCode limitCode = ErrorCode::payload_too_large;
    const std::string* limitMessage = nullptr;
    bool limited = false;  // stopped at maxBytes
    std::vector<std::string> rejected;
};

namespace {

int stop(GitRemoteAccess::State* s, const std::string& why) {
    s->refusal = why;
    git_error_set_str(GIT_ERROR_NET, why.c_str());
    return GIT_EUSER;
}

int credentialCallback(git_credential** out, const char* url, const char* userFromUrl,
                       unsigned int allowed, void* payload) {
    auto* s = static_cast<GitRemoteAccess::State*>(payload);
    RemoteUrl asked;
    try {
        asked = RemoteUrl::parse(url ? url : "");
    } catch (const std::exception&) {
        return stop(s, "a credential was asked for an address that is not a URL");
    }
    if (!asked.sameOrigin(*s->url))
        return stop(s, "a credential was asked for " + asked.credentialHost() +
                           ", not the workspace's " + s->url->credentialHost() + ": refused");
    if (!s->credential)
        return stop(s, "the repository needs a credential and the workspace names none");
    if (s->credential->host != s->url->credentialHost())
        return stop(
            s, "credential is for " + s->credential->host + ", not " + s->url->credentialHost());
    if (s->headerSent || ++s->credentialCalls > 1)
        return stop(s, "the server refused the credential");
    const auto& c = *s->credential;
    if (c.kind == "ssh-key") {
        if (!(allowed & GIT_CREDENTIAL_SSH_MEMORY) && !(allowed & GIT_CREDENTIAL_SSH_KEY))
            return stop(s, "the server does not take an ssh key");
        std::string user = userFromUrl && *userFromUrl ? userFromUrl : c.username;
        return git_credential_ssh_key_memory_new(out, user.c_str(), nullptr, c.secret.c_str(),
                                                 nullptr);
    }
    if (!(allowed & GIT_CREDENTIAL_USERPASS_PLAINTEXT))
        return stop(s, "the server does not take a user and password");
    std::string user = c.username.empty() ? "x-access-token" : c.username;
    return git_credential_userpass_plaintext_new(out, user.c_str(), c.secret.c_str());
}

std::string base64(const unsigned char* data, std::size_t n) {
    std::string out(4 * ((n + 2) / 3) + 1, '\0');
    int len =
        EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()), data, static_cast<int>(n));
    out.resize(static_cast<std::size_t>(len));
    return out;
}

int certificateCallback(git_cert* cert, int valid, const char* host, void* payload) {
    auto* s = static_cast<GitRemoteAccess::State*>(payload);
    if (!host || s->url->host != host) return stop(s, "connected to an unexpected host");
    if (cert->cert_type == GIT_CERT_HOSTKEY_LIBSSH2) {
        auto* key = reinterpret_cast<git_cert_hostkey*>(cert);
        if (!s->credential || s->credential->knownHosts.empty())
            return stop(s, "an ssh remote needs a credential with known_hosts");
        if (!(key->type & GIT_CERT_SSH_RAW)) return stop(s, "the ssh host key cannot be checked");
        std::string mine =
            base64(reinterpret_cast<const unsigned char*>(key->hostkey), key->hostkey_len);
        std::istringstream lines(s->credential->knownHosts);
        std::string line;
        while (std::getline(lines, line)) {
            std::istringstream words(line);
            std::string hosts, type, b64;
            if (!(words >> hosts >> type >> b64)) continue;
            if (b64 == mine) return 0;
        }
        return stop(
            s, "the ssh host key of " + s->url->host + " is not in the credential's known_hosts");
    }
    if (!valid) return stop(s, "the TLS certificate of " + s->url->host + " did not verify");
    return 0;
}

int progressCallback(const git_indexer_progress* stats, void* payload) {
    auto* s = static_cast<GitRemoteAccess::State*>(payload);
    if (s->maxBytes && stats && stats->received_bytes > s->maxBytes) {
        s->limited = true;
        return stop(s, *s->limitMessage);
    }
    if (std::chrono::steady_clock::now() > s->deadline)
        return stop(s, "the transfer took too long");
    return 0;
}

int pushReferenceCallback(const char* refname, const char* status, void* payload) {
    auto* s = static_cast<GitRemoteAccess::State*>(payload);
    if (status) s->rejected.push_back(std::string(refname ? refname : "?") + ": " + status);
    return 0;
}

}  // namespace

// Basic credentials go out with the first request instead of after a 401:
// libgit2 1.5 misreads a 401 whose body arrives in a packet of its own (the
// next response's status line is read after the body), and a credential
// checked against the remote's origin, with redirects off, only ever
// reaches that origin anyway.
class AuthorizationHeader {
  public:
    AuthorizationHeader(const std::optional<BrokeredCredential>& c, GitRemoteAccess::State& state,
                        git_strarray& headers) {
        if (!c || c->kind == "ssh-key") return;
        std::string user = c->username.empty() ? "x-access-token" : c->username;
        std::string pair = user + ":" + c->secret;
        header_ = "Authorization: Basic " +
                  base64(reinterpret_cast<const unsigned char*>(pair.data()), pair.size());
        std::fill(pair.begin(), pair.end(), '\0');
        list_[0] = header_.data();
        headers.strings = list_;
        headers.count = 1;
        state.headerSent = true;
    }
    ~AuthorizationHeader() { std::fill(header_.begin(), header_.end(), '\0'); }
    AuthorizationHeader(const AuthorizationHeader&) = delete;
    AuthorizationHeader& operator=(const AuthorizationHeader&) = delete;

  private:
    std::string header_;
    char* list_[1] = {nullptr};
};

bool BrokeredCredential::covers(const RemoteUrl& target) const {
    if (target.credentialHost() != host) return false;
    if ((kind == "ssh-key") != (target.scheme == "ssh")) return false;
    if (!ownPath.empty() && target.path == ownPath) return true;
    std::string p = target.scopePath();
    if (p.empty()) return false;
    for (const auto& prefix : scope)
        if (!prefix.empty() && p.rfind(prefix, 0) == 0 &&
            (prefix.back() == '/' || p.size() == prefix.size() || p[prefix.size()] == '/'))
            return true;
    return false;
}

GitRemoteAccess::GitRemoteAccess(RemoteUrl url, std::optional<BrokeredCredential> credential,
                                 std::chrono::seconds timeout)
    : url_(std::move(url)), credential_(std::move(credential)), timeout_(timeout) {
    // The last word before a credential leaves: never to a repository it
    // was not opened for, whatever the caller decided.
    if (credential_ && !credential_->covers(url_))
        throw Error(ErrorCode::forbidden, "the credential is not for " + url_.credentialHost() +
                                              url_.scopePath() +
                                              ": outside the workspace's repository and the "
                                              "credential's scope");
}

GitRemoteAccess::State GitRemoteAccess::newState() const {
    State state;
    state.url = &url_;
    state.credential = credential_ ? &*credential_ : nullptr;
    state.deadline = std::chrono::steady_clock::now() + timeout_;
    state.maxBytes = maxBytes_;
    state.limitCode = limitCode_;
    state.limitMessage = &limitMessage_;
    return state;
}

namespace {
// Errors of the remote, with why a callback stopped it when one did.
[[noreturn]] void failRemote(const GitRemoteAccess::State& s, const std::string& what) {
    if (s.limited) throw Error(s.limitCode, what + ": " + s.refusal);
    std::string msg = s.refusal.empty() ? gitMessage() : s.refusal;
    throw Error(ErrorCode::unprocessable, what + ": " + (msg.empty() ? "failed" : msg));
}

Remote openRemote(git_repository* repo, const GitRemoteAccess::State& state) {
    // The URL as checked: no url.*.insteadOf of any config rewrites it (and
    // libgit2 1.5 leaks a regex match per config entry while looking).
    git_remote_create_options opts = GIT_REMOTE_CREATE_OPTIONS_INIT;
    opts.repository = repo;
    opts.flags = GIT_REMOTE_CREATE_SKIP_INSTEADOF | GIT_REMOTE_CREATE_SKIP_DEFAULT_FETCHSPEC;
    git_remote* raw = nullptr;
    if (git_remote_create_with_opts(&raw, state.url->text.c_str(), &opts) < 0)
        failRemote(state, "cannot use " + state.url->text);
    return Remote(raw);
}

// What every operation's options say: the callbacks and their state, no
// proxy from the environment, no redirect; the credential's header, held
// by the caller for the operation's length.
template <typename Options>
[[nodiscard]] AuthorizationHeader configure(Options& opts, GitRemoteAccess::State& state,
                                            const std::optional<BrokeredCredential>& credential) {
    git_remote_callbacks& cb = opts.callbacks;
    git_remote_init_callbacks(&cb, GIT_REMOTE_CALLBACKS_VERSION);
    cb.credentials = credentialCallback;
    cb.certificate_check = certificateCallback;
    cb.transfer_progress = progressCallback;
    cb.push_update_reference = pushReferenceCallback;
    cb.payload = &state;
    opts.proxy_opts.type = GIT_PROXY_NONE;
    opts.follow_redirects = GIT_REMOTE_REDIRECT_NONE;
    return AuthorizationHeader(credential, state, opts.custom_headers);
}
}  // namespace

void GitRemoteAccess::limitBytes(std::uint64_t maxBytes, ErrorCode code, std::string message) {
    maxBytes_ = maxBytes;
    limitCode_ = code;
    limitMessage_ = std::move(message);
}

void GitRemoteAccess::fetchInto(git_repository* mirror) {
    State state = newState();
    ClearTextCredential clear(clearText());
    Remote remote = openRemote(mirror, state);
    // Connected first, on options this frame owns: libgit2 1.5's fetch
    // leaks its copy of the headers (the credential's) when its own
    // connect fails, and a wrong password is an ordinary failure.
    git_remote_connect_options connect;
    git_remote_connect_options_init(&connect, GIT_REMOTE_CONNECT_OPTIONS_VERSION);
    auto connectAuth = configure(connect, state, credential_);
    if (git_remote_connect_ext(remote.get(), GIT_DIRECTION_FETCH, &connect) < 0)
        failRemote(state, "fetching " + url_.text);
    git_fetch_options opts;
    git_fetch_options_init(&opts, GIT_FETCH_OPTIONS_VERSION);
    auto auth = configure(opts, state, credential_);
    opts.prune = GIT_FETCH_PRUNE;
    opts.download_tags = GIT_REMOTE_DOWNLOAD_TAGS_NONE;  // the refspecs below take them
    const char* specs[] = {"+refs/heads/*:refs/heads/*", "+refs/tags/*:refs/tags/*"};
    git_strarray refspecs{const_cast<char**>(specs), 2};
    if (git_remote_fetch(remote.get(), &refspecs, &opts, "airlock fetch") < 0)
        failRemote(state, "fetching " + url_.text);
    // The remote's default branch becomes the mirror's HEAD: a workspace
    // that names no ref starts from what a clone would check out.
    GitBuf head;
    if (git_remote_default_branch(&head.buf, remote.get()) == 0 && !head.str().empty())
        git_repository_set_head(mirror, head.str().c_str());
}

std::string GitRemoteAccess::branchValue(git_repository* repo, const std::string& branch) {
    State state = newState();
    ClearTextCredential clear(clearText());
    Remote remote = openRemote(repo, state);
    git_remote_connect_options opts;
    git_remote_connect_options_init(&opts, GIT_REMOTE_CONNECT_OPTIONS_VERSION);
    auto auth = configure(opts, state, credential_);
    if (git_remote_connect_ext(remote.get(), GIT_DIRECTION_PUSH, &opts) < 0)
        failRemote(state, "connecting to " + url_.text);
    const git_remote_head** heads = nullptr;
    size_t count = 0;
    if (git_remote_ls(&heads, &count, remote.get()) < 0) failRemote(state, "listing " + url_.text);
    std::string want = "refs/heads/" + branch, value;
    for (size_t i = 0; i < count; ++i)
        if (want == heads[i]->name) value = oidHex(heads[i]->oid);
    git_remote_disconnect(remote.get());
    return value;
}

void GitRemoteAccess::push(git_repository* repo, const std::string& localRef,
                           const std::string& branch) {
    State state = newState();
    ClearTextCredential clear(clearText());
    Remote remote = openRemote(repo, state);
    git_push_options opts;
    git_push_options_init(&opts, GIT_PUSH_OPTIONS_VERSION);
    auto auth = configure(opts, state, credential_);
    std::string spec = localRef + ":refs/heads/" + branch;  // no "+": never forced
    char* specs[] = {spec.data()};
    git_strarray refspecs{specs, 1};
    int rc = git_remote_push(remote.get(), &refspecs, &opts);
    if (!state.rejected.empty()) {
        std::string why;
        for (const auto& r : state.rejected) why += (why.empty() ? "" : "; ") + r;
        throw PushRejected("the server rejected the push: " + why);
    }
    if (rc < 0) {
        std::string msg = state.refusal.empty() ? gitMessage() : state.refusal;
        // libgit2 reports a refused non-fast-forward update as an error.
        if (msg.find("fast-forward") != std::string::npos ||
            msg.find("fastforward") != std::string::npos ||
            msg.find("rejected") != std::string::npos)
            throw PushRejected("the server rejected the push: " + msg);
        failRemote(state, "pushing to " + url_.text);
    }
}

}  // namespace airlock::workspace
