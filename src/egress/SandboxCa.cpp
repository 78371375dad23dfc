#include "egress/SandboxCa.hpp"

#include <arpa/inet.h>
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <algorithm>
#include <cctype>
#include <ctime>
#include <functional>

#include "core/AsciiLower.hpp"
#include "core/Error.hpp"

namespace airlock::egress {

namespace {
using Bio = std::unique_ptr<BIO, decltype(&BIO_free)>;
using Cert = std::unique_ptr<X509, decltype(&X509_free)>;
using Key = std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)>;
using Number = std::unique_ptr<BIGNUM, decltype(&BN_free)>;

constexpr long kBackdate = 2L * 24 * 3600;

[[noreturn]] void failed(const std::string& what) {
    throw Error(ErrorCode::internal, "sandbox CA: " + what);
}

Key newP256Key() {
    Key key(EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256"), EVP_PKEY_free);
    if (!key) failed("cannot make a P-256 key");
    return key;
}

// A positive 127-bit serial: never the same twice for one issuer (NSS
// refuses a reused issuer and serial).
void randomSerial(X509* cert) {
    unsigned char bytes[16];
    do {
        if (RAND_bytes(bytes, sizeof bytes) != 1) failed("no random serial");
        bytes[0] &= 0x7f;
    } while (std::all_of(bytes, bytes + sizeof bytes, [](unsigned char b) { return b == 0; }));
    Number n(BN_bin2bn(bytes, sizeof bytes, nullptr), BN_free);
    if (!n || !BN_to_ASN1_INTEGER(n.get(), X509_get_serialNumber(cert))) failed("no serial");
}

void addExtension(X509* cert, X509* issuer, int nid, const std::string& value) {
    X509V3_CTX ctx;
    X509V3_set_ctx_nodb(&ctx);
    X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
    X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str());
    if (!ext) failed("cannot make extension " + std::string(OBJ_nid2sn(nid)));
    int added = X509_add_ext(cert, ext, -1);
    X509_EXTENSION_free(ext);
    if (added != 1) failed("cannot add extension " + std::string(OBJ_nid2sn(nid)));
}

void addName(X509_NAME* name, const char* field, const std::string& value) {
    if (X509_NAME_add_entry_by_txt(name, field, MBSTRING_ASC,
                                   reinterpret_cast<const unsigned char*>(value.c_str()), -1, -1,
                                   0) != 1)
        failed("cannot name the certificate");
}

std::string pemOf(const std::function<int(BIO*)>& write) {
    Bio bio(BIO_new(BIO_s_mem()), BIO_free);
    if (!bio || write(bio.get()) != 1) failed("cannot write PEM");
    char* data = nullptr;
    long n = BIO_get_mem_data(bio.get(), &data);
    return std::string(data, static_cast<std::size_t>(n));
}

// Never a terminal prompt for an encrypted key.
int noPassword(char*, int, int, void*) { return 0; }

bool isAddress(const std::string& host, std::string& canonical) {
    unsigned char raw[16];
    char text[INET6_ADDRSTRLEN];
    if (inet_pton(AF_INET, host.c_str(), raw) == 1) {
        canonical = inet_ntop(AF_INET, raw, text, sizeof text);
        return true;
    }
    std::string bare = host;
    if (bare.size() > 2 && bare.front() == '[' && bare.back() == ']')
        bare = bare.substr(1, bare.size() - 2);
    if (inet_pton(AF_INET6, bare.c_str(), raw) == 1) {
        canonical = inet_ntop(AF_INET6, raw, text, sizeof text);
        return true;
    }
    return false;
}
}  // namespace

LeafCertificate::LeafCertificate(X509* cert, EVP_PKEY* key) : cert_(cert), key_(key) {
    X509_up_ref(cert_);
    EVP_PKEY_up_ref(key_);
}

LeafCertificate::~LeafCertificate() {
    X509_free(cert_);
    EVP_PKEY_free(key_);
}

std::string LeafCertificate::host() const {
    auto* names = static_cast<GENERAL_NAMES*>(
        X509_get_ext_d2i(cert_, NID_subject_alt_name, nullptr, nullptr));
    std::string out;
    if (names && sk_GENERAL_NAME_num(names) > 0) {
        const GENERAL_NAME* n = sk_GENERAL_NAME_value(names, 0);
        if (n->type == GEN_DNS) {
            out.assign(reinterpret_cast<const char*>(ASN1_STRING_get0_data(n->d.dNSName)),
                       static_cast<std::size_t>(ASN1_STRING_length(n->d.dNSName)));
        } else if (n->type == GEN_IPADD) {
            char text[INET6_ADDRSTRLEN];
            int len = ASN1_STRING_length(n->d.iPAddress);
            const unsigned char* raw = ASN1_STRING_get0_data(n->d.iPAddress);
            if (inet_ntop(len == 4 ? AF_INET : AF_INET6, raw, text, sizeof text)) out = text;
        }
    }
    GENERAL_NAMES_free(names);
    return out;
}

std::string SandboxCa::canonicalHost(const std::string& host) {
    std::string h = asciiLower(host);
    std::string address;
    if (isAddress(h, address)) return address;
    if (!h.empty() && h.back() == '.') h.pop_back();
    if (h.empty() || h.size() > 253) return "";
    std::size_t start = 0;
    while (start <= h.size()) {
        auto dot = h.find('.', start);
        std::string label =
            h.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
        if (label.empty() || label.size() > 63 || label.front() == '-' || label.back() == '-' ||
            label.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789-") != std::string::npos)
            return "";
        if (dot == std::string::npos) break;
        start = dot + 1;
    }
    return h;
}

SandboxCa::SandboxCa(X509* ca, EVP_PKEY* caKey)
    : ca_(ca), caKey_(caKey), leafKey_(newP256Key().release()) {}

SandboxCa::~SandboxCa() {
    leaves_.clear();
    X509_free(ca_);
    EVP_PKEY_free(caKey_);
    EVP_PKEY_free(leafKey_);
}

std::unique_ptr<SandboxCa> SandboxCa::create(const std::string& sandboxId,
                                             std::chrono::seconds lifetime) {
    Key key = newP256Key();
    Cert cert(X509_new(), X509_free);
    if (!cert || X509_set_version(cert.get(), X509_VERSION_3) != 1) failed("no certificate");
    randomSerial(cert.get());
    X509_gmtime_adj(X509_getm_notBefore(cert.get()), -kBackdate);
    X509_gmtime_adj(X509_getm_notAfter(cert.get()),
                    static_cast<long>(std::max<std::int64_t>(lifetime.count(), 3600)));
    X509_NAME* name = X509_get_subject_name(cert.get());
    addName(name, "O", "Airlock");
    addName(name, "CN", ("Airlock egress CA " + sandboxId).substr(0, 64));
    if (X509_set_issuer_name(cert.get(), name) != 1 || X509_set_pubkey(cert.get(), key.get()) != 1)
        failed("cannot name the CA");
    addExtension(cert.get(), cert.get(), NID_basic_constraints, "critical,CA:TRUE,pathlen:0");
    addExtension(cert.get(), cert.get(), NID_key_usage, "critical,keyCertSign,cRLSign");
    addExtension(cert.get(), cert.get(), NID_subject_key_identifier, "hash");
    addExtension(cert.get(), cert.get(), NID_authority_key_identifier, "keyid:always");
    if (X509_sign(cert.get(), key.get(), EVP_sha256()) <= 0) failed("cannot sign the CA");
    return std::unique_ptr<SandboxCa>(new SandboxCa(cert.release(), key.release()));
}

std::unique_ptr<SandboxCa> SandboxCa::fromPem(const std::string& certificatePem,
                                              const std::string& keyPem) {
    auto bad = [](const std::string& why) {
        throw Error(ErrorCode::bad_request, "sandbox CA: " + why);
    };
    Bio certBio(BIO_new_mem_buf(certificatePem.data(), static_cast<int>(certificatePem.size())),
                BIO_free);
    Bio keyBio(BIO_new_mem_buf(keyPem.data(), static_cast<int>(keyPem.size())), BIO_free);
    if (!certBio || !keyBio) failed("no memory");
    Cert cert(PEM_read_bio_X509(certBio.get(), nullptr, noPassword, nullptr), X509_free);
    if (!cert) bad("not a PEM certificate");
    Key key(PEM_read_bio_PrivateKey(keyBio.get(), nullptr, noPassword, nullptr), EVP_PKEY_free);
    if (!key) bad("not a PEM private key");
    if (X509_check_private_key(cert.get(), key.get()) != 1) bad("the key is not the certificate's");
    if (X509_check_ca(cert.get()) == 0) bad("the certificate is no CA");
    return std::unique_ptr<SandboxCa>(new SandboxCa(cert.release(), key.release()));
}

std::string SandboxCa::certificatePem() const {
    return pemOf([this](BIO* b) { return PEM_write_bio_X509(b, ca_); });
}

std::string SandboxCa::keyPem() const {
    return pemOf([this](BIO* b) {
        return PEM_write_bio_PrivateKey(b, caKey_, nullptr, nullptr, 0, nullptr, nullptr);
    });
}

std::shared_ptr<const LeafCertificate> SandboxCa::leafFor(const std::string& host) {
    std::string canonical = canonicalHost(host);
    if (canonical.empty())
        throw Error(ErrorCode::bad_request, "no certificate is minted for '" + host.substr(0, 100) +
                                                "': not a host name or an address");
    std::lock_guard lock(mutex_);
    if (auto it = leaves_.find(canonical); it != leaves_.end()) return it->second;
    auto leaf = mint(canonical);
    if (leaves_.size() >= kCachedLeaves) {
        leaves_.erase(minted_.front());
        minted_.pop_front();
    }
    leaves_[canonical] = leaf;
    minted_.push_back(canonical);
    return leaf;
}

std::shared_ptr<const LeafCertificate> SandboxCa::mint(const std::string& host) const {
    Cert cert(X509_new(), X509_free);
    if (!cert || X509_set_version(cert.get(), X509_VERSION_3) != 1) failed("no certificate");
    randomSerial(cert.get());
    X509_gmtime_adj(X509_getm_notBefore(cert.get()), -kBackdate);
    // As long as the CA: a sandbox's leaves never outlive its CA.
    if (X509_set1_notAfter(cert.get(), X509_get0_notAfter(ca_)) != 1) failed("no validity");
    std::string address;
    bool ip = isAddress(host, address);
    X509_NAME* subject = X509_get_subject_name(cert.get());
    if (!ip && host.size() < 64) addName(subject, "CN", host);
    if (X509_set_issuer_name(cert.get(), X509_get_subject_name(ca_)) != 1 ||
        X509_set_pubkey(cert.get(), leafKey_) != 1)
        failed("cannot name the leaf");
    // An empty subject makes the alternative name critical (RFC 5280 4.2.1.6).
    addExtension(cert.get(), ca_, NID_subject_alt_name,
                 std::string(X509_NAME_entry_count(subject) == 0 ? "critical," : "") +
                     (ip ? "IP:" : "DNS:") + host);
    addExtension(cert.get(), ca_, NID_basic_constraints, "critical,CA:FALSE");
    addExtension(cert.get(), ca_, NID_key_usage, "critical,digitalSignature");
    addExtension(cert.get(), ca_, NID_ext_key_usage, "serverAuth");
    addExtension(cert.get(), ca_, NID_subject_key_identifier, "hash");
    addExtension(cert.get(), ca_, NID_authority_key_identifier, "keyid:always");
    if (X509_sign(cert.get(), caKey_, EVP_sha256()) <= 0) failed("cannot sign a leaf");
    return std::make_shared<LeafCertificate>(cert.get(), leafKey_);
}

}  // namespace airlock::egress
