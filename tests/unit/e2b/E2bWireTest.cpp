#include <gtest/gtest.h>

#include "core/Error.hpp"
#include "e2b/ConnectEnvelope.hpp"
#include "e2b/E2bWire.hpp"
#include "e2b/Multipart.hpp"
#include "e2b/MultipartReader.hpp"

namespace airlock::e2b {
namespace {

TEST(ConnectEnvelope, EncodesFlagsAndBigEndianLength) {
    auto e = encodeEnvelope(kEnvelopeEndStream, "{}");
    ASSERT_EQ(e.size(), 7u);
    EXPECT_EQ(static_cast<unsigned char>(e[0]), 2);
    EXPECT_EQ(e.substr(1, 4), std::string("\0\0\0\2", 4));
    EXPECT_EQ(e.substr(5), "{}");
    std::string big(300, 'x');
    auto b = encodeEnvelope(kEnvelopeMessage, big);
    EXPECT_EQ(static_cast<unsigned char>(b[3]), 1);
    EXPECT_EQ(static_cast<unsigned char>(b[4]), 44);
}

TEST(ConnectEnvelope, ParsesExactlyOneMessageAndRefusesTheRest) {
    std::string body = encodeEnvelope(kEnvelopeMessage, R"({"a":1})");
    EXPECT_EQ(parseSingleEnvelope(body, 100).payload, R"({"a":1})");
    EXPECT_THROW(parseSingleEnvelope(body.substr(0, 4), 100), Error);  // short
    EXPECT_THROW(parseSingleEnvelope(body + "x", 100), Error);         // trailing bytes
    EXPECT_THROW(parseSingleEnvelope(body.substr(0, body.size() - 1), 100), Error);  // truncated
    EXPECT_THROW(parseSingleEnvelope(body, 3), Error);                               // over the cap
    EXPECT_THROW(parseSingleEnvelope(encodeEnvelope(kEnvelopeCompressed, "x"), 100), Error);
    EXPECT_THROW(parseSingleEnvelope(encodeEnvelope(kEnvelopeEndStream, "{}"), 100), Error);
    // A length that claims 4 GiB is refused before anything is allocated.
    EXPECT_THROW(parseSingleEnvelope(std::string("\0\xff\xff\xff\xff", 5), 1 << 20), Error);
    try {
        parseSingleEnvelope(body, 3);
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::payload_too_large) << "as a client stream's message";
    }
}

TEST(ConnectEnvelope, HeaderIsFlagsAndABigEndianLengthOnceFiveBytesCame) {
    std::string body = encodeEnvelope(kEnvelopeEndStream, std::string(300, 'x'));
    for (std::size_t n = 0; n < kEnvelopeHeaderSize; ++n)
        EXPECT_FALSE(envelopeHeader(std::string_view(body).substr(0, n))) << n;
    auto h = envelopeHeader(std::string_view(body).substr(0, kEnvelopeHeaderSize));
    ASSERT_TRUE(h);
    EXPECT_EQ(h->flags, kEnvelopeEndStream);
    EXPECT_EQ(h->length, 300u);
    EXPECT_EQ(envelopeHeader(std::string("\x01\xff\xff\xff\xff", 5))->length, 0xffffffffu);
}

TEST(E2bWire, MetadataFilterIsDecodedLikeE2bs) {
    // {"a b":"c&d=e","k":"v"} as the SDK sends it, after the HTTP layer's decode.
    auto m = parseMetadataFilter("a%2520b%3Dc%2526d%253De%26k%3Dv");
    ASSERT_EQ(m.size(), 2u);
    EXPECT_EQ(m["a b"], "c&d=e");
    EXPECT_EQ(m["k"], "v");
    EXPECT_TRUE(parseMetadataFilter("").empty());
    EXPECT_THROW(parseMetadataFilter("%3Dv"), Error);
}

TEST(E2bWire, SandboxHostNeedsThePortIdAndTheDomain) {
    auto h = parseSandboxHost("49983-sbx-abc123.Airlock.Test:8080", "airlock.test");
    ASSERT_TRUE(h);
    EXPECT_EQ(h->port, 49983u);
    EXPECT_EQ(h->sandboxId, "sbx-abc123");
    EXPECT_FALSE(parseSandboxHost("49983-sbx-abc123.other.test", "airlock.test"));
    EXPECT_FALSE(parseSandboxHost("airlock.test", "airlock.test"));
    EXPECT_TRUE(h->token.empty());
    // Airlock's own preview origin: the exposed port's token as one more label.
    auto own = parseSandboxHost("tok123.8000-sbx-a.airlock.test", "airlock.test");
    ASSERT_TRUE(own);
    EXPECT_EQ(own->token, "tok123");
    EXPECT_EQ(own->sandboxId, "sbx-a");
    EXPECT_EQ(own->port, 8000u);
    EXPECT_FALSE(parseSandboxHost("a.b.8000-sbx-a.airlock.test", "airlock.test"));
    EXPECT_FALSE(parseSandboxHost(".8000-sbx-a.airlock.test", "airlock.test"));
    EXPECT_FALSE(parseSandboxHost("70000-sbx-a.airlock.test", "airlock.test"));
    EXPECT_FALSE(parseSandboxHost("0-sbx-a.airlock.test", "airlock.test"));
    EXPECT_FALSE(parseSandboxHost("abc-sbx-a.airlock.test", "airlock.test"));
    EXPECT_FALSE(parseSandboxHost("8000-.airlock.test", "airlock.test"));
    EXPECT_FALSE(parseSandboxHost("8000-sbx-a.airlock.test", ""));
    EXPECT_TRUE(parseSandboxHost("8000-sbx-a.localhost", "localhost"));
}

TEST(E2bWire, ConnectCodesAndStatuses) {
    EXPECT_EQ(connectCodeFor(ErrorCode::not_found), "not_found");
    EXPECT_EQ(connectCodeFor(ErrorCode::policy_denied), "permission_denied");
    EXPECT_EQ(connectCodeFor(ErrorCode::unauthorized), "unauthenticated");
    EXPECT_EQ(connectHttpStatus("not_found"), 404);
    EXPECT_EQ(connectHttpStatus("already_exists"), 409);
    EXPECT_EQ(connectHttpStatus("unauthenticated"), 401);
    EXPECT_EQ(connectHttpStatus("nonsense"), 500);
}

TEST(E2bWire, EntryInfoIsEnvdsShape) {
    using Type = protocol::FileEntry::Type;
    protocol::FileEntry agent{"a.txt", "/home/user/a.txt",     Type::file, 9,
                              "0644",  "2026-01-02T03:04:05Z", 1000,       1000};
    auto e = entryInfo(agent);
    EXPECT_EQ(e["name"], "a.txt");
    EXPECT_EQ(e["path"], "/home/user/a.txt");
    EXPECT_EQ(e["type"], "FILE_TYPE_FILE");
    EXPECT_EQ(e["size"], "9");  // int64 is a string in proto3 JSON
    EXPECT_EQ(e["mode"], 0644);
    EXPECT_EQ(e["permissions"], "-rw-r--r--");
    EXPECT_EQ(e["owner"], "user");
    EXPECT_EQ(e["modifiedTime"], "2026-01-02T03:04:05Z");
    EXPECT_FALSE(e.contains("metadata")) << "an empty map is left out";
    agent.metadata = {{"owner", "team-a"}};
    EXPECT_EQ(entryInfo(agent)["metadata"], nlohmann::json({{"owner", "team-a"}}));
    agent.type = Type::directory;
    agent.mode = "0755";
    agent.uid = 0;
    agent.gid = 4242;
    e = entryInfo(agent);
    EXPECT_EQ(e["type"], "FILE_TYPE_DIRECTORY");
    EXPECT_EQ(e["permissions"], "drwxr-xr-x");
    EXPECT_EQ(e["owner"], "root");
    EXPECT_EQ(e["group"], "4242");
    agent.type = Type::other;
    EXPECT_FALSE(entryInfo(agent).contains("type")) << "a zero enum is left out, as envd's";
}

TEST(E2bWire, ASymlinkIsItsTargetsTypeAndModeWithItsOwnSizeAndTheResolvedTarget) {
    using Type = protocol::FileEntry::Type;
    protocol::FileEntry link{"l", "/home/user/l", Type::symlink, 12, "0777", "2026-01-02T03:04:05Z",
                             1000, 1000};
    link.target = "/etc/hostname";
    link.targetType = Type::file;
    link.targetMode = "0644";
    auto e = entryInfo(link);
    EXPECT_EQ(e["type"], "FILE_TYPE_FILE");
    EXPECT_EQ(e["mode"], 0644);
    EXPECT_EQ(e["size"], "12");
    EXPECT_EQ(e["permissions"], "Lrwxrwxrwx");
    EXPECT_EQ(e["path"], "/home/user/l");
    EXPECT_EQ(e["symlinkTarget"], "/etc/hostname");
    link.targetType = Type::directory;
    EXPECT_EQ(entryInfo(link)["type"], "FILE_TYPE_DIRECTORY");
    // One that leads nowhere: no type, mode 0, itself as its target.
    link.target.reset();
    e = entryInfo(link);
    EXPECT_FALSE(e.contains("type"));
    EXPECT_EQ(e["mode"], 0);
    EXPECT_EQ(e["symlinkTarget"], "/home/user/l");
    // Anything else has no symlinkTarget.
    protocol::FileEntry file{"a", "/a", Type::file, 1, "0644", "2026-01-02T03:04:05Z", 0, 0};
    EXPECT_FALSE(entryInfo(file).contains("symlinkTarget"));
}

TEST(E2bWire, FileSignaturesAreTheSdks) {
    // Made with the SDK's recipe in Node (sha256, base64, '=' stripped).
    EXPECT_EQ(fileSignature("/home/user/a.txt", "read", "user", "tok", 1700000000),
              "v1_rjyaqcqTmWCotSjgdIM5sPngpduJ8ZZz/orD09SpFng");
    EXPECT_EQ(fileSignature("a b.txt", "write", "", "tok", std::nullopt),
              "v1_dkI8Lp2yXCf06+6PK74lv5m8lTi0FEgWe2jj6HSo71M");
}

TEST(E2bWire, GzipIsTakenWhenTheClientTakesIt) {
    for (const char* yes : {"gzip", "gzip, deflate", "br;q=1.0, GZIP;q=0.5", "*", " deflate , gzip "})
        EXPECT_TRUE(acceptsGzip(yes)) << yes;
    for (const char* no : {"", "identity", "deflate, br", "gzip;q=0", "x-gzip", "gzipped",
                           "gzip;q=0, *", "*, gzip;level=1;q=0"})
        EXPECT_FALSE(acceptsGzip(no)) << no;
}

TEST(E2bWire, TokensArePerSandboxAndKeyed) {
    SandboxTokens a("k1"), b("k2");
    EXPECT_EQ(a.envdToken("sbx-1", "key-a"), a.envdToken("sbx-1", "key-a"));
    EXPECT_NE(a.envdToken("sbx-1", "key-a"), a.envdToken("sbx-2", "key-a"));
    EXPECT_NE(a.envdToken("sbx-1", "key-a"), a.envdToken("sbx-1", "key-b"));
    EXPECT_NE(a.envdToken("sbx-1", "key-a"), b.envdToken("sbx-1", "key-a"));
    EXPECT_NE(a.envdToken("sbx-1", "key-a"), a.trafficToken("sbx-1", "key-a"));
    EXPECT_EQ(a.envdToken("sbx-1", "key-a").size(), 6u + 64u);
    // The key id comes back from a token of that sandbox and kind only.
    EXPECT_EQ(a.envdTokenKey("sbx-1", a.envdToken("sbx-1", "key-a")), "key-a");
    EXPECT_EQ(a.trafficTokenKey("sbx-1", a.trafficToken("sbx-1", "key-a")), "key-a");
    EXPECT_FALSE(a.envdTokenKey("sbx-2", a.envdToken("sbx-1", "key-a")));
    EXPECT_FALSE(a.envdTokenKey("sbx-1", a.trafficToken("sbx-1", "key-a")));
    EXPECT_FALSE(a.envdTokenKey("sbx-1", b.envdToken("sbx-1", "key-a")));
    std::string t = a.envdToken("sbx-1", "key-a");
    EXPECT_FALSE(a.envdTokenKey("sbx-1", "key-b" + t.substr(5)));  // another key id swapped in
    EXPECT_FALSE(a.envdTokenKey("sbx-1", t.substr(6)));             // the bare MAC
    EXPECT_FALSE(a.envdTokenKey("sbx-1", ""));
    EXPECT_TRUE(SandboxTokens::same("abc", "abc"));
    EXPECT_FALSE(SandboxTokens::same("abc", "abd"));
    EXPECT_FALSE(SandboxTokens::same("abc", "ab"));
}

TEST(E2bWire, BasicAuthNamesAPlainUser) {
    EXPECT_EQ(basicAuthUser(""), "");
    EXPECT_EQ(basicAuthUser("Basic cm9vdDo="), "root");  // "root:"
    EXPECT_THROW(basicAuthUser("Bearer x"), Error);
    EXPECT_THROW(basicAuthUser("Basic !!!"), Error);
    EXPECT_THROW(basicAuthUser("Basic Li4vZXRjOg=="), Error);  // "../etc:"
    EXPECT_EQ(resolveUserPath("a/b", "user"), "/home/user/a/b");
    EXPECT_EQ(resolveUserPath("~/x", "root"), "/root/x");
    EXPECT_EQ(resolveUserPath("/abs", "user"), "/abs");
    EXPECT_EQ(resolveUserPath("", "user"), "/home/user");
}

TEST(Multipart, PartsKeepTheirFullPathFilename) {
    std::string body =
        "--XyZ\r\nContent-Disposition: form-data; name=\"file\"; "
        "filename=\"/home/user/dir/a.txt\"\r\n"
        "Content-Type: application/octet-stream\r\n\r\nhello\r\n--XyZ\r\n"
        "Content-Disposition: form-data; name=\"file\"; "
        "filename=\"rel/b.bin\"\r\n\r\nline1\r\nline2\r\n--XyZ--\r\n";
    auto parts = parseMultipart(body, multipartBoundary("multipart/form-data; boundary=XyZ"));
    ASSERT_EQ(parts.size(), 2u);
    EXPECT_EQ(parts[0].filename, "/home/user/dir/a.txt");
    EXPECT_EQ(parts[0].data, "hello");
    EXPECT_EQ(parts[1].filename, "rel/b.bin");
    EXPECT_EQ(parts[1].data, "line1\r\nline2");  // CRLF inside the data stays
    EXPECT_EQ(multipartBoundary("multipart/form-data; boundary=\"q b\""), "q b");
    EXPECT_THROW(multipartBoundary("application/json"), Error);
    EXPECT_THROW(
        parseMultipart("--XyZ\r\nContent-Disposition: form-data\r\n\r\nunterminated", "XyZ"),
        Error);
    EXPECT_THROW(parseMultipart("no boundary at all", "XyZ"), Error);
    EXPECT_TRUE(parseMultipart("--XyZ--\r\n", "XyZ").empty());
}

// The reader behind parseMultipart takes the body in any pieces: a part's
// data goes on before the part ends, and only a delimiter's worth waits.
TEST(Multipart, TheReaderStreamsPartsWhateverThePiecesAndHoldsBackADelimiterAtMost) {
    std::string big(300 * 1024, 'x');
    big[1000] = '\r';  // a CR, a near-delimiter inside the data
    big.replace(5000, 7, "\r\n--XyQ");  // most of a delimiter, not one
    std::string body = "preamble\r\n--XyZ\r\nContent-Disposition: form-data; name=\"file\"; "
                       "filename=\"/tmp/a\"\r\n\r\n" + big +
                       "\r\n--XyZ\r\nContent-Disposition: form-data; filename=\"b\"\r\n\r\n"
                       "\r\n--XyZ--\r\nepilogue";
    for (std::size_t piece : {std::size_t(1), std::size_t(7), std::size_t(4096), body.size()}) {
        MultipartReader reader("XyZ");
        std::vector<MultipartReader::Event> events;
        std::vector<std::string> files;
        std::vector<std::string> data;
        std::size_t dataBeforeEnd = 0;
        for (std::size_t at = 0; at < body.size(); at += piece) {
            events.clear();
            reader.feed(std::string_view(body).substr(at, piece), events);
            for (auto& e : events) {
                if (e.kind == MultipartReader::Event::Kind::part_start) {
                    files.push_back(e.filename);
                    data.emplace_back();
                } else if (e.kind == MultipartReader::Event::Kind::data) {
                    data.back() += e.bytes;
                }
            }
            // What the reader holds is bounded: the first part's bytes flow
            // on while its body is still arriving.
            if (files.size() == 1 && at > 200 * 1024 && at < 290 * 1024)
                dataBeforeEnd = std::max(dataBeforeEnd, data[0].size());
        }
        reader.finish();
        ASSERT_EQ(files, (std::vector<std::string>{"/tmp/a", "b"})) << piece;
        EXPECT_EQ(data[0], big) << piece;
        EXPECT_EQ(data[1], "") << piece;
        if (piece < big.size()) {
            EXPECT_GT(dataBeforeEnd, 100u * 1024) << piece;
        }
    }
    // Truncated anywhere before its closing delimiter: refused at the end.
    for (std::size_t cut : {std::size_t(3), std::size_t(40), std::size_t(2000), body.size() - 12}) {
        MultipartReader reader("XyZ");
        std::vector<MultipartReader::Event> events;
        reader.feed(std::string_view(body).substr(0, cut), events);
        EXPECT_THROW(reader.finish(), Error) << cut;
    }
    // Headers that never end are refused once they pass their bound.
    MultipartReader endless("XyZ");
    std::vector<MultipartReader::Event> events;
    endless.feed("--XyZ\r\nX-Long: ", events);
    EXPECT_THROW(endless.feed(std::string(MultipartReader::kMaxHeaderBytes, 'h'), events), Error);
}

}  // namespace
}  // namespace airlock::e2b
