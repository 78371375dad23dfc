#include <gtest/gtest.h>

#include "templates/DockerfileParser.hpp"

namespace airlock::templates {
namespace {

using Args = std::map<std::string, std::string>;
using Vars = std::vector<std::pair<std::string, std::string>>;

struct Failure {
    unsigned line = 0;
    std::string instruction;
    std::string message;
};

// The DockerfileError parsing `text` throws.
Failure failure(std::string_view text, const Args& args = {}) {
    try {
        parseDockerfile(text, args);
    } catch (const DockerfileError& e) {
        EXPECT_EQ(e.code(), ErrorCode::unprocessable);
        return {e.line(), e.instruction(), e.what()};
    }
    ADD_FAILURE() << "parsed without an error:\n" << text;
    return {};
}

const RunStep& run(const ParsedDockerfile& p, std::size_t i) {
    return std::get<RunStep>(p.steps.at(i));
}
const CopyStep& copy(const ParsedDockerfile& p, std::size_t i) {
    return std::get<CopyStep>(p.steps.at(i));
}

TEST(DockerfileParser, ParsesFromRunAndCmdIntoStepsAndStart) {
    auto p = parseDockerfile("FROM base:v1\nRUN apt-get update\nCMD python3 -m http.server 8000\n");
    EXPECT_EQ(p.from, "base:v1");
    ASSERT_EQ(p.steps.size(), 1u);
    EXPECT_EQ(run(p, 0).shell, "apt-get update");
    EXPECT_FALSE(run(p, 0).user);
    EXPECT_FALSE(run(p, 0).cwd);
    ASSERT_TRUE(p.start);
    EXPECT_EQ(p.start->cmd, "python3 -m http.server 8000");
    EXPECT_EQ(p.start->ready.kind, ReadyCheck::Kind::none);
}

TEST(DockerfileParser, InstructionKeywordsAreCaseInsensitive) {
    auto p = parseDockerfile("from base\nrun echo hi\nWorkDir /app\n");
    EXPECT_EQ(p.from, "base");
    EXPECT_EQ(run(p, 0).shell, "echo hi");
    EXPECT_EQ(std::get<WorkdirStep>(p.steps.at(1)).path, "/app");
}

TEST(DockerfileParser, JoinsContinuationLinesAndSkipsCommentsAndBlankLines) {
    auto p = parseDockerfile(
        "# a comment\n"
        "\n"
        "   # an indented comment\n"
        "FROM base\r\n"
        "RUN apt-get update && \\\n"
        "    # a comment inside the continuation is dropped\n"
        "\n"
        "    apt-get install -y curl \\   \n"
        "    && echo '# not a comment'\n"
        "  RUN true\n");
    ASSERT_EQ(p.steps.size(), 2u);
    EXPECT_EQ(run(p, 0).shell,
              "apt-get update &&     apt-get install -y curl     && echo '# not a comment'");
    EXPECT_EQ(run(p, 1).shell, "true");
}

TEST(DockerfileParser, EscapeDirectiveChangesTheContinuationCharacter) {
    auto p = parseDockerfile("# escape=`\nFROM base\nRUN echo a `\n  b\nCOPY x\\y /dest\n");
    EXPECT_EQ(run(p, 0).shell, "echo a   b");
    EXPECT_EQ(copy(p, 1).src, "x\\y");  // '\' is no escape any more
    // After an instruction, "# escape=" is an ordinary comment.
    p = parseDockerfile("FROM base\n# escape=`\nRUN a \\\n b\n");
    EXPECT_EQ(run(p, 0).shell, "a  b");
    EXPECT_NE(failure("# escape=x\nFROM base\n").message.find("escape"), std::string::npos);
}

TEST(DockerfileParser, ShellFormRunIsKeptVerbatimWithoutSubstitution) {
    auto p = parseDockerfile("FROM base\nARG V=1\nRUN echo \"$V\" ${HOME} 'a  b' \\$x\n");
    EXPECT_EQ(run(p, 0).shell, "echo \"$V\" ${HOME} 'a  b' \\$x");
}

TEST(DockerfileParser, ExecFormRunSingleQuotesEachArgument) {
    auto p = parseDockerfile(R"(FROM base
RUN ["echo", "it's", "$HOME", "a b"]
)");
    EXPECT_EQ(run(p, 0).shell, R"('echo' 'it'\''s' '$HOME' 'a b')");
}

TEST(DockerfileParser, BracketsThatAreNotAJsonArrayAreTheShellForm) {
    auto p = parseDockerfile("FROM base\nRUN [ -f /etc/os-release ] && echo yes\nRUN [\"a\", 1]\n");
    EXPECT_EQ(run(p, 0).shell, "[ -f /etc/os-release ] && echo yes");
    EXPECT_EQ(run(p, 1).shell, "[\"a\", 1]");
}

TEST(DockerfileParser, RunFlagsAreRefusedNamingTheFlag) {
    auto f = failure("FROM base\nRUN --mount=type=cache,target=/root/.cache pip install x\n");
    EXPECT_EQ(f.line, 2u);
    EXPECT_EQ(f.instruction, "RUN");
    EXPECT_NE(f.message.find("--mount"), std::string::npos) << f.message;
    EXPECT_NE(failure("FROM base\nRUN --network=none true\n").message.find("--network"),
              std::string::npos);
    EXPECT_NE(failure("FROM base\nRUN\n").message.find("requires a command"), std::string::npos);
    EXPECT_NE(failure("FROM base\nRUN []\n").message.find("requires a command"), std::string::npos);
}

TEST(DockerfileParser, RunHeredocAloneBecomesTheScript) {
    auto p = parseDockerfile(
        "FROM base\nRUN <<EOF\napt-get update\n# kept: part of the script\nEOF\nRUN true\n");
    ASSERT_EQ(p.steps.size(), 2u);
    EXPECT_EQ(run(p, 0).shell, "apt-get update\n# kept: part of the script\n");
    EXPECT_EQ(run(p, 1).shell, "true");
    p = parseDockerfile("FROM base\nRUN <<-'EOT'\n\techo a\n\tEOT\n");
    EXPECT_EQ(run(p, 0).shell, "echo a\n");
}

TEST(DockerfileParser, RunHeredocWithAShebangRunsAsAFile) {
    auto p = parseDockerfile("FROM base\nRUN <<EOF\n#!/usr/bin/env python3\nprint('hi')\nEOF\n");
    const auto& shell = run(p, 0).shell;
    EXPECT_NE(shell.find("mktemp"), std::string::npos);
    EXPECT_NE(shell.find(R"('#!/usr/bin/env python3
print('\''hi'\'')
')"),
              std::string::npos)
        << shell;
}

TEST(DockerfileParser, RunHeredocInsideACommandIsLeftToTheShell) {
    auto p = parseDockerfile("FROM base\nRUN cat <<EOF > /etc/motd\nhello $USER\nEOF\nUSER app\n");
    EXPECT_EQ(run(p, 0).shell, "cat <<EOF > /etc/motd\nhello $USER\nEOF");
    EXPECT_EQ(std::get<UserStep>(p.steps.at(1)).user, "app");
    auto f = failure("FROM base\nRUN cat <<EOF\nno end\n");
    EXPECT_EQ(f.line, 2u);
    EXPECT_NE(f.message.find("not terminated"), std::string::npos);
    EXPECT_NE(failure("FROM base\nCOPY <<EOF /x\nhi\nEOF\n").message.find("heredoc"),
              std::string::npos);
}

TEST(DockerfileParser, CopyMakesOneStepPerSource) {
    auto p = parseDockerfile("FROM base\nCOPY a.txt b/ ./c/../d /opt/\nCOPY one /opt/file\n");
    ASSERT_EQ(p.steps.size(), 4u);
    EXPECT_EQ(copy(p, 0).src, "a.txt");
    EXPECT_EQ(copy(p, 1).src, "b/");
    EXPECT_EQ(copy(p, 2).src, "d");
    for (int i = 0; i < 3; ++i) EXPECT_EQ(copy(p, i).dest, "/opt/");
    EXPECT_EQ(copy(p, 3).dest, "/opt/file");
    EXPECT_FALSE(copy(p, 3).mode);
    EXPECT_FALSE(copy(p, 3).owner);
}

TEST(DockerfileParser, MultipleSourcesMakeTheDestinationADirectory) {
    auto p = parseDockerfile("FROM base\nCOPY a b /opt\n");
    EXPECT_EQ(copy(p, 0).dest, "/opt/");
    EXPECT_EQ(copy(p, 1).dest, "/opt/");
}

TEST(DockerfileParser, CopyTakesChownAndChmod) {
    auto p = parseDockerfile(
        "FROM base\nCOPY --chown=app:staff --chmod=0755 --link run.sh /usr/local/bin/\n");
    EXPECT_EQ(copy(p, 0).owner, "app:staff");
    EXPECT_EQ(copy(p, 0).mode, "0755");
    EXPECT_EQ(copy(p, 0).dest, "/usr/local/bin/");
    EXPECT_NE(failure("FROM base\nCOPY --chmod=u+x a /b\n").message.find("octal"),
              std::string::npos);
    EXPECT_NE(failure("FROM base\nCOPY --chown=root:wheel:x a /b\n").message.find("user[:group]"),
              std::string::npos);
    EXPECT_NE(failure("FROM base\nCOPY --exclude=*.md . /b\n").message.find("--exclude"),
              std::string::npos);
}

TEST(DockerfileParser, CopyJsonFormAllowsSpacesInPaths) {
    auto p = parseDockerfile(R"(FROM base
COPY ["my file.txt", "other dir/", "/srv/data dir/"]
)");
    ASSERT_EQ(p.steps.size(), 2u);
    EXPECT_EQ(copy(p, 0).src, "my file.txt");
    EXPECT_EQ(copy(p, 1).src, "other dir/");
    EXPECT_EQ(copy(p, 0).dest, "/srv/data dir/");
}

TEST(DockerfileParser, RelativeCopyDestinationResolvesAgainstWorkdir) {
    auto p = parseDockerfile(
        "FROM base\nCOPY x y\nWORKDIR /app\nCOPY . .\nCOPY cfg.json conf/app.json\n"
        "COPY a ../etc/\nCOPY b ../../../../c\n");
    EXPECT_EQ(copy(p, 0).dest, "/y");  // the default workdir is "/"
    EXPECT_EQ(copy(p, 2).src, "./");   // the context's root: its contents
    EXPECT_EQ(copy(p, 2).dest, "/app/");
    EXPECT_EQ(copy(p, 3).dest, "/app/conf/app.json");
    EXPECT_EQ(copy(p, 4).dest, "/etc/");
    EXPECT_EQ(copy(p, 5).dest, "/c");  // '..' stops at '/', as Docker
}

TEST(DockerfileParser, CopySourcesMustStayInsideTheContext) {
    auto f = failure("FROM base\nCOPY /etc/passwd /x\n");
    EXPECT_EQ(f.line, 2u);
    EXPECT_EQ(f.instruction, "COPY");
    EXPECT_NE(f.message.find("relative"), std::string::npos);
    EXPECT_NE(failure("FROM base\nCOPY ../secret /x\n").message.find("outside the build context"),
              std::string::npos);
    EXPECT_NE(failure("FROM base\nADD a/../../b /x\n").message.find("outside the build context"),
              std::string::npos);
    EXPECT_NE(failure("FROM base\nCOPY onlyone\n").message.find("source and a destination"),
              std::string::npos);
}

TEST(DockerfileParser, CopyFromAnotherStageIsMultiStage) {
    auto f = failure("FROM base\nCOPY --from=builder /out /app\n");
    EXPECT_EQ(f.instruction, "COPY");
    EXPECT_NE(f.message.find("multi-stage builds are not supported"), std::string::npos)
        << f.message;
}

TEST(DockerfileParser, AddFromAUrlIsRefused) {
    for (auto src :
         {"https://example.com/x.tgz", "http://example.com/x", "git@github.com:o/r.git"}) {
        auto f = failure(std::string("FROM base\n\nADD ") + src + " /opt/\n");
        EXPECT_EQ(f.line, 3u);
        EXPECT_EQ(f.instruction, "ADD");
        EXPECT_NE(f.message.find("ADD from a URL is not supported"), std::string::npos)
            << f.message;
    }
    EXPECT_NE(failure("FROM base\nADD --checksum=sha256:00 x /y\n").message.find("--checksum"),
              std::string::npos);
}

TEST(DockerfileParser, AddOfALocalArchiveCopiesItWithoutExtracting) {
    auto p = parseDockerfile("FROM base\nADD --chown=1000:1000 dist.tar.gz /opt/\n");
    ASSERT_EQ(p.steps.size(), 1u);
    EXPECT_EQ(copy(p, 0).src, "dist.tar.gz");
    EXPECT_EQ(copy(p, 0).dest, "/opt/");
    EXPECT_EQ(copy(p, 0).owner, "1000:1000");
}

TEST(DockerfileParser, EnvTakesKeyValuePairsAndTheLegacyForm) {
    auto p = parseDockerfile(
        "FROM base\nENV A=1 B=\"v 2\" C='$A' D=x\\ y E=\nENV LEGACY  value with  spaces\n");
    EXPECT_EQ(std::get<EnvStep>(p.steps.at(0)).vars,
              (Vars{{"A", "1"}, {"B", "v 2"}, {"C", "$A"}, {"D", "x y"}, {"E", ""}}));
    EXPECT_EQ(std::get<EnvStep>(p.steps.at(1)).vars, (Vars{{"LEGACY", "value with  spaces"}}));
    EXPECT_NE(failure("FROM base\nENV A=\"open\n").message.find("unterminated quote"),
              std::string::npos);
    EXPECT_NE(failure("FROM base\nENV A=1 B\n").message.find("KEY=VALUE"), std::string::npos);
    EXPECT_NE(failure("FROM base\nENV ONLY\n").message.find("KEY"), std::string::npos);
}

TEST(DockerfileParser, EnvValuesSeeOnlyEarlierInstructions) {
    auto p = parseDockerfile("FROM base\nENV abc=hello\nENV abc=bye def=$abc\nENV ghi=$abc\n");
    EXPECT_EQ(std::get<EnvStep>(p.steps.at(1)).vars, (Vars{{"abc", "bye"}, {"def", "hello"}}));
    EXPECT_EQ(std::get<EnvStep>(p.steps.at(2)).vars, (Vars{{"ghi", "bye"}}));
}

TEST(DockerfileParser, EnvExtendsTheBaseTemplatesEnvironment) {
    auto p =
        parseDockerfile("FROM base\nENV PATH=/opt/bin:$PATH\n", {}, {{"PATH", "/usr/bin:/bin"}});
    EXPECT_EQ(std::get<EnvStep>(p.steps.at(0)).vars, (Vars{{"PATH", "/opt/bin:/usr/bin:/bin"}}));
}

TEST(DockerfileParser, ArgSubstitutesInLaterInstructions) {
    auto p = parseDockerfile(
        "FROM base\n"
        "ARG VERSION=1.0\n"
        "ARG DIR\n"
        "ARG EMPTY=\n"
        "WORKDIR /opt/app-$VERSION\n"
        "COPY app-${VERSION}.jar ${DIR:-lib}/\n"
        "LABEL v=\"$VERSION\" set=${VERSION:+yes} unset=${DIR:+yes} e1=${EMPTY-d} e2=${EMPTY:-d} "
        "lit=\\$VERSION "
        "q='$VERSION'\n"
        "USER ${OWNER:-app}\n"
        "EXPOSE ${PORT:-8080}\n",
        {{"DIR", "/srv"}});
    EXPECT_EQ(std::get<WorkdirStep>(p.steps.at(0)).path, "/opt/app-1.0");
    EXPECT_EQ(copy(p, 1).src, "app-1.0.jar");
    EXPECT_EQ(copy(p, 1).dest, "/srv/");
    EXPECT_EQ(p.labels, (std::map<std::string, std::string>{{"v", "1.0"},
                                                            {"set", "yes"},
                                                            {"unset", "yes"},
                                                            {"e1", ""},
                                                            {"e2", "d"},
                                                            {"lit", "$VERSION"},
                                                            {"q", "$VERSION"}}));
    EXPECT_EQ(std::get<UserStep>(p.steps.at(2)).user, "app");
    EXPECT_EQ(p.exposedPorts, std::vector<unsigned>{8080});
}

TEST(DockerfileParser, BuildArgsOverrideDefaultsAndUndeclaredOnesAreIgnored) {
    auto p = parseDockerfile("FROM base\nARG A=default\nENV X=$A Y=$UNDECLARED\n",
                             {{"A", "given"}, {"UNDECLARED", "no"}});
    EXPECT_EQ(std::get<EnvStep>(p.steps.at(0)).vars, (Vars{{"X", "given"}, {"Y", ""}}));
}

TEST(DockerfileParser, ArgBeforeFromSetsFromAndIsInheritedWhenRedeclared) {
    auto p = parseDockerfile(
        "ARG BASE=base\nARG TAG=v1\nFROM ${BASE}:$TAG\nENV A=$TAG\nARG TAG\nENV B=$TAG\n");
    EXPECT_EQ(p.from, "base:v1");
    EXPECT_EQ(std::get<EnvStep>(p.steps.at(0)).vars, (Vars{{"A", ""}}));  // not redeclared yet
    EXPECT_EQ(std::get<EnvStep>(p.steps.at(1)).vars, (Vars{{"B", "v1"}}));
    EXPECT_EQ(parseDockerfile("ARG TAG=v1\nFROM base:$TAG\n", {{"TAG", "v2"}}).from, "base:v2");
}

TEST(DockerfileParser, ArgsReachRunStepsAsEnvironmentUnlessEnvSetsThem) {
    auto p =
        parseDockerfile("FROM base\nRUN one\nARG A=1 B\nARG C=3\nRUN two\nENV C=env\nRUN three\n");
    EXPECT_TRUE(run(p, 0).env.empty());
    EXPECT_EQ(run(p, 1).env, (Vars{{"A", "1"}, {"C", "3"}}));  // B has no value
    EXPECT_EQ(run(p, 3).env, (Vars{{"A", "1"}}));
}

TEST(DockerfileParser, SubstitutionErrorsNameTheLine) {
    auto f = failure("FROM base\nARG NEED\nWORKDIR ${NEED:?set NEED}\n");
    EXPECT_EQ(f.line, 3u);
    EXPECT_EQ(f.instruction, "WORKDIR");
    EXPECT_NE(f.message.find("set NEED"), std::string::npos) << f.message;
    EXPECT_NE(failure("FROM base\nENV A=${B\n").message.find("'}'"), std::string::npos);
    EXPECT_NE(failure("FROM base\nENV A=${B/x/y}\n").message.find("unsupported substitution"),
              std::string::npos);
    EXPECT_NE(failure("FROM base\nARG 1X=2\n").message.find("invalid ARG name"), std::string::npos);
}

TEST(DockerfileParser, DeeplyNestedSubstitutionsAreRefused) {
    std::string deep = "x";
    for (int i = 0; i < 40; ++i) deep = "${A:-" + deep + "}";
    EXPECT_NE(failure("FROM base\nENV B=" + deep + "\n").message.find("nested"), std::string::npos);
}

TEST(DockerfileParser, RelativeWorkdirResolvesAgainstThePreviousOne) {
    auto p = parseDockerfile("FROM base\nWORKDIR /a\nWORKDIR b\nWORKDIR ../c/./d/\nWORKDIR /x y\n");
    EXPECT_EQ(std::get<WorkdirStep>(p.steps.at(0)).path, "/a");
    EXPECT_EQ(std::get<WorkdirStep>(p.steps.at(1)).path, "/a/b");
    EXPECT_EQ(std::get<WorkdirStep>(p.steps.at(2)).path, "/a/c/d");
    EXPECT_EQ(std::get<WorkdirStep>(p.steps.at(3)).path, "/x y");
    EXPECT_NE(failure("FROM base\nWORKDIR\n").message.find("requires a path"), std::string::npos);
}

TEST(DockerfileParser, UserTakesANameAndAnOptionalGroup) {
    auto p = parseDockerfile("FROM base\nUSER app\nUSER 1000:1000\nUSER www-data:www-data\n");
    EXPECT_EQ(std::get<UserStep>(p.steps.at(0)).user, "app");
    EXPECT_EQ(std::get<UserStep>(p.steps.at(1)).user, "1000:1000");
    EXPECT_EQ(std::get<UserStep>(p.steps.at(2)).user, "www-data:www-data");
    EXPECT_NE(failure("FROM base\nUSER -oops\n").message.find("user[:group]"), std::string::npos);
    EXPECT_NE(failure("FROM base\nUSER a b\n").message.find("user[:group]"), std::string::npos);
    EXPECT_NE(failure("FROM base\nUSER a:\n").message.find("user[:group]"), std::string::npos);
}

TEST(DockerfileParser, LabelsAndMaintainerBecomeLabels) {
    auto p = parseDockerfile(
        "FROM base\nLABEL org.opencontainers.image.title=\"My app\" version=2\nLABEL version=3\n"
        "LABEL legacy form value\nMAINTAINER Jane <jane@example.com>\n");
    EXPECT_EQ(p.labels,
              (std::map<std::string, std::string>{{"org.opencontainers.image.title", "My app"},
                                                  {"version", "3"},
                                                  {"legacy", "form value"},
                                                  {"maintainer", "Jane <jane@example.com>"}}));
    EXPECT_TRUE(p.steps.empty());
}

TEST(DockerfileParser, ExposeRecordsTcpUdpPortsAndRanges) {
    auto p = parseDockerfile("FROM base\nEXPOSE 80 8080/tcp 53/udp\nEXPOSE 80/TCP 9000-9002/tcp\n");
    EXPECT_EQ(p.exposedPorts, (std::vector<unsigned>{80, 8080, 53, 9000, 9001, 9002}));
    for (auto bad : {"0", "65536", "http", "80/icmp", "90-80", "-1", "8080/", "1e3"}) {
        auto f = failure(std::string("FROM base\nEXPOSE ") + bad + "\n");
        EXPECT_EQ(f.line, 2u) << bad;
        EXPECT_EQ(f.instruction, "EXPOSE") << bad;
    }
    EXPECT_NE(failure("FROM base\nEXPOSE 1-2000\n").message.find("1024"), std::string::npos);
}

TEST(DockerfileParser, CmdShellFormIsTheStartCommand) {
    auto p = parseDockerfile("FROM base\nCMD [\"old\"]\nCMD node server.js --port \"$PORT\"\n");
    EXPECT_EQ(p.start->cmd, "node server.js --port \"$PORT\"");  // the last one wins
}

TEST(DockerfileParser, CmdExecFormIsQuotedForTheShell) {
    auto p = parseDockerfile("FROM base\nCMD [\"python3\", \"-c\", \"print('hi')\"]\n");
    EXPECT_EQ(p.start->cmd, R"('python3' '-c' 'print('\''hi'\'')')");
}

TEST(DockerfileParser, ExecEntrypointTakesExecCmdAsArguments) {
    auto p = parseDockerfile(
        "FROM base\nENTRYPOINT [\"/usr/bin/app\", \"serve\"]\nCMD [\"--port\", \"80\"]\n");
    EXPECT_EQ(p.start->cmd, "'/usr/bin/app' 'serve' '--port' '80'");
    p = parseDockerfile("FROM base\nCMD [\"--port\", \"80\"]\nENTRYPOINT [\"/usr/bin/app\"]\n");
    EXPECT_EQ(p.start->cmd, "'/usr/bin/app' '--port' '80'");
    p = parseDockerfile("FROM base\nENTRYPOINT [\"/usr/bin/app\"]\n");
    EXPECT_EQ(p.start->cmd, "'/usr/bin/app'");
}

TEST(DockerfileParser, ExecEntrypointRunsAShellCmdThroughBinSh) {
    auto p = parseDockerfile("FROM base\nENTRYPOINT [\"tini\", \"--\"]\nCMD echo $HOME\n");
    EXPECT_EQ(p.start->cmd, "'tini' '--' '/bin/sh' '-c' 'echo $HOME'");
}

TEST(DockerfileParser, ShellEntrypointIgnoresCmd) {
    auto p = parseDockerfile("FROM base\nENTRYPOINT exec app --flag\nCMD [\"ignored\"]\n");
    EXPECT_EQ(p.start->cmd, "exec app --flag");
}

TEST(DockerfileParser, NoCmdOrEntrypointLeavesTheStartUnset) {
    EXPECT_FALSE(parseDockerfile("FROM base\nRUN true\n").start);
    EXPECT_FALSE(parseDockerfile("FROM base\nCMD []\n").start);
    EXPECT_NE(failure("FROM base\nCMD\n").message.find("requires a command"), std::string::npos);
}

TEST(DockerfileParser, HealthcheckOnLine2IsRefusedNamingLineAndInstruction) {
    auto f = failure("FROM base\nHEALTHCHECK CMD curl -f http://localhost/\n");
    EXPECT_EQ(f.line, 2u);
    EXPECT_EQ(f.instruction, "HEALTHCHECK");
    EXPECT_NE(f.message.find("line 2"), std::string::npos) << f.message;
    EXPECT_NE(f.message.find("HEALTHCHECK"), std::string::npos) << f.message;
    EXPECT_NE(f.message.find("unsupported instruction"), std::string::npos) << f.message;
}

TEST(DockerfileParser, UnsupportedAndUnknownInstructionsAreRefused) {
    for (auto instruction : {"SHELL [\"/bin/bash\", \"-c\"]", "STOPSIGNAL SIGTERM", "ONBUILD RUN x",
                             "VOLUME /data", "healthcheck NONE", "FROBNICATE now"}) {
        auto f = failure(std::string("FROM base\nRUN true\n") + instruction + "\n");
        EXPECT_EQ(f.line, 3u) << instruction;
        EXPECT_NE(f.message.find("line 3"), std::string::npos) << f.message;
        EXPECT_NE(f.message.find("unsupported instruction"), std::string::npos) << f.message;
    }
    EXPECT_EQ(failure("FROM base\nfrobnicate x\n").instruction, "FROBNICATE");
}

TEST(DockerfileParser, ErrorsNameTheLineWhereTheInstructionStarts) {
    auto f = failure("FROM base\n# note\nRUN true\nVOLUME \\\n  /a \\\n  /b\n");
    EXPECT_EQ(f.line, 4u);
    EXPECT_NE(f.message.find("line 4"), std::string::npos) << f.message;
    EXPECT_NE(f.message.find("VOLUME"), std::string::npos) << f.message;
}

TEST(DockerfileParser, MultiStageBuildsAreRefused) {
    auto f = failure("FROM base AS build\nRUN make\nFROM base\nCOPY x /y\n");
    EXPECT_EQ(f.line, 3u);
    EXPECT_EQ(f.instruction, "FROM");
    EXPECT_NE(f.message.find("multi-stage builds are not supported"), std::string::npos)
        << f.message;
}

TEST(DockerfileParser, FromTakesATemplateNameTagAndOptionalStageName) {
    EXPECT_EQ(parseDockerfile("FROM my_tpl-2\n").from, "my_tpl-2");
    EXPECT_EQ(parseDockerfile("FROM python:3.12-slim AS app\n").from, "python:3.12-slim");
    // Syntactically a template: whether it exists is the caller's check.
    EXPECT_EQ(parseDockerfile("FROM ubuntu:22.04\n").from, "ubuntu:22.04");
    EXPECT_NE(failure("FROM\n").message.find("requires a template name"), std::string::npos);
    EXPECT_NE(failure("FROM a b\n").message.find("AS <name>"), std::string::npos);
    EXPECT_NE(failure("FROM --platform=linux/amd64 base\n").message.find("--platform"),
              std::string::npos);
}

TEST(DockerfileParser, FromScratchIsRefused) {
    auto f = failure("FROM scratch\n");
    EXPECT_EQ(f.line, 1u);
    EXPECT_EQ(f.instruction, "FROM");
    EXPECT_NE(f.message.find("scratch"), std::string::npos);
}

TEST(DockerfileParser, FromAnImageReferenceIsRefused) {
    for (auto ref :
         {"docker.io/library/ubuntu:22.04", "ghcr.io/o/r", "ubuntu@sha256:abc", "Ubuntu"}) {
        auto f = failure(std::string("FROM ") + ref + "\n");
        EXPECT_EQ(f.instruction, "FROM");
        EXPECT_NE(f.message.find("image reference"), std::string::npos) << f.message;
    }
    EXPECT_NE(failure("FROM a:b:c\n").message.find("not a template name"), std::string::npos);
    EXPECT_NE(failure("FROM " + std::string(65, 'a') + "\n").message.find("not a template name"),
              std::string::npos);
}

TEST(DockerfileParser, FromMustBeTheFirstInstructionAfterArgs) {
    auto f = failure("# hello\nRUN true\nFROM base\n");
    EXPECT_EQ(f.line, 2u);
    EXPECT_EQ(f.instruction, "RUN");
    EXPECT_NE(f.message.find("FROM"), std::string::npos);
}

TEST(DockerfileParser, AMissingFromNamesLine1AndFrom) {
    for (auto text : {"", "# only a comment\n", "ARG A=1\n"}) {
        auto f = failure(text);
        EXPECT_EQ(f.line, 1u);
        EXPECT_EQ(f.instruction, "FROM");
        EXPECT_NE(f.message.find("line 1"), std::string::npos) << f.message;
        EXPECT_NE(f.message.find("FROM"), std::string::npos) << f.message;
    }
}

TEST(DockerfileParser, OversizedInputIsRefused) {
    try {
        parseDockerfile("FROM base\n" + std::string(1024 * 1024, '#'));
        ADD_FAILURE();
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::unprocessable);
        EXPECT_NE(std::string(e.what()).find("1 MiB"), std::string::npos);
    }
    auto f = failure("FROM base\nRUN echo " + std::string(64 * 1024, 'x') + "\n");
    EXPECT_EQ(f.line, 2u);
    EXPECT_NE(f.message.find("64 KiB"), std::string::npos);
    std::string many = "FROM base\n";
    for (int i = 0; i < 10000; ++i) many += "RUN t\n";
    f = failure(many);
    EXPECT_EQ(f.line, 10001u);
    EXPECT_NE(f.message.find("10000 instructions"), std::string::npos);
}

TEST(DockerfileParser, NulBytesAreRefused) {
    auto f = failure(std::string("FROM base\nRUN a\0b\n", 18));
    EXPECT_EQ(f.line, 2u);
    EXPECT_NE(failure("FROM base\nRUN [\"a\\u0000b\"]\n").message.find("NUL"), std::string::npos);
}

TEST(DockerfileParser, TemplateReferencesAndImageReferencesAreTold) {
    EXPECT_TRUE(isTemplateReference("base"));
    EXPECT_TRUE(isTemplateReference("ubuntu:22.04"));
    EXPECT_FALSE(isTemplateReference("base:"));
    EXPECT_FALSE(isTemplateReference(":v1"));
    EXPECT_FALSE(isTemplateReference("Base"));
    EXPECT_FALSE(isTemplateReference("a.b"));
    EXPECT_TRUE(looksLikeImageReference("docker.io/library/node:20"));
    EXPECT_TRUE(looksLikeImageReference("node@sha256:0123"));
    EXPECT_TRUE(looksLikeImageReference("localhost:5000/app"));
    EXPECT_TRUE(looksLikeImageReference("MyImage"));
    EXPECT_TRUE(looksLikeImageReference("registry.example.com"));
    EXPECT_FALSE(looksLikeImageReference("ubuntu:22.04"));
    EXPECT_FALSE(looksLikeImageReference("base"));
    EXPECT_FALSE(looksLikeImageReference("not an image"));
}

}  // namespace
}  // namespace airlock::templates
