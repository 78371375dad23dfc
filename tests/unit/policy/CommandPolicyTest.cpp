// The policy corpus: command strings with the decision and class they must
// get, including the bypass forms (operators after an allowed prefix, $() and
// backticks, nested sh -c, env/xargs/sudo wrappers, quoting tricks, newlines)
// and inline code given to interpreters.
#include <gtest/gtest.h>

#include "policy/CommandPolicy.hpp"
#include "policy/ShellSplitter.hpp"

namespace airlock::policy {
namespace {

struct Case {
    const char* shell;
    Decision decision;
    CommandClass cls;
};

constexpr Decision A = Decision::allow, P = Decision::approve, D = Decision::deny;
using C = CommandClass;

const Case kCorpus[] = {
    // inspection, verification, build: allowed
    {"ls -la", A, C::inspection},
    {"cat README.md | grep -n TODO", A, C::inspection},
    {"git status && git diff HEAD~1", A, C::inspection},
    {"git log --oneline -5", A, C::inspection},
    {"find . -name '*.py'", A, C::inspection},
    {"pwd; echo hi; wc -l src/*.cpp", A, C::inspection},
    {"env", A, C::inspection},
    {"pytest -q tests/", A, C::verification},
    {"python3 -m pytest -x", A, C::verification},
    {"npm test", A, C::verification},
    {"npm run lint", A, C::verification},
    {"yarn test --watch=false", A, C::verification},
    {"go test ./...", A, C::verification},
    {"cargo test", A, C::verification},
    {"cargo clippy -- -D warnings", A, C::verification},
    {"make check", A, C::verification},
    {"ruff check . && mypy src", A, C::verification},
    {"tsc --noEmit", A, C::verification},
    {"eslint src --fix", A, C::verification},
    {"make -j4", A, C::build},
    {"cmake -S . -B build && cmake --build build", A, C::build},
    {"gcc -O2 main.c -o main", A, C::build},
    {"cargo build --release", A, C::build},
    {"go build ./cmd/app", A, C::build},
    {"npm run build", A, C::build},
    {"python3 setup.py build", A, C::build},
    {"./run_tests.sh", A, C::other},
    {"python3 app.py --port 8000", A, C::other},
    {"rm -rf build/", A, C::other},
    {"rm -rf /tmp/work", A, C::other},
    {"sed -i 's/a/b/' file.txt", A, C::other},
    {"git commit -am 'wip'", A, C::other},
    // code execution: allowed and logged
    {"python3 -c 'print(1+1)'", A, C::code_execution},
    {"node -e 'console.log(1)'", A, C::code_execution},
    {"perl -e 'print 1'", A, C::code_execution},
    {"ruby -e 'puts 1'", A, C::code_execution},
    {"php -r 'echo 1;'", A, C::code_execution},
    {"python3 - <<EOF\nprint(1)\nEOF", A, C::code_execution},
    {"deno eval 'console.log(1)'", A, C::code_execution},
    // network: allowed (the egress proxy decides destinations), git push approved
    {"curl -sSf https://example.com", A, C::network},
    {"wget -q https://example.com/x.tar.gz", A, C::network},
    {"git clone https://git.example.org/x/y.git", A, C::network},
    {"git fetch origin && git pull", A, C::network},
    {"ssh host uptime", A, C::network},
    {"scp a.txt host:/tmp/", A, C::network},
    {"rsync -a src/ host:/backup/", A, C::network},
    {"git push origin main", P, C::network},
    {"git -C repo push", P, C::network},
    // dependency changes: approval
    {"pip install requests", P, C::dependency_change},
    {"pip3 install -r requirements.txt", P, C::dependency_change},
    {"python3 -m pip install numpy", P, C::dependency_change},
    {"npm install", P, C::dependency_change},
    {"npm i lodash", P, C::dependency_change},
    {"npm ci", A, C::build},
    {"npm ci --omit=dev", A, C::build},
    {"pip install -r requirements.txt --require-hashes", A, C::build},
    {"pip3 install --require-hashes -r requirements.txt", A, C::build},
    {"pip install --require-hashes -r requirements.txt evil", P, C::dependency_change},
    {"pip install --require-hashes requests", P, C::dependency_change},
    {"yarn", P, C::dependency_change},
    {"yarn add react", P, C::dependency_change},
    {"pnpm add -D vitest", P, C::dependency_change},
    {"cargo add serde", P, C::dependency_change},
    {"cargo update", P, C::dependency_change},
    {"go get git.example.org/x/y@latest", P, C::dependency_change},
    {"go mod tidy", P, C::dependency_change},
    {"gem install rails", P, C::dependency_change},
    {"bundle install", P, C::dependency_change},
    {"apt-get install -y jq", P, C::dependency_change},
    {"apt update", P, C::dependency_change},
    {"apk add curl", P, C::dependency_change},
    {"poetry lock", P, C::dependency_change},
    {"uv pip install flask", P, C::dependency_change},
    {"npx create-react-app x", P, C::dependency_change},
    {"python3 setup.py install", P, C::dependency_change},
    // destructive: denied
    {"rm -rf /", D, C::destructive},
    {"rm -rf /*", D, C::destructive},
    {"rm -fr ~", D, C::destructive},
    {"rm -r -f $HOME", D, C::destructive},
    {"rm --recursive --force /etc", D, C::destructive},
    {"rm -rf /home/", D, C::destructive},
    {"rm -rf --no-preserve-root /", D, C::destructive},
    {"mkfs.ext4 /dev/vda", D, C::destructive},
    {"dd if=/dev/zero of=/dev/vda bs=1M", D, C::destructive},
    {"echo x > /dev/vda", D, C::destructive},
    {"chmod -R 777 /", D, C::destructive},
    {"chown -R user /usr", D, C::destructive},
    {"git reset --hard HEAD~3", D, C::destructive},
    {"git push --force origin main", D, C::destructive},
    {"git push -f", D, C::destructive},
    {"git push origin +main", D, C::destructive},
    {"git push --force-with-lease", D, C::destructive},
    {"find / -delete", D, C::destructive},
    {"wipefs -a /dev/vda", D, C::destructive},
    // secret access: denied
    {"cat .env", D, C::secret_access},
    {"cat config/.env.production", D, C::secret_access},
    {"less ~/.aws/credentials", D, C::secret_access},
    {"cat /proc/1/environ", D, C::secret_access},
    {"cat /proc/self/environ | tr '\\0' '\\n'", D, C::secret_access},
    {"cp ~/.ssh/id_rsa /tmp/k", D, C::secret_access},
    {"grep TOKEN < .env", D, C::secret_access},
    {"cat ~/.netrc", D, C::secret_access},
    {"cat .env.example", A, C::inspection},
    // bypass forms: the strictest part wins
    {"ls; rm -rf /", D, C::destructive},
    {"echo ok && rm -rf ~", D, C::destructive},
    {"false || rm -rf /", D, C::destructive},
    {"ls | xargs rm -rf /", D, C::destructive},
    {"echo / | xargs -n1 rm -rf", A, C::other},  // targets from stdin: see the limits below
    {"ls & rm -rf / &", D, C::destructive},
    {"echo $(rm -rf /)", D, C::destructive},
    {"echo `rm -rf /`", D, C::destructive},
    {"echo \"$(cat .env)\"", D, C::secret_access},
    {"sh -c 'rm -rf /'", D, C::destructive},
    {"bash -c \"sh -c 'rm -rf /'\"", D, C::destructive},
    {"bash -lc 'git push origin main'", P, C::network},
    {"env rm -rf /", D, C::destructive},
    {"env -i PATH=/bin rm -rf /", D, C::destructive},
    {"FOO=1 rm -rf /", D, C::destructive},
    {"sudo rm -rf /", D, C::destructive},
    {"sudo -u root rm -rf /etc", D, C::destructive},
    {"nohup rm -rf / &", D, C::destructive},
    {"timeout 5 rm -rf /", D, C::destructive},
    {"nice -n 10 pip install x", P, C::dependency_change},
    {"/bin/rm -rf /", D, C::destructive},
    {"\\rm -rf /", D, C::destructive},
    {"r\"m\" -rf /", D, C::destructive},
    {"'rm' '-rf' '/'", D, C::destructive},
    {"rm -rf '/'", D, C::destructive},
    {"ls\nrm -rf /", D, C::destructive},
    {"(cd /tmp && rm -rf /)", D, C::destructive},
    {"{ echo hi; rm -rf /; }", D, C::destructive},
    {"eval 'rm -rf /'", D, C::destructive},
    {"find . -name x -exec rm -rf / \\;", D, C::destructive},
    {"echo hi > out.txt; cat .env", D, C::secret_access},
    {"ls && pip install evil", P, C::dependency_change},
    {"git status; git push", P, C::network},
    {"echo 'rm -rf /'", A, C::inspection},
    {"echo \"rm -rf /\"", A, C::inspection},
    {"# rm -rf /\nls", A, C::inspection},
    {"python3 -c 'import os' && rm -rf /", D, C::destructive},
    // Limits, stated in docs/security.md: what the shell computes at run time
    // (a file name assembled by a substitution, arguments fed to xargs) is not
    // visible to the policy; the VM boundary and the egress proxy contain it.
    {"cat $(printf '.e%s' nv)", A, C::inspection},
};

TEST(CommandPolicy, CorpusOfAtLeastOneHundredCommands) {
    ASSERT_GE(std::size(kCorpus), 100u);
    CommandPolicy policy;
    for (const auto& c : kCorpus) {
        auto v = policy.judgeShell(c.shell);
        EXPECT_EQ(decisionName(v.decision), decisionName(c.decision))
            << c.shell << "  -> " << v.reason;
        EXPECT_EQ(className(v.commandClass), className(c.cls)) << c.shell << "  -> " << v.reason;
    }
}

TEST(CommandPolicy, ArgvIsJudgedWithoutASplitButShellArgumentsAre) {
    CommandPolicy policy;
    EXPECT_EQ(policy.judgeArgv({"echo", "rm -rf /; cat .env"}).decision, Decision::allow)
        << "an argv word is data, not a command";
    EXPECT_EQ(policy.judgeArgv({"sh", "-c", "rm -rf /"}).decision, Decision::deny);
    EXPECT_EQ(policy.judgeArgv({"/usr/bin/env", "bash", "-c", "cat .env"}).decision,
              Decision::deny);
    EXPECT_EQ(policy.judgeArgv({"git", "push"}).decision, Decision::approve);
    auto code = policy.judgeArgv({"python3", "-c", "import os; print(os.getcwd())"});
    EXPECT_EQ(code.commandClass, CommandClass::code_execution);
    ASSERT_EQ(code.inlineCode.size(), 1u);
    EXPECT_EQ(code.inlineCode[0], "import os; print(os.getcwd())")
        << "inline code is kept for the audit log";
}

TEST(CommandPolicy, RulesOverrideDefaultsDenyFirst) {
    PolicyRules sandbox;
    sandbox.allow = {"pip install *"};
    sandbox.approve = {"python3 -c*", "curl *"};
    sandbox.deny = {"git push*"};
    CommandPolicy policy;
    EXPECT_EQ(policy.judgeShell("pip install requests", sandbox).decision, Decision::allow);
    EXPECT_EQ(policy.judgeShell("python3 -c 'print(1)'", sandbox).decision, Decision::approve);
    auto denied = policy.judgeShell("echo hi && git push origin main", sandbox);
    EXPECT_EQ(denied.decision, Decision::deny);
    EXPECT_NE(denied.reason.find("git push*"), std::string::npos) << denied.reason;
    EXPECT_EQ(denied.part, "git push origin main");
    // An operator deny beats a sandbox allow.
    PolicyRules op;
    op.deny = {"curl *"};
    CommandPolicy strict(op);
    PolicyRules allowCurl;
    allowCurl.allow = {"curl *"};
    EXPECT_EQ(strict.judgeShell("curl https://x", allowCurl).decision, Decision::deny);
    // Defaults stay for what no rule names.
    EXPECT_EQ(policy.judgeShell("rm -rf /", sandbox).decision, Decision::deny);
}

TEST(CommandPolicy, GlobsMatchWholeCommands) {
    EXPECT_TRUE(CommandPolicy::globMatch("git push*", "git push origin main"));
    EXPECT_TRUE(CommandPolicy::globMatch("git push*", "git push"));
    EXPECT_TRUE(CommandPolicy::globMatch("git push*", "git pushx"))
        << "a glob is literal text, not words";
    EXPECT_FALSE(CommandPolicy::globMatch("git push", "git push origin"));
    EXPECT_TRUE(CommandPolicy::globMatch("npm ? x", "npm i x"));
    EXPECT_TRUE(CommandPolicy::globMatch("*", ""));
    EXPECT_FALSE(CommandPolicy::globMatch("a*b", "acd"));
}

TEST(ShellSplitter, SplitsOperatorsSubstitutionsAndRedirects) {
    auto parts =
        ShellSplitter::split("a 'b c' \"d $(e f)\" > out.txt 2>&1 | g `h` && i; j\nk < in");
    std::vector<std::string> firsts;
    for (const auto& p : parts) firsts.push_back(p.words.empty() ? "" : p.words[0]);
    EXPECT_EQ(firsts, (std::vector<std::string>{"e", "a", "h", "g", "i", "j", "k"}));
    EXPECT_EQ(parts[1].words[1], "b c");
    EXPECT_EQ(parts[1].redirects, std::vector<std::string>{"out.txt"});
    EXPECT_EQ(parts.back().inputs, std::vector<std::string>{"in"});
    // Garbage never throws and never loops.
    for (const char* junk :
         {"'unterminated", "\"also", "$(((", "`", "((((", ")))", "\\", "a >", "<<"})
        EXPECT_NO_THROW(ShellSplitter::split(junk)) << junk;
}

}  // namespace
}  // namespace airlock::policy
