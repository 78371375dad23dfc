#pragma once
#include <boost/asio/thread_pool.hpp>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "agentclient/AgentStream.hpp"
#include "controller/SandboxCommands.hpp"
#include "controller/TerminalLines.hpp"

namespace airlock::e2b {

// Who watches a process: a Start or Connect stream. Called from the agent
// connection's thread: must not block.
class ProcessSubscriber {
  public:
    virtual ~ProcessSubscriber() = default;
    // One ProcessEvent ({"event":{...}}); false: it could not take it (its
    // queue is full or its client left) and it is dropped. `window` (output
    // events) is the guest's window for these bytes: held until the event
    // was written to the client or dropped.
    virtual bool event(std::string json, std::shared_ptr<void> window = nullptr) = 0;
    // The process is over: no error after its end event, else why it could
    // not run (a Connect code and a message).
    virtual void ended(std::optional<std::pair<std::string, std::string>> error) = 0;
    // The process's stream broke (the sandbox was killed or paused): the
    // client's stream is cut without an end, as envd's is.
    virtual void broken() = 0;
};

struct ProcessSpec {
    std::string cmd;
    std::vector<std::string> args;
    std::map<std::string, std::string> envs;
    std::optional<std::string> cwd;
    std::optional<std::string> tag;
    bool stdinOpen = false;
    bool pty = false;
    unsigned rows = 24, cols = 80;
    std::string user;       // "" : the sandbox's default user
    unsigned timeoutS = 0;  // 0: none (the process lives until it exits or is killed)
};

// One command started through envd's process.Process/Start. It belongs to
// its sandbox, not to the client's stream: a client that leaves leaves it
// running (its output is then dropped), a later Connect watches it again.
// Its output goes back to the guest's window only once every watcher wrote
// it to its client (or dropped it): a watcher that reads slowly slows the
// process, never our memory; with no watcher the window returns at once.
class E2bProcess : public std::enable_shared_from_this<E2bProcess> {
  public:
    E2bProcess(std::string sandboxId, ProcessSpec spec)
        : sandboxId_(std::move(sandboxId)), spec_(std::move(spec)) {}

    std::uint32_t pid() const;
    const ProcessSpec& spec() const { return spec_; }
    const std::string& sandboxId() const { return sandboxId_; }
    // Adds a watcher; it gets a start event with the pid first. False when
    // the process is already over.
    bool subscribe(const std::shared_ptr<ProcessSubscriber>& s);
    void unsubscribe(const ProcessSubscriber* s);
    // Error(not_found / failed_precondition) when it cannot take them.
    void sendInput(const std::string& bytes, bool pty);
    void closeStdin();
    void signal(const std::string& name);  // "KILL" / "TERM"
    void resize(unsigned rows, unsigned cols);

  private:
    friend class E2bProcessTable;
    void attach(std::shared_ptr<AgentStream> stream);
    void onEvent(AgentStream::Event&& e);
    // Output bytes on their way to the watchers; back to the guest's window
    // (returnWindow) when the last one is done with them.
    struct OutputWindow;
    void returnWindow(std::size_t bytes);
    std::vector<std::shared_ptr<ProcessSubscriber>> watchers();
    std::shared_ptr<AgentStream> stream();

    std::string sandboxId_;
    ProcessSpec spec_;
    mutable std::mutex mutex_;
    std::shared_ptr<AgentStream> stream_;
    std::mutex windowMutex_;  // never held with mutex_: a window may return under it
    std::weak_ptr<AgentStream> windowStream_;
    std::size_t ungranted_ = 0;  // returned before the stream was attached
    std::uint32_t pid_ = 0;
    bool over_ = false;
    std::vector<std::shared_ptr<ProcessSubscriber>> subscribers_;
    std::function<void(std::uint32_t)> onStart_, onOver_;
    std::shared_ptr<TerminalLines> lines_;  // a pty's interactive bash: judged line by line
};

// The envd processes of every sandbox, by pid.
class E2bProcessTable {
  public:
    static constexpr std::size_t kMaxPerSandbox = 64;
    // Commands start through the controller's commands, judged and audited
    // as every door's are.
    E2bProcessTable(SandboxCommands& commands, boost::asio::thread_pool& workers)
        : commands_(commands), workers_(workers) {}

    // Judges and starts the command (as the native streamed exec does, with
    // its audit); `first` gets the start event once the guest reports the
    // pid. A command the policy parks for a human is submitted as an exec
    // that runs once approved, and refused here with its approval id.
    std::shared_ptr<E2bProcess> start(const std::string& tenant, const std::string& sandboxId,
                                      const ProcessSpec& spec,
                                      const std::shared_ptr<ProcessSubscriber>& first);
    // By pid, or by tag when pid is 0; nullptr when there is none.
    std::shared_ptr<E2bProcess> find(const std::string& sandboxId, std::uint32_t pid,
                                     const std::string& tag);
    std::vector<std::shared_ptr<E2bProcess>> list(const std::string& sandboxId);

  private:
    void forget(const std::string& sandboxId, std::uint32_t pid);

    SandboxCommands& commands_;
    boost::asio::thread_pool& workers_;
    std::mutex mutex_;
    std::map<std::string, std::map<std::uint32_t, std::shared_ptr<E2bProcess>>> bySandbox_;
    std::map<std::string, std::size_t> starting_;  // per sandbox: started, pid not yet known
};

// ProcessEvent JSON: {"event":{"start":{"pid":N}}}, data on a channel
// (1 stdout, 2 stderr; pty: everything), end from the agent's exec result.
std::string startEventJson(std::uint32_t pid);
std::string dataEventJson(const std::string& bytes, std::uint8_t channel, bool pty);
std::string endEventJson(const std::string& execResultJson);
std::string keepaliveEventJson();

}  // namespace airlock::e2b
