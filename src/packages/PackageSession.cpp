#include "packages/PackageSession.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <boost/asio/post.hpp>

#include "agentclient/AgentConnection.hpp"
#include "core/Error.hpp"
#include "core/HttpRequestHead.hpp"
#include "core/Log.hpp"
#include "protocol/ControlFrames.hpp"
#include "protocol/JsonText.hpp"
#include "protocol/Messages.hpp"

namespace airlock::packages {

namespace asio = boost::asio;
using Kind = AgentStream::Event::Kind;
using namespace std::chrono_literals;

namespace {
// A piece of a cached file on its way: the next is read once it left.
constexpr std::size_t kFilePiece = 256 * 1024;

// The path of a request's target: origin form, or the absolute form a
// client that takes us for a forward proxy sends. Empty when it is neither.
std::string originPath(const std::string& target) {
    if (!target.empty() && target[0] == '/') return target;
    auto scheme = target.find("://");
    if (scheme == std::string::npos) return "";
    auto path = target.find('/', scheme + 3);
    return path == std::string::npos ? "/" : target.substr(path);
}

std::string responseHead(const GuestResponse& r, std::uint64_t length, bool close) {
    std::string head =
        "HTTP/1.1 " + std::to_string(r.status) + " " +
        (r.reason.empty() ? std::string(r.status == 200 ? "OK" : "Error") : r.reason) + "\r\n";
    head += "Content-Type: " + r.contentType + "\r\n";
    head += "Content-Length: " + std::to_string(length) + "\r\n";
    head += "Cache-Control: no-store\r\n";
    head += close ? "Connection: close\r\n" : "Connection: keep-alive\r\n";
    return head + "\r\n";
}

GuestResponse errorAnswer(int status, std::string reason, const std::string& why) {
    GuestResponse r;
    r.status = status;
    r.reason = std::move(reason);
    r.body = jsonText(nlohmann::json{{"error", why}});
    return r;
}
}  // namespace

bool PackageProxyShared::admit(SandboxPackageAttachment& sandbox) {
    bool admitted = ++sandbox.open <= settings.maxConnectionsPerSandbox;
    std::lock_guard lock(tenantMutex);
    return ++tenantOpen[sandbox.tenant] <= settings.maxConnectionsPerTenant && admitted;
}

void PackageProxyShared::release(SandboxPackageAttachment& sandbox) {
    --sandbox.open;
    std::lock_guard lock(tenantMutex);
    auto it = tenantOpen.find(sandbox.tenant);
    if (it != tenantOpen.end() && --it->second == 0) tenantOpen.erase(it);
}

PackageSession::PackageSession(std::shared_ptr<PackageProxyShared> shared,
                               std::shared_ptr<SandboxPackageAttachment> sandbox,
                               Ecosystem ecosystem, std::uint64_t connection, bool admitted)
    : shared_(std::move(shared)),
      sandbox_(std::move(sandbox)),
      ecosystem_(ecosystem),
      connection_(connection),
      admitted_(admitted),
      strand_(asio::make_strand(shared_->ioc)),
      timer_(strand_),
      pipe_(strand_, shared_->workers) {}

PackageSession::~PackageSession() { shared_->release(*sandbox_); }

void PackageSession::start() {
    pipe_.onEvent([this](AgentStream::Event&& e) { onGuestEvent(std::move(e)); });
    // Its timer and the work in flight keep it alive, never its stream alone.
    pipe_.holdOwnerWeakly();
    auto self = shared_from_this();
    // Held by the timer until the tunnel is open (or fails to).
    armTimer(shared_->settings.headTimeout);
    pipe_.open(
        self,
        [this](AgentStream::Handler handler) {
            if (sandbox_->detached())
                throw Error(ErrorCode::agent_error, "the sandbox is no longer attached");
            return sandbox_->openConnection(connection_, std::move(handler));
        },
        [this, self](std::exception_ptr error) {
            if (error) {
                try {
                    std::rethrow_exception(error);
                } catch (const std::exception& e) {
                    logWarn("packages", "cannot attach a package connection of " + sandbox_->id +
                                            ": " + e.what());
                } catch (...) {
                }
                return finish("attach failed");
            }
            if (!admitted_) {
                // Past a sandbox's or a tenant's share: told so, and ended.
                auto busy = errorAnswer(503,
                                        "Service Unavailable: too many package connections "
                                        "from this sandbox",
                                        "too many package connections from this sandbox");
                phase_ = Phase::writing;
                closeAfter_ = true;
                armTimer(shared_->settings.writeTimeout);
                return send(responseHead(busy, busy.body.size(), true) + busy.body,
                            [this] { responseSent(); });
            }
            phase_ = Phase::head;
            idle_ = true;
            armTimer(shared_->settings.idleTimeout);
            auto early = std::move(early_);
            for (auto& e : early) onGuestEvent(std::move(e));
            nextRequest();
        });
}

void PackageSession::armTimer(std::chrono::milliseconds after) {
    timer_.expires_after(after);
    timer_.async_wait([self = shared_from_this()](boost::system::error_code ec) {
        if (ec || self->phase_ == Phase::done) return;
        switch (self->phase_) {
            case Phase::head:  // silence between requests, or a head that never completed
                return self->closeGracefully();
            case Phase::writing:
                return self->finish("the guest did not read the response in time");
            case Phase::attaching:
                return self->finish("the tunnel did not open in time");
            default:
                return self->finish("the guest did not close");
        }
    });
}

void PackageSession::onGuestEvent(AgentStream::Event&& event) {
    if (phase_ == Phase::done) return;
    if (phase_ == Phase::attaching) return early_.push_back(std::move(event));
    if (event.kind == Kind::reset) return finish("the guest connection was reset");
    if (event.kind == Kind::close) return finish("closed by the guest");
    if (event.kind == Kind::control) {
        // Guest-made: read as the typed frame it must be, anything else ignored.
        try {
            if (std::holds_alternative<protocol::TunnelEof>(protocol::parseControl(event.payload)))
                guestEof_ = true;
        } catch (const protocol::MessageError&) {
        }
        if (guestEof_ && phase_ == Phase::head) nextRequest();
        return;
    }
    if (phase_ == Phase::closing) return pipe_.consumed(event.payload.size());
    // Kept until read: the window granted back as requests are taken from
    // it bounds what a guest can make us hold.
    buffer_ += event.payload;
    if (phase_ == Phase::head) nextRequest();
}

void PackageSession::nextRequest() {
    if (sandbox_->detached()) return closeGracefully();
    HttpRequestHeadParser parser;
    HttpRequestHead head;
    std::size_t headLength = 0;
    auto parsed = parser.parse(buffer_, head, headLength);
    if (parsed == HttpRequestHeadParser::Status::need_more) {
        if (guestEof_) return closeGracefully();
        if (idle_ && !buffer_.empty()) {  // a request began: it has the head's time
            idle_ = false;
            armTimer(shared_->settings.headTimeout);
        }
        return;
    }
    std::string path;
    bool valid = parsed == HttpRequestHeadParser::Status::complete &&
                 !(path = originPath(head.target)).empty();
    // After a refused head nothing more is read: the connection ends.
    std::size_t taken = valid ? headLength : buffer_.size();
    buffer_.erase(0, taken);
    pipe_.consumed(taken);
    bool hasBody =
        head.header("transfer-encoding") || head.header("content-length").value_or("0") != "0";
    std::string connection = head.header("connection").value_or("");
    for (auto& ch : connection)
        ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    bool close = !valid || hasBody || connection.find("close") != std::string::npos ||
                 (head.version == "HTTP/1.0" && connection.find("keep-alive") == std::string::npos);
    if (!valid) {
        bool malformed = parsed == HttpRequestHeadParser::Status::error;
        int status = malformed ? parser.errorStatus() : 400;
        return respond(errorAnswer(status,
                                   status == 431   ? "Request Header Fields Too Large"
                                   : status == 505 ? "HTTP Version Not Supported"
                                                   : "Bad Request",
                                   malformed ? parser.error()
                                             : "a request target must be a path or an absolute URL"),
                       nullptr, false, true);
    }
    GuestRequest request{ecosystem_, head.method, path, head.header("host").value_or(""),
                         head.header("accept").value_or("")};
    if (hasBody) request.method = head.method == "GET" ? "POST" : head.method;  // an upload
    answer(std::move(request), head.method == "HEAD", close);
}

void PackageSession::answer(GuestRequest request, bool headOnly, bool close) {
    phase_ = Phase::answering;
    timer_.cancel();  // the service bounds its own upstream waits
    SandboxPackages sandbox{sandbox_->id, sandbox_->tenant, sandbox_->rules()};
    asio::post(shared_->workers, [self = shared_from_this(), sandbox = std::move(sandbox),
                                  request = std::move(request), headOnly, close] {
        GuestResponse response;
        auto file = std::make_shared<UniqueFd>();
        try {
            response = self->shared_->service->handle(sandbox, request);
            if (!response.filePath.empty()) {
                file->reset(::open(response.filePath.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
                if (response.removeFile) ::unlink(response.filePath.c_str());
                if (!*file)
                    response = errorAnswer(503, "Service Unavailable: the cached file went away; retry",
                                           "the cached file went away; retry");
            }
        } catch (const std::exception& e) {
            logWarn("packages", "a package request of " + sandbox.id + " failed: " + e.what());
            response = errorAnswer(500, "Internal Server Error", "the package proxy failed");
            file->reset();
        }
        asio::post(self->strand_, [self, response = std::move(response), file, headOnly, close] {
            if (self->phase_ == Phase::done) return;
            self->respond(response, file, headOnly, close);
        });
    });
}

void PackageSession::respond(GuestResponse response, std::shared_ptr<UniqueFd> file,
                             bool headOnly, bool close) {
    bool fromFile = file && *file;
    std::uint64_t length = fromFile ? response.fileSize : response.body.size();
    std::uint64_t sent = headOnly ? 0 : length;
    phase_ = Phase::writing;
    closeAfter_ = close;
    // One deadline for all its bytes: a guest reading a byte now and then
    // cannot keep the connection.
    armTimer(shared_->settings.writeTimeout +
             std::chrono::seconds(sent / shared_->settings.minBytesPerSecond));
    std::string bytes = responseHead(response, length, close);
    if (!headOnly && !fromFile) bytes += response.body;
    if (!headOnly && fromFile) {
        file_ = std::move(file);
        fileOffset_ = 0;
        fileLeft_ = length;
        return send(std::move(bytes), [this] { sendFilePiece(); });
    }
    send(std::move(bytes), [this] { responseSent(); });
}

void PackageSession::sendFilePiece() {
    if (fileLeft_ == 0) {
        file_.reset();
        return responseSent();
    }
    std::string piece(static_cast<std::size_t>(std::min<std::uint64_t>(kFilePiece, fileLeft_)),
                      '\0');
    ssize_t n;
    do {
        n = ::pread(file_->get(), piece.data(), piece.size(), static_cast<off_t>(fileOffset_));
    } while (n < 0 && errno == EINTR);
    if (n <= 0) return finish("a cached file ended early");
    piece.resize(static_cast<std::size_t>(n));
    fileOffset_ += static_cast<std::uint64_t>(n);
    fileLeft_ -= static_cast<std::uint64_t>(n);
    send(std::move(piece), [this] { sendFilePiece(); });
}

void PackageSession::responseSent() {
    if (closeAfter_) return closeGracefully();
    phase_ = Phase::head;
    idle_ = buffer_.empty();
    armTimer(idle_ ? shared_->settings.idleTimeout : shared_->settings.headTimeout);
    nextRequest();
}

void PackageSession::send(std::string bytes, std::function<void()> then) {
    auto* tunnel = pipe_.stream();
    if (!tunnel) return finish("the tunnel is gone");
    tunnel->writeAsync(0, std::move(bytes), false,
                       [self = shared_from_this(), then = std::move(then)](std::exception_ptr error) {
                           asio::post(self->strand_, [self, ok = !error, then] {
                               if (self->phase_ == Phase::done) return;
                               if (!ok) return self->finish("the guest connection ended");
                               then();
                           });
                       });
}

void PackageSession::closeGracefully() {
    if (phase_ == Phase::closing || phase_ == Phase::done) return;
    phase_ = Phase::closing;
    auto* tunnel = pipe_.stream();
    if (!tunnel) return finish("the tunnel is gone");
    // Our side closed after the last byte; the guest's close follows
    // (bounded wait), else the stream is reset when dropped.
    tunnel->closeWrite();
    pipe_.consumed(std::exchange(buffer_, {}).size());
    armTimer(1s);
}

void PackageSession::finish(const std::string& why) {
    if (phase_ == Phase::done) return;
    bool graceful = phase_ == Phase::closing;
    phase_ = Phase::done;
    if (!graceful && why != "closed by the guest")
        logDebug("packages", "package connection of " + sandbox_->id + " ended: " + why);
    timer_.cancel();
    file_.reset();
    early_.clear();
    pipe_.finish();
}

}  // namespace airlock::packages
