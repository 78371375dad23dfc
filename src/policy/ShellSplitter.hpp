#pragma once
#include <string>
#include <vector>

namespace airlock::policy {

// One simple command found in a shell string: its words after quote removal,
// the targets of its output redirections (`> FILE`) and what it reads from
// (`< FILE`, a here-doc's delimiter).
struct SimpleCommand {
    std::vector<std::string> words;
    std::vector<std::string> redirects;
    std::vector<std::string> inputs;
};

// Splits a POSIX shell string into every simple command it would run, for
// classification only (nothing is executed or expanded): quotes and escapes,
// the operators ; && || | & and newlines, ( subshells ) and { groups },
// $(...) and `...` (their contents are split too, and the word holding them
// keeps a placeholder), redirections. Unbalanced input is split as far as it
// goes: the classifier then sees the strictest reading, never less.
// `sh -c STRING` nesting, sudo, env, xargs and friends are unwrapped by the
// classifier, which calls split() again on nested strings.
class ShellSplitter {
public:
    static std::vector<SimpleCommand> split(const std::string& script);
};

}  // namespace airlock::policy
