#pragma once
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/Error.hpp"
#include "templates/TemplateSpec.hpp"

namespace airlock::templates {

// A Dockerfile that cannot become a template (ErrorCode::unprocessable). The
// message reads "Dockerfile line N (INSTRUCTION): detail", N being the line
// the instruction starts on.
class DockerfileError : public Error {
  public:
    DockerfileError(unsigned line, std::string instruction, const std::string& detail);
    unsigned line() const { return line_; }
    const std::string& instruction() const { return instruction_; }  // upper case; "" when none

  private:
    unsigned line_;
    std::string instruction_;
};

struct ParsedDockerfile {
    std::string from;  // name[:tag] after ARG substitution; the caller checks the template exists
    std::vector<Step> steps;
    std::optional<StartSpec> start;  // CMD/ENTRYPOINT; ready stays none (the caller decides)
    std::map<std::string, std::string> labels;
    std::vector<unsigned> exposedPorts;  // first appearance order, no duplicates
};

// The Dockerfile door of the template builder: a single-stage Dockerfile
// whose FROM names an Airlock template. Follows Docker's (BuildKit's) rules
// for continuations, comments, the `# escape=` directive, quoting and
// $VAR/${VAR:-w}/${VAR:+w}/${VAR:?w} substitution (ARG and ENV, in FROM, COPY,
// ADD, ENV, ARG, LABEL, WORKDIR, USER and EXPOSE; never in RUN/CMD/ENTRYPOINT,
// which the shell expands). Declared ARGs with a value reach each RUN as
// RunStep::env, as in Docker. Heredocs in RUN are passed to the shell.
// `baseEnv` is the FROM template's environment, so that `ENV PATH=/x:$PATH`
// extends it as Docker does: parse once for `from`, look the template up,
// then parse again with its env.
//
// COPY/ADD sources are cleaned context-relative paths ("./" is the root) that
// may hold wildcards, for BuildContext::select (a directory gives its
// contents, as Docker). ADD copies a local archive as is: no
// auto-extraction. Every refusal is a DockerfileError.
ParsedDockerfile parseDockerfile(std::string_view text,
                                 const std::map<std::string, std::string>& buildArgs = {},
                                 const std::map<std::string, std::string>& baseEnv = {});

// [a-z0-9_-]{1,64} optionally followed by ":" [a-z0-9_.-]{1,64}.
bool isTemplateReference(std::string_view ref);
// Whether `ref` can only be a container image reference (a registry path,
// a digest, upper case, a dotted host), for a message that says so. A plain
// `ubuntu:22.04` is a valid template reference and does not count.
bool looksLikeImageReference(std::string_view ref);

}  // namespace airlock::templates
