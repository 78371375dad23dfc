#include "evidence/EvidenceKey.hpp"

#include <fcntl.h>
#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/Clock.hpp"
#include "core/Error.hpp"
#include "core/Sha256.hpp"
#include "core/UniqueFd.hpp"

namespace airlock {
namespace {

namespace fs = std::filesystem;
using Bio = std::unique_ptr<BIO, decltype(&BIO_free)>;
using MdCtx = std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)>;

std::shared_ptr<EVP_PKEY> owned(EVP_PKEY* key) {
    return std::shared_ptr<EVP_PKEY>(key, EVP_PKEY_free);
}

std::string bioText(BIO* bio) {
    char* data = nullptr;
    long n = BIO_get_mem_data(bio, &data);
    return n > 0 ? std::string(data, static_cast<std::size_t>(n)) : std::string();
}

std::string publicPemOf(EVP_PKEY* key) {
    Bio bio(BIO_new(BIO_s_mem()), BIO_free);
    if (!bio || PEM_write_bio_PUBKEY(bio.get(), key) != 1)
        throw Error(ErrorCode::internal, "cannot write an evidence public key");
    return bioText(bio.get());
}

std::string publicDerOf(EVP_PKEY* key) {
    int n = i2d_PUBKEY(key, nullptr);
    if (n <= 0) throw Error(ErrorCode::internal, "cannot encode an evidence public key");
    std::string der(static_cast<std::size_t>(n), '\0');
    auto* p = reinterpret_cast<unsigned char*>(der.data());
    i2d_PUBKEY(key, &p);
    return der;
}

std::shared_ptr<EVP_PKEY> readPublicPem(const std::string& pem) {
    Bio bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())), BIO_free);
    EVP_PKEY* key = bio ? PEM_read_bio_PUBKEY(bio.get(), nullptr, nullptr, nullptr) : nullptr;
    if (!key) throw Error(ErrorCode::bad_request, "not a PEM public key");
    auto k = owned(key);
    if (!EVP_PKEY_is_a(key, "EC")) throw Error(ErrorCode::bad_request, "not an EC public key");
    char group[64] = {};
    std::size_t len = 0;
    if (EVP_PKEY_get_utf8_string_param(key, "group", group, sizeof group, &len) != 1 ||
        std::string(group) != "prime256v1")
        throw Error(ErrorCode::bad_request, "not a P-256 public key");
    return k;
}

// Written whole beside the target, then renamed over it: a crash leaves the
// old file or the new one, never half of one.
void writeAtomically(const std::string& path, const std::string& text, mode_t mode) {
    std::string tmp = path + ".tmp";
    ::unlink(tmp.c_str());
    UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode));
    if (!fd || ::write(fd.get(), text.data(), text.size()) != static_cast<ssize_t>(text.size()) ||
        ::fsync(fd.get()) != 0 || ::rename(tmp.c_str(), path.c_str()) != 0) {
        ::unlink(tmp.c_str());
        throw Error(ErrorCode::internal, "cannot write " + path);
    }
}

std::vector<EvidenceKey::PublicKey> readList(const std::string& dir) {
    std::vector<EvidenceKey::PublicKey> keys;
    std::ifstream in(dir + "/keys.json");
    if (!in) return keys;
    std::stringstream text;
    text << in.rdbuf();
    auto j = nlohmann::json::parse(text.str(), nullptr, false);
    if (!j.is_object() || !j.contains("keys") || !j["keys"].is_array())
        throw Error(ErrorCode::internal, dir + "/keys.json is damaged");
    for (const auto& k : j["keys"]) {
        if (!k.is_object()) continue;
        keys.push_back({k.value("keyid", ""), k.value("alg", ""), k.value("public_key_pem", ""),
                        k.value("created_at", ""), k.value("retired_at", ""),
                        k.value("active", false)});
    }
    return keys;
}

void writeList(const std::string& dir, const std::vector<EvidenceKey::PublicKey>& keys) {
    nlohmann::json list = nlohmann::json::array();
    for (const auto& k : keys) {
        nlohmann::json e = {{"keyid", k.keyid},
                            {"alg", k.alg},
                            {"public_key_pem", k.publicKeyPem},
                            {"created_at", k.createdAt},
                            {"active", k.active}};
        if (!k.retiredAt.empty()) e["retired_at"] = k.retiredAt;
        list.push_back(std::move(e));
    }
    writeAtomically(dir + "/keys.json", nlohmann::json{{"keys", list}}.dump(2) + "\n", 0644);
}

}  // namespace

EvidenceKey::EvidenceKey(std::shared_ptr<evp_pkey_st> key) : key_(std::move(key)) {
    publicPem_ = publicPemOf(key_.get());
    keyid_ = sha256Hex(publicDerOf(key_.get()));
}

EvidenceKey EvidenceKey::create(const std::string& dir, std::vector<PublicKey> previous) {
    EVP_PKEY* raw = EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256");
    if (!raw) throw Error(ErrorCode::internal, "cannot make an evidence key");
    EvidenceKey key(owned(raw));
    Bio bio(BIO_new(BIO_s_mem()), BIO_free);
    if (!bio ||
        PEM_write_bio_PrivateKey(bio.get(), raw, nullptr, nullptr, 0, nullptr, nullptr) != 1)
        throw Error(ErrorCode::internal, "cannot write the evidence key");
    std::string now = nowTimestamp();
    for (auto& k : previous)
        if (k.active) {
            k.active = false;
            k.retiredAt = now;
        }
    previous.push_back({key.keyid_, kAlg, key.publicPem_, now, "", true});
    // The list first: a crash between the two leaves a listed key that never
    // signed anything, not a signing key nobody can look up.
    writeList(dir, previous);
    writeAtomically(dir + "/active.pem", bioText(bio.get()), 0600);
    return key;
}

EvidenceKey EvidenceKey::loadOrCreate(const std::string& dir) {
    std::error_code ec;
    fs::create_directories(dir, ec);
    ::chmod(dir.c_str(), 0700);
    std::ifstream in(dir + "/active.pem");
    if (!in) return create(dir, readList(dir));
    struct stat st {};
    if (::stat((dir + "/active.pem").c_str(), &st) == 0 && (st.st_mode & 077) != 0)
        throw Error(
            ErrorCode::internal,
            dir + "/active.pem is readable by others; chmod 600 it (and consider rotating)");
    std::stringstream text;
    text << in.rdbuf();
    std::string pem = text.str();
    Bio bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())), BIO_free);
    EVP_PKEY* raw = bio ? PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr) : nullptr;
    if (!raw) throw Error(ErrorCode::internal, dir + "/active.pem is not a private key");
    EvidenceKey key(owned(raw));
    auto list = readList(dir);
    bool listed = false;
    for (const auto& k : list) listed = listed || (k.keyid == key.keyid_ && k.active);
    if (!listed) {  // keys.json lost or from elsewhere: the active key is listed again
        for (auto& k : list) k.active = false;
        std::erase_if(list, [&](const PublicKey& k) { return k.keyid == key.keyid_; });
        list.push_back({key.keyid_, kAlg, key.publicPem_, nowTimestamp(), "", true});
        writeList(dir, list);
    }
    return key;
}

EvidenceKey EvidenceKey::rotate(const std::string& dir) {
    loadOrCreate(dir);  // the current key is listed before it is retired
    return create(dir, readList(dir));
}

std::vector<EvidenceKey::PublicKey> EvidenceKey::list(const std::string& dir) {
    return readList(dir);
}

std::string EvidenceKey::sign(std::string_view data) const {
    MdCtx ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
    std::size_t len = 0;
    if (!ctx || EVP_DigestSignInit(ctx.get(), nullptr, EVP_sha256(), nullptr, key_.get()) != 1 ||
        EVP_DigestSign(ctx.get(), nullptr, &len,
                       reinterpret_cast<const unsigned char*>(data.data()), data.size()) != 1)
        throw Error(ErrorCode::internal, "cannot sign evidence");
    std::string sig(len, '\0');
    if (EVP_DigestSign(ctx.get(), reinterpret_cast<unsigned char*>(sig.data()), &len,
                       reinterpret_cast<const unsigned char*>(data.data()), data.size()) != 1)
        throw Error(ErrorCode::internal, "cannot sign evidence");
    sig.resize(len);
    return sig;
}

bool EvidenceKey::verify(const std::string& publicKeyPem, std::string_view data,
                         std::string_view signature) {
    std::shared_ptr<EVP_PKEY> key;
    try {
        key = readPublicPem(publicKeyPem);
    } catch (const Error&) {
        return false;
    }
    MdCtx ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
    return ctx && EVP_DigestVerifyInit(ctx.get(), nullptr, EVP_sha256(), nullptr, key.get()) == 1 &&
           EVP_DigestVerify(ctx.get(), reinterpret_cast<const unsigned char*>(signature.data()),
                            signature.size(), reinterpret_cast<const unsigned char*>(data.data()),
                            data.size()) == 1;
}

std::string EvidenceKey::keyidOf(const std::string& publicKeyPem) {
    return sha256Hex(publicDerOf(readPublicPem(publicKeyPem).get()));
}

}  // namespace airlock
