#include "agent/TerminalJudge.hpp"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "agent/UserDb.hpp"

namespace airlock::guest {
namespace {
constexpr const char* kDir = "/run/airlock-judge";
constexpr const char* kHookPath = "/run/airlock-judge/hook.bash";

// Read by bash in place of its startup files (--rcfile): it reads them
// itself, then installs the DEBUG trap last, so a profile cannot undo it by
// accident. With extdebug, a trap that returns 1 skips the command: once a
// line is denied every command of it is skipped until the next prompt. The
// line is the history's newest entry (HISTCONTROL and HISTIGNORE are
// cleared at each prompt so that it always is); the command itself when the
// history has nothing new. The prompt's own commands are not judged
// (extdebug traces functions too: FUNCNAME tells the hook's own apart).
constexpr const char* kHook = R"HOOK(# Written by airlock-agent: each line typed here is judged by the host's command policy first.
if [ "${AIRLOCK_JUDGE_LOGIN-}" = 1 ]; then
  [ -r /etc/profile ] && . /etc/profile
  for __airlock_f in ~/.bash_profile ~/.bash_login ~/.profile; do
    if [ -r "$__airlock_f" ]; then . "$__airlock_f"; break; fi
  done
  unset __airlock_f
else
  [ -r /etc/bash.bashrc ] && . /etc/bash.bashrc
  [ -r ~/.bashrc ] && . ~/.bashrc
fi
unset AIRLOCK_JUDGE_LOGIN
__airlock_state=prompt
__airlock_seen=
__airlock_precmd() { __airlock_state=precmd; }
__airlock_prompt() {
  HISTCONTROL=; HISTIGNORE=; set -o history
  __airlock_state=prompt
}
__airlock_judge() {
  case "$BASH_COMMAND" in __airlock_precmd|__airlock_prompt) return 0 ;; esac
  case "${FUNCNAME[1]-}" in __airlock_precmd|__airlock_prompt) return 0 ;; esac
  case "$__airlock_state" in
    allow|precmd) return 0 ;;
    deny) return 1 ;;
  esac
  [ -n "${COMP_LINE-}" ] && return 0
  local entry line=$BASH_COMMAND
  entry=$(HISTTIMEFORMAT= builtin history 1)
  if [[ $entry =~ ^[[:space:]]*([0-9]+)[*]?[[:space:]]+(.*)$ ]] && [ "${BASH_REMATCH[1]}" != "$__airlock_seen" ]; then
    __airlock_seen=${BASH_REMATCH[1]}
    line=${BASH_REMATCH[2]}
  fi
  if __AGENT__ judge "$line"; then
    __airlock_state=allow
    return 0
  fi
  __airlock_state=deny
  return 1
}
PROMPT_COMMAND="__airlock_precmd${PROMPT_COMMAND:+;$PROMPT_COMMAND};__airlock_prompt"
readonly -f __airlock_judge __airlock_precmd __airlock_prompt
shopt -s extdebug
trap __airlock_judge DEBUG
)HOOK";

std::string shellQuoted(const std::string& s) {
    std::string out = "'";
    for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return out + "'";
}

bool writeHook(std::string& error) {
    char self[512];
    ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) {
        error = std::string("readlink /proc/self/exe: ") + std::strerror(errno);
        return false;
    }
    std::string hook = kHook;
    hook.replace(hook.find("__AGENT__"), 9, shellQuoted(std::string(self, static_cast<std::size_t>(n))));
    std::string tmp = std::string(kHookPath) + ".tmp";
    UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644));
    bool ok = fd.valid() && ::fchmod(fd.get(), 0644) == 0 &&
              ::write(fd.get(), hook.data(), hook.size()) == static_cast<ssize_t>(hook.size());
    fd.reset();
    if (!ok || ::rename(tmp.c_str(), kHookPath) != 0) {
        error = std::string("writing ") + kHookPath + ": " + std::strerror(errno);
        return false;
    }
    return true;
}

std::string oneLine(std::string s) {
    for (char& c : s)
        if (c == '\n' || c == '\r') c = ' ';
    return s;
}
}  // namespace

std::unique_ptr<TerminalJudge> TerminalJudge::prepare(protocol::ExecRequest& request,
                                                      std::string& error) {
    auto user = lookupUser(request.user);
    if (!user) {
        error = "unknown user '" + request.user + "'";
        return nullptr;
    }
    if (::mkdir(kDir, 0711) != 0 && errno != EEXIST) {
        error = std::string("mkdir ") + kDir + ": " + std::strerror(errno);
        return nullptr;
    }
    if (!writeHook(error)) return nullptr;
    static std::atomic<unsigned> serial{0};
    std::string path = std::string(kDir) + "/" + std::to_string(::getpid()) + "-" +
                       std::to_string(++serial) + ".sock";
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
    UniqueFd listener(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    ::unlink(path.c_str());
    if (!listener.valid() ||
        ::bind(listener.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
        ::chown(path.c_str(), user->uid, user->gid) != 0 || ::chmod(path.c_str(), 0600) != 0 ||
        ::listen(listener.get(), 4) != 0) {
        error = "the terminal's judge socket: " + std::string(std::strerror(errno));
        ::unlink(path.c_str());
        return nullptr;
    }
    bool login = false;
    for (std::size_t i = 1; i < request.argv.size(); ++i)
        login = login || request.argv[i] == "-l" || request.argv[i] == "--login";
    request.argv = {request.argv[0], "--rcfile", kHookPath, "-i"};
    request.env["AIRLOCK_JUDGE_SOCKET"] = path;
    if (login) request.env["AIRLOCK_JUDGE_LOGIN"] = "1";
    return std::unique_ptr<TerminalJudge>(new TerminalJudge(std::move(listener), path));
}

TerminalJudge::~TerminalJudge() { ::unlink(path_.c_str()); }

void TerminalJudge::collectFds(PollSet& set, StreamHandler* owner) const {
    if (!client_) return set.add(listener_.get(), POLLIN, owner);
    // Once asked, only its hang-up matters (a ^C while it waits).
    set.add(client_.get(), asked_ ? 0 : POLLIN, owner);
}

bool TerminalJudge::owns(int fd) const {
    return fd >= 0 && (fd == listener_.get() || fd == client_.get());
}

std::optional<protocol::LineToJudge> TerminalJudge::onFdReady(int fd) {
    if (fd == listener_.get()) {
        if (!client_) client_.reset(::accept4(listener_.get(), nullptr, nullptr,
                                              SOCK_CLOEXEC | SOCK_NONBLOCK));
        line_.clear();
        asked_ = false;
        return std::nullopt;
    }
    if (fd != client_.get()) return std::nullopt;
    if (asked_) {  // hung up while the host decides: its verdict finds nobody
        client_.reset();
        return std::nullopt;
    }
    char buf[4096];
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return std::nullopt;
    if (n < 0) {
        client_.reset();
        return std::nullopt;
    }
    line_.append(buf, static_cast<std::size_t>(n));
    if (line_.size() > protocol::kMaxJudgedLine) {
        answer("deny the line is longer than " + std::to_string(protocol::kMaxJudgedLine) +
                   " bytes: run it as a script",
               true);
        return std::nullopt;
    }
    if (n > 0) return std::nullopt;  // the whole line ends with the client's shutdown
    asked_ = true;
    return protocol::LineToJudge{++nextId_, std::move(line_)};
}

void TerminalJudge::onVerdict(const protocol::LineVerdict& verdict) {
    if (!client_ || !asked_ || verdict.id != nextId_) return;
    if (verdict.state == "pending") return answer("pending " + oneLine(verdict.message), false);
    answer(verdict.state == "allow" ? std::string("allow") : "deny " + oneLine(verdict.message),
           true);
}

void TerminalJudge::answer(const std::string& text, bool final) {
    std::string line = text + "\n";
    // A few hundred bytes into an empty socket buffer: never blocks.
    if (::send(client_.get(), line.data(), line.size(), MSG_NOSIGNAL | MSG_DONTWAIT) < 0 || final) {
        client_.reset();
        line_.clear();
        asked_ = false;
    }
}

int runJudgeClient(int argc, char** argv) {
    auto refuse = [](const std::string& why) {
        std::fprintf(stderr, "airlock: not run: %s\n", why.c_str());
        return 1;
    };
    if (argc != 3) return refuse("usage: airlock-agent judge LINE");
    const char* path = std::getenv("AIRLOCK_JUDGE_SOCKET");
    if (!path || std::strlen(path) >= sizeof(sockaddr_un{}.sun_path))
        return refuse("this terminal has no judge");
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strcpy(addr.sun_path, path);
    UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!fd.valid() || ::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0)
        return refuse(std::string("the terminal's judge: ") + std::strerror(errno));
    std::string line = argv[2];
    for (std::size_t off = 0; off < line.size();) {
        ssize_t n = ::send(fd.get(), line.data() + off, line.size() - off, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return refuse("the terminal's judge stopped reading");
        off += static_cast<std::size_t>(n);
    }
    ::shutdown(fd.get(), SHUT_WR);
    std::string got;
    char buf[2048];
    while (true) {
        std::size_t nl;
        while ((nl = got.find('\n')) != std::string::npos) {
            std::string answer = got.substr(0, nl);
            got.erase(0, nl + 1);
            if (answer == "allow") return 0;
            if (answer.rfind("deny ", 0) == 0) return refuse(answer.substr(5));
            if (answer.rfind("pending ", 0) == 0)
                std::fprintf(stderr, "airlock: %s\n", answer.substr(8).c_str());
        }
        ssize_t n = ::read(fd.get(), buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return refuse("the terminal's judge did not answer");
        if (got.size() > 8192) return refuse("the terminal's judge answered nonsense");
        got.append(buf, static_cast<std::size_t>(n));
    }
}

}  // namespace airlock::guest
