#include "controller/SandboxSecrets.hpp"

#include <string_view>

#include "core/Error.hpp"
#include "core/Hex.hpp"
#include "core/Ids.hpp"
#include "core/Log.hpp"
#include "egress/SandboxCa.hpp"
#include "policy/CommandPolicy.hpp"

namespace airlock {

namespace {
constexpr std::string_view kSealedPrefix = "sealed:";
// The egress CA's entry among the sealed secrets: no variable has a dash.
const std::string kCaEntry = "egress-ca";
}  // namespace

std::string SandboxSecrets::seal(const SecretMap& secrets, const std::string& sandboxId,
                                 const std::string& previous) const {
    if (!cipher_) throw Error(ErrorCode::bad_request, "this server keeps no secrets (no key)");
    nlohmann::json before = previous.empty()
                                ? nlohmann::json::object()
                                : nlohmann::json::parse(cipher_->open(previous, sandboxId));
    nlohmann::json sealed = nlohmann::json::object();
    bool injects = false;
    for (const auto& [name, spec] : secrets) {
        if (spec.value.size() < SecretMasker::kMinLength)
            throw Error(ErrorCode::unprocessable, "secret " + name + " is shorter than " +
                                                      std::to_string(SecretMasker::kMinLength) +
                                                      " bytes (it could not be masked)");
        nlohmann::json entry{{"value", spec.value}, {"commands", spec.commands}};
        if (spec.fromTenant) entry["tenant"] = true;
        if (spec.inject) {
            injects = true;
            std::string placeholder = spec.inject->placeholder;
            // Kept across a re-seal: running processes hold it already.
            if (placeholder.empty() && before.contains(name) && before[name].contains("inject"))
                placeholder = before[name]["inject"].value("placeholder", "");
            if (placeholder.empty())
                placeholder = "airlock-secret-" + name + "-" + hexEncode(randomBytes(16));
            entry["inject"] = {{"hosts", spec.inject->hosts},
                               {"header", spec.inject->header},
                               {"format", spec.inject->format},
                               {"placeholder", placeholder}};
        }
        sealed[name] = std::move(entry);
    }
    // The CA the guest trusts for the injected secrets' hosts: made once.
    if (before.contains(kCaEntry)) {
        sealed[kCaEntry] = before[kCaEntry];
    } else if (injects) {
        auto ca = egress::SandboxCa::create(sandboxId, std::chrono::hours(24 * 365));
        sealed[kCaEntry] = {{"certificate", ca->certificatePem()}, {"key", ca->keyPem()}};
    }
    return cipher_->seal(sealed.dump(), sandboxId);
}

std::string SandboxSecrets::reseal(const std::string& sealed, const std::string& fromId,
                                   const std::string& toId) const {
    if (sealed.empty()) return sealed;
    if (!cipher_) throw Error(ErrorCode::internal, "secrets were sealed and no key is configured");
    return cipher_->seal(cipher_->open(sealed, fromId), toId);
}

std::string SandboxSecrets::sealFor(const SecretCipher& journey, const std::string& sealed,
                                    const std::string& sandboxId) const {
    if (sealed.empty()) return sealed;
    if (!cipher_) throw Error(ErrorCode::internal, "secrets were sealed and no key is configured");
    return journey.seal(cipher_->open(sealed, sandboxId), sandboxId);
}

std::string SandboxSecrets::sealFrom(const SecretCipher& journey, const std::string& sealed,
                                     const std::string& sandboxId) const {
    if (sealed.empty()) return sealed;
    if (!cipher_)
        throw Error(ErrorCode::unprocessable,
                    "this node keeps no secrets (no key): a sandbox "
                    "with secrets cannot move here");
    return cipher_->seal(journey.open(sealed, sandboxId), sandboxId);
}

nlohmann::json SandboxSecrets::opened(const SandboxRecord& r) const {
    if (r.secretsSealed.empty() || !cipher_) return nlohmann::json::object();
    return nlohmann::json::parse(cipher_->open(r.secretsSealed, r.id));
}

SecretMap SandboxSecrets::secretsIn(const nlohmann::json& j) {
    SecretMap out;
    for (const auto& [name, spec] : j.items()) {
        if (name == kCaEntry) continue;
        SecretSpec s{spec.at("value").get<std::string>(),
                     spec.value("commands", std::vector<std::string>{}), std::nullopt};
        if (spec.contains("inject")) {
            const auto& i = spec["inject"];
            s.inject =
                SecretInjection{i.value("hosts", std::vector<std::string>{}), i.value("header", ""),
                                i.value("format", "{value}"), i.value("placeholder", "")};
        }
        s.fromTenant = spec.value("tenant", false);
        out[name] = std::move(s);
    }
    return out;
}

SecretMap SandboxSecrets::open(const SandboxRecord& r) const { return secretsIn(opened(r)); }

std::string SandboxSecrets::egressCaCertificate(const SandboxRecord& r) const {
    auto j = opened(r);
    if (!j.contains(kCaEntry)) return "";
    return j[kCaEntry].value("certificate", "");
}

std::shared_ptr<const egress::SandboxInjections> SandboxSecrets::injections(
    const SandboxRecord& r) const {
    auto j = opened(r);  // once: the CA and the secrets
    if (!j.contains(kCaEntry)) return nullptr;
    auto out = std::make_shared<egress::SandboxInjections>();
    out->ca = egress::SandboxCa::fromPem(j[kCaEntry].value("certificate", ""),
                                         j[kCaEntry].value("key", ""));
    for (const auto& [name, spec] : secretsIn(j)) {
        if (!spec.inject) continue;
        egress::InjectedSecret s;
        s.name = name;
        s.value = spec.value;
        s.placeholder = spec.inject->placeholder;
        s.hosts = spec.inject->hosts;
        s.header = spec.inject->header;
        s.format = spec.inject->format;
        out->secrets.push_back(std::move(s));
    }
    return out;
}

std::map<std::string, std::string> SandboxSecrets::envFor(const SecretMap& secrets,
                                                          const std::string& commandText) {
    std::map<std::string, std::string> env;
    for (const auto& [name, spec] : secrets) {
        bool scoped = spec.commands.empty();
        for (const auto& glob : spec.commands)
            scoped = scoped || policy::CommandPolicy::globMatch(glob, commandText);
        if (scoped) env[name] = spec.inject ? spec.inject->placeholder : spec.value;
    }
    return env;
}

std::map<std::string, std::string> SandboxSecrets::trustEnv(const SecretMap& secrets) {
    bool injects = false;
    for (const auto& [name, spec] : secrets) injects = injects || spec.inject.has_value();
    if (!injects) return {};
    // NODE_EXTRA_CA_CERTS adds; the others replace the roots, so they
    // name the bundle of both.
    std::map<std::string, std::string> env{
        {"NODE_EXTRA_CA_CERTS", kGuestCaFile},
        {"NODE_OPTIONS", std::string("--require ") + kGuestNodePreload}};
    for (const char* name :
         {"SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "GIT_SSL_CAINFO", "PIP_CERT"})
        env[name] = kGuestCaBundle;
    return env;
}

namespace {
// Node 18's fetch() ignores https_proxy: this preload (NODE_OPTIONS) sends
// it through the sandbox's egress proxy with Debian's undici, the one the
// built-in fetch runs on, except for no_proxy's hosts.
const char* kNodeProxyPreload = R"JS('use strict';
(() => {
  const proxy = process.env.https_proxy || process.env.HTTPS_PROXY;
  if (!proxy || typeof globalThis.fetch !== 'function') return;
  let undici;
  try { undici = require('undici'); } catch (e) {
    try { undici = require('/usr/share/nodejs/undici'); } catch (e2) { return; }
  }
  const bypass = (process.env.no_proxy || process.env.NO_PROXY || '')
    .split(',').map((s) => s.trim().toLowerCase()).filter(Boolean);
  const direct = new undici.Agent();
  const proxied = new undici.ProxyAgent(proxy);
  class EnvProxy extends undici.Dispatcher {
    dispatch(options, handler) {
      let host = '';
      try { host = new URL(String(options.origin)).hostname.toLowerCase().replace(/^\[|\]$/g, ''); } catch (e) {}
      return (bypass.includes(host) ? direct : proxied).dispatch(options, handler);
    }
    close() { return Promise.all([direct.close(), proxied.close()]); }
    destroy() { return Promise.all([direct.destroy(), proxied.destroy()]); }
  }
  undici.setGlobalDispatcher(new EnvProxy());
})();
)JS";
}  // namespace

std::string SandboxSecrets::guestTrustScript() {
    const std::string ca = kGuestCaFile, bundle = kGuestCaBundle;
    return "set -e; umask 022; mkdir -p /etc/airlock; echo " + base64Encode(kNodeProxyPreload) +
           " | base64 -d > " + kGuestNodePreload + "; pem=$(cat); printf '%s\\n' \"$pem\" > " + ca +
           "; line=$(sed -n 2p " + ca + "); b=/etc/ssl/certs/ca-certificates.crt; " +
           "if [ -d /usr/local/share/ca-certificates ]; then cp " + ca +
           " /usr/local/share/ca-certificates/airlock-egress.crt; fi; " +
           "if [ -f $b ] && ! grep -qF -- \"$line\" $b; then cat " + ca + " >> $b; fi; " +
           "if [ -f $b ]; then cp $b " + bundle + ".new; else cp " + ca + " " + bundle +
           ".new; fi; mv " + bundle + ".new " + bundle;
}

SecretMasker SandboxSecrets::guestOutputMasker(const SecretMap& secrets) {
    std::vector<std::string> values;
    // An injected value never reached the guest: not compared with what it prints.
    for (const auto& [name, spec] : secrets)
        if (!spec.inject) values.push_back(spec.value);
    return SecretMasker(values);
}

SecretMasker SandboxSecrets::streamMasker(const SecretMap& secrets,
                                          const std::string& commandText) {
    std::vector<std::string> values;
    for (const auto& [name, value] : envFor(secrets, commandText))
        if (!secrets.at(name).inject) values.push_back(value);
    return SecretMasker(values);
}

SecretMasker SandboxSecrets::hostTextMasker(const SandboxRecord& r) const {
    std::vector<std::string> values;
    for (const auto& [name, spec] : open(r)) values.push_back(spec.value);
    ExtraSource extra;
    {
        std::lock_guard lock(mutex_);
        extra = extra_;
    }
    if (extra) {
        try {
            for (auto& v : extra(r)) values.push_back(std::move(v));
        } catch (const std::exception& e) {
            logError("controller", std::string("extra secrets: ") + e.what());
        }
    }
    return SecretMasker(values);
}

void SandboxSecrets::setExtraSource(ExtraSource source) {
    std::lock_guard lock(mutex_);
    extra_ = std::move(source);
}

std::string SandboxSecrets::sealRequest(const SandboxRecord& r,
                                        const std::string& requestJson) const {
    if (r.secretsSealed.empty() || !cipher_) return requestJson;
    return std::string(kSealedPrefix) + cipher_->seal(requestJson, r.id);
}

nlohmann::json SandboxSecrets::openRequest(const GatedExec& g) const {
    std::string_view stored = g.requestJson;
    if (!stored.starts_with(kSealedPrefix)) return nlohmann::json::parse(stored, nullptr, false);
    if (!cipher_)
        throw Error(ErrorCode::internal, "exec " + g.id + " was sealed and no key is configured");
    return nlohmann::json::parse(
        cipher_->open(std::string(stored.substr(kSealedPrefix.size())), g.sandboxId), nullptr,
        false);
}

}  // namespace airlock
