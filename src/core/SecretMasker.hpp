#pragma once
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

namespace airlock {

// Replaces every secret value with *** in text the API returns or stores:
// the exact value and its base64 and hex (lower and upper case) forms.
// Values shorter than kMinLength are not masked (they would blank out
// ordinary text); the API refuses such secrets (422).
class SecretMasker {
  public:
    static constexpr std::size_t kMinLength = 8;
    SecretMasker() = default;
    explicit SecretMasker(const std::vector<std::string>& values);
    std::string mask(std::string text) const;
    // mask(), counting the values it replaced (overlapping forms count once).
    std::string mask(std::string text, std::size_t& replaced) const;
    bool empty() const { return needles_.empty(); }
    // Every form that is masked, longest first.
    const std::vector<std::string>& needles() const { return needles_; }

  private:
    std::vector<std::string> needles_;  // longest first
};

// Every string of a JSON value masked, object keys included (guest-written
// listings, a task's prompt).
nlohmann::json maskJsonStrings(const nlohmann::json& in, const SecretMasker& masker);

// A record's data masked, never its structure or its verdicts: every string
// value, and the object keys that hold data (env names, paths). Left alone:
// a key shaped like a field name (a lowercase identifier such as
// "exit_code"), and the value of a verdict or identity field (decision,
// result, kind, state, sha256, commit, id...) when it is a plain token, as
// the host writes them. So a secret chosen to equal a field's name, a
// decision or a piece of a commit id cannot remove or change it.
// An object that had anything replaced says where and how often (when
// `annotate`): "masked": {"/stdout": 2, "/env/TOKEN": 1} (JSON pointers).
nlohmann::json maskRecord(const nlohmann::json& record, const SecretMasker& masker,
                          bool annotate = true);
bool isFieldName(const std::string& key);
// True for a field whose token value maskRecord leaves alone.
bool isVerdictField(const std::string& key);

}  // namespace airlock
