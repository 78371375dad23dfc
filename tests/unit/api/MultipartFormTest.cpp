// The multipart/form-data parser that template builds upload through: a
// parser that cut a binary part short, or let a malformed body through,
// would build from bytes the client never sent.
#include <gtest/gtest.h>

#include <string>

#include "api/MultipartForm.hpp"
#include "core/Error.hpp"

namespace airlock {
namespace {

const std::string kCurlType =
    "multipart/form-data; boundary=------------------------21d06b224883aa10";
const std::string kDash = "--------------------------21d06b224883aa10";

// Bytes that come close to the delimiter without being one: line breaks
// followed by partial, extended or mid-line copies of it, NULs and 0xff.
std::string nearBoundaryBinary() {
    std::string b;
    for (int i = 0; i < 256; ++i) b += static_cast<char>(i);
    b += "\r\n--";
    b += "\r\n" + kDash.substr(0, kDash.size() - 1) + "\r\n";  // one character short
    b += "\r\n" + kDash + "X\r\n";                             // longer: another boundary
    b += "mid-line " + kDash + "\r\n";                         // not at a line start
    b += "\n" + kDash + "x--\r\n";
    b += std::string("\0\0\r\n\r\n", 6);
    b += "\r";  // a trailing CR of the content itself
    return b;
}

// What `curl -F spec=@spec.json;type=application/json -F context=@ctx.tar`
// sends (captured from curl 7.88), with a binary tar-like part.
std::string curlBody(const std::string& spec, const std::string& tar) {
    return kDash + "\r\n" +
           "Content-Disposition: form-data; name=\"spec\"; filename=\"spec.json\"\r\n"
           "Content-Type: application/json\r\n"
           "\r\n" +
           spec + "\r\n" + kDash + "\r\n" +
           "Content-Disposition: form-data; name=\"context\"; filename=\"ctx.tar\"\r\n"
           "Content-Type: application/octet-stream\r\n"
           "\r\n" +
           tar + "\r\n" + kDash + "--\r\n";
}

ErrorCode codeOf(std::string_view type, std::string_view body, std::string* message = nullptr,
                 std::size_t maxParts = 16) {
    try {
        parseMultipartForm(type, body, maxParts);
    } catch (const Error& e) {
        if (message) *message = e.what();
        return e.code();
    }
    ADD_FAILURE() << "no error thrown";
    return ErrorCode::internal;
}

std::string messageOf(std::string_view type, std::string_view body, std::size_t maxParts = 16) {
    std::string message;
    EXPECT_EQ(codeOf(type, body, &message, maxParts), ErrorCode::bad_request);
    return message;
}

TEST(MultipartForm, ReadsWhatCurlSendsWithABinaryPart) {
    std::string spec = R"({"name":"web","steps":[{"run":"echo hi"}]})";
    std::string tar = nearBoundaryBinary();
    auto parts = parseMultipartForm(kCurlType, curlBody(spec, tar));
    ASSERT_EQ(parts.size(), 2u);
    EXPECT_EQ(parts[0].name, "spec");
    EXPECT_EQ(parts[0].filename, "spec.json");
    EXPECT_EQ(parts[0].contentType, "application/json");
    EXPECT_EQ(parts[0].body, spec);
    EXPECT_EQ(parts[1].name, "context");
    EXPECT_EQ(parts[1].filename, "ctx.tar");
    EXPECT_EQ(parts[1].contentType, "application/octet-stream");
    EXPECT_EQ(parts[1].body, tar);
}

TEST(MultipartForm, PartsComeInBodyOrderWhateverTheirNames) {
    std::string body = kDash + "\r\nContent-Disposition: form-data; name=\"context\"\r\n\r\nT\r\n" +
                       kDash + "\r\nContent-Disposition: form-data; name=\"spec\"\r\n\r\nS\r\n" +
                       kDash + "--";
    auto parts = parseMultipartForm(kCurlType, body);
    ASSERT_EQ(parts.size(), 2u);
    EXPECT_EQ(parts[0].name, "context");
    EXPECT_EQ(parts[0].body, "T");
    EXPECT_EQ(parts[0].contentType, "");  // none sent: the caller applies text/plain
    EXPECT_EQ(parts[1].name, "spec");
    EXPECT_EQ(parts[1].body, "S");
}

TEST(MultipartForm, QuotedBoundaryAndCaseInsensitiveNames) {
    std::string type = "Multipart/Form-Data ; Charset=utf-8; BOUNDARY=\"a b:c?\"";
    std::string body =
        "--a b:c?\r\ncontent-DISPOSITION: Form-Data; NAME=\"x\"\r\nCONTENT-type: text/plain\r\n\r\n"
        "hello\r\n--a b:c?--\r\n";
    auto parts = parseMultipartForm(type, body);
    ASSERT_EQ(parts.size(), 1u);
    EXPECT_EQ(parts[0].name, "x");
    EXPECT_EQ(parts[0].contentType, "text/plain");
    EXPECT_EQ(parts[0].body, "hello");
}

TEST(MultipartForm, ToleratesBareLineFeeds) {
    std::string body =
        "--XyZ\nContent-Disposition: form-data; name=\"a\"\n\nline1\nline2\n"
        "--XyZ\nContent-Disposition: form-data; name=\"b\"\n\n\n--XyZ--\n";
    auto parts = parseMultipartForm("multipart/form-data; boundary=XyZ", body);
    ASSERT_EQ(parts.size(), 2u);
    EXPECT_EQ(parts[0].body, "line1\nline2");
    EXPECT_EQ(parts[1].body, "");
}

TEST(MultipartForm, IgnoresPreambleEpilogueAndTransportPadding) {
    std::string body =
        "This is a preamble.\r\n--XyZ is not here\r\n--XyZ \t\r\n"
        "Content-Disposition: form-data; name=\"a\"\r\n\r\nA\r\n--XyZ--  and an epilogue\r\n"
        "--XyZ\r\nContent-Disposition: form-data; name=\"b\"\r\n\r\nB\r\n--XyZ--\r\n";
    auto parts = parseMultipartForm("multipart/form-data; boundary=XyZ", body);
    ASSERT_EQ(parts.size(), 1u);
    EXPECT_EQ(parts[0].name, "a");
    EXPECT_EQ(parts[0].body, "A");
}

TEST(MultipartForm, EmptyPartsAndAnEmptyForm) {
    std::string type = "multipart/form-data; boundary=b";
    // The blank line after the headers, then straight to the delimiter.
    auto parts =
        parseMultipartForm(type, "--b\r\nContent-Disposition: form-data; name=\"e\"\r\n\r\n--b--");
    ASSERT_EQ(parts.size(), 1u);
    EXPECT_EQ(parts[0].body, "");
    parts = parseMultipartForm(
        type, "--b\r\nContent-Disposition: form-data; name=\"e\"\r\n\r\n\r\n--b--");
    ASSERT_EQ(parts.size(), 1u);
    EXPECT_EQ(parts[0].body, "");
    EXPECT_TRUE(parseMultipartForm(type, "--b--\r\n").empty());
}

TEST(MultipartForm, FilenamesWithQuotesEscapesAndBackslashes) {
    std::string type = "multipart/form-data; boundary=b";
    auto filenameOf = [&](const std::string& disposition) {
        auto parts = parseMultipartForm(
            type, "--b\r\nContent-Disposition: " + disposition + "\r\n\r\nx\r\n--b--\r\n");
        EXPECT_EQ(parts.size(), 1u);
        return parts.empty() ? std::string() : parts[0].filename;
    };
    EXPECT_EQ(filenameOf(R"(form-data; name="f"; filename="say \"hi\".txt")"), "say \"hi\".txt");
    EXPECT_EQ(filenameOf(R"(form-data; name="f"; filename="a\\b.txt")"), "a\\b.txt");
    // A browser's unescaped Windows path comes through as sent.
    EXPECT_EQ(filenameOf(R"(form-data; name="f"; filename="C:\dir\f.txt")"), "C:\\dir\\f.txt");
    // curl's WHATWG escaping of '"' is left to the caller.
    EXPECT_EQ(filenameOf(R"(form-data; name="f"; filename="a%22b.txt")"), "a%22b.txt");
    EXPECT_EQ(filenameOf(R"(form-data; name="f"; filename=plain.tar)"), "plain.tar");
    EXPECT_EQ(filenameOf(R"(form-data; filename="semi;colon.txt"; name="f")"), "semi;colon.txt");
    EXPECT_EQ(filenameOf(R"(form-data; name="f"; filename="x"; filename*=UTF-8''na%C3%AFve.txt)"),
              "na\xC3\xAFve.txt");
    EXPECT_EQ(filenameOf(R"(form-data; name="f")"), "");
}

TEST(MultipartForm, ContentMayHoldAnythingButAWholeDelimiterLine) {
    std::string type = "multipart/form-data; boundary=b";
    std::string content = "--b is not a delimiter\r\n--bb\r\nx--b\r\n--b\tx\r\n\r";
    auto parts = parseMultipartForm(
        type, "--b\r\nContent-Disposition: form-data; name=\"f\"\r\n\r\n" + content + "\r\n--b--");
    ASSERT_EQ(parts.size(), 1u);
    EXPECT_EQ(parts[0].body, content);
}

TEST(MultipartForm, RejectsAContentTypeWithoutAUsableBoundary) {
    std::string body = "--b\r\nContent-Disposition: form-data; name=\"f\"\r\n\r\nx\r\n--b--";
    EXPECT_NE(messageOf("application/json", body).find("not multipart/form-data"),
              std::string::npos);
    EXPECT_NE(messageOf("multipart/form-data", body).find("no boundary"), std::string::npos);
    EXPECT_NE(messageOf("multipart/form-data; charset=utf-8", body).find("no boundary"),
              std::string::npos);
    EXPECT_NE(messageOf("multipart/form-data; boundary=", body).find("invalid"), std::string::npos);
    EXPECT_NE(messageOf("multipart/form-data; boundary=\"\"", body).find("invalid"),
              std::string::npos);
    EXPECT_NE(
        messageOf("multipart/form-data; boundary=" + std::string(71, 'a'), body).find("invalid"),
        std::string::npos);
    EXPECT_NE(messageOf("multipart/form-data; boundary=\"a\\\"b\"", body).find("invalid"),
              std::string::npos);
    EXPECT_NE(messageOf("multipart/form-data; boundary=\"trailing \"", body).find("invalid"),
              std::string::npos);
    EXPECT_NE(messageOf("multipart/form-data; boundary=\"unterminated", body).find("unterminated"),
              std::string::npos);
    EXPECT_NE(messageOf("multipart/form-data; boundary=a; boundary=b", body).find("twice"),
              std::string::npos);
    // 70 characters is the most RFC 2046 allows, and fine.
    std::string longest(70, 'z');
    EXPECT_EQ(parseMultipartForm(
                  "multipart/form-data; boundary=" + longest,
                  "--" + longest + "\r\nContent-Disposition: form-data; name=\"f\"\r\n\r\nx\r\n--" +
                      longest + "--")
                  .size(),
              1u);
}

TEST(MultipartForm, RejectsABodyWithoutItsDelimiters) {
    std::string type = "multipart/form-data; boundary=b";
    EXPECT_NE(messageOf(type, "").find("no delimiter"), std::string::npos);
    EXPECT_NE(messageOf(type, "no delimiter here --b\r\n").find("no delimiter"), std::string::npos);
    EXPECT_NE(messageOf(type, "--b\r\nContent-Disposition: form-data; name=\"f\"\r\n\r\nx")
                  .find("final delimiter"),
              std::string::npos);
    EXPECT_NE(
        messageOf(type, "--b\r\nContent-Disposition: form-data; name=\"f\"\r\n\r\nx\r\n--b\r\n")
            .find("final delimiter"),
        std::string::npos);
    EXPECT_NE(messageOf(type, "--b\r\nContent-Disposition: form-data; name=\"f\"\r\n")
                  .find("final delimiter"),
              std::string::npos);
    // A delimiter that ends the body without its line break is no delimiter.
    EXPECT_NE(messageOf(type, "--b\r\nContent-Disposition: form-data; name=\"f\"\r\n\r\nx\r\n--b")
                  .find("final delimiter"),
              std::string::npos);
}

TEST(MultipartForm, RejectsPartsWithoutAFormDataName) {
    std::string type = "multipart/form-data; boundary=b";
    auto withHeaders = [](const std::string& headers) {
        return "--b\r\n" + headers + "\r\nx\r\n--b--\r\n";
    };
    EXPECT_NE(
        messageOf(type, withHeaders("Content-Type: text/plain\r\n")).find("Content-Disposition"),
        std::string::npos);
    EXPECT_NE(messageOf(type, withHeaders("")).find("Content-Disposition"), std::string::npos);
    EXPECT_NE(messageOf(type, withHeaders("Content-Disposition: attachment; name=\"f\"\r\n"))
                  .find("not form-data"),
              std::string::npos);
    EXPECT_NE(messageOf(type, withHeaders("Content-Disposition: form-data\r\n")).find("no name"),
              std::string::npos);
    EXPECT_NE(messageOf(type, withHeaders("Content-Disposition: form-data; filename=\"a\"\r\n"))
                  .find("no name"),
              std::string::npos);
    EXPECT_NE(messageOf(type, withHeaders("Content-Disposition: form-data; name=\"\"\r\n"))
                  .find("no name"),
              std::string::npos);
    EXPECT_NE(messageOf(type, withHeaders("Content-Disposition: form-data; name=\"a\"\r\n"
                                          "Content-Disposition: form-data; name=\"b\"\r\n"))
                  .find("two Content-Disposition"),
              std::string::npos);
    EXPECT_NE(messageOf(type, withHeaders("Content-Disposition: form-data; name=\"a\r\n"))
                  .find("unterminated"),
              std::string::npos);
    EXPECT_NE(messageOf(type, withHeaders("no colon here\r\n")).find("malformed header"),
              std::string::npos);
    EXPECT_NE(messageOf(type, withHeaders("Bad Name: x\r\n")).find("malformed header"),
              std::string::npos);
    // Content without a header block at all.
    EXPECT_NE(messageOf(type, "--b\r\nraw content\r\n--b--").find("malformed header"),
              std::string::npos);
}

TEST(MultipartForm, FoldedHeaderLinesJoinTheirHeader) {
    auto parts = parseMultipartForm(
        "multipart/form-data; boundary=b",
        "--b\r\nContent-Disposition: form-data;\r\n name=\"folded\"\r\n\r\nx\r\n--b--");
    ASSERT_EQ(parts.size(), 1u);
    EXPECT_EQ(parts[0].name, "folded");
}

TEST(MultipartForm, RejectsDuplicateNames) {
    std::string body =
        "--b\r\nContent-Disposition: form-data; name=\"spec\"\r\n\r\n1\r\n"
        "--b\r\nContent-Disposition: form-data; name=\"spec\"\r\n\r\n2\r\n--b--";
    EXPECT_NE(messageOf("multipart/form-data; boundary=b", body).find("two parts named 'spec'"),
              std::string::npos);
}

TEST(MultipartForm, BoundsThePartCount) {
    std::string body;
    for (int i = 0; i < 5; ++i)
        body += "--b\r\nContent-Disposition: form-data; name=\"p" + std::to_string(i) +
                "\"\r\n\r\nx\r\n";
    body += "--b--";
    std::string type = "multipart/form-data; boundary=b";
    EXPECT_EQ(parseMultipartForm(type, body, 5).size(), 5u);
    EXPECT_NE(messageOf(type, body, 4).find("more than 4 parts"), std::string::npos);
}

TEST(MultipartForm, BoundsTheHeaderBlock) {
    std::string type = "multipart/form-data; boundary=b";
    std::string disposition = "Content-Disposition: form-data; name=\"f\"\r\n";
    std::string filler = "X-Filler: " + std::string(7000, 'a') + "\r\n";
    auto parts = parseMultipartForm(type, "--b\r\n" + disposition + filler + "\r\nx\r\n--b--");
    ASSERT_EQ(parts.size(), 1u);
    std::string big = "X-Filler: " + std::string(9000, 'a') + "\r\n";
    EXPECT_NE(messageOf(type, "--b\r\n" + disposition + big + "\r\nx\r\n--b--").find("over 8 KiB"),
              std::string::npos);
    // No blank line at all in a long part: reported as the 8 KiB limit,
    // without reading the rest.
    EXPECT_NE(messageOf(type, "--b\r\n" + disposition + std::string(20000, 'z') + "\r\n--b--")
                  .find("over 8 KiB"),
              std::string::npos);
}

}  // namespace
}  // namespace airlock
